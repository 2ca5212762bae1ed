"""The sans-I/O codec and the hybrid clock, without any socket."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventcloud.wire.hlc import HybridClock, pack, unpack
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, make_quad
from eventcloud.wire.frames import (
    ERROR, PUSH, REPLY, REQUEST, FrameDecoder, Message, ProtocolError, encode, event_from_wire,
    event_to_wire, pattern_from_wire, quad_from_wire, quad_to_wire, term_from_wire, term_to_wire,
)


def frame(envelope) -> bytes:
    payload = msgpack.packb(envelope)
    return struct.pack(">I", len(payload)) + payload


def test_messages_round_trip_even_split_byte_by_byte():
    messages = [Message(REQUEST, "publish", 7, 123, {"ev": {"g": "http://g", "q": []}}),
                Message(REPLY, None, 7, 124, {"g": "x"}),
                Message(ERROR, None, 8, 1, {"code": "bad-request", "message": "no"}),
                Message(PUSH, "notification", None, 5, {"subscription": "s"})]
    data = b"".join(encode(m) for m in messages)
    decoder = FrameDecoder()
    out = []
    for byte in data:
        decoder.feed(bytes([byte]))
        while (m := decoder.next_message()) is not None:
            out.append(m)
    assert out == messages
    assert decoder.pending == 0


@pytest.mark.parametrize("data, code", [
    (struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1", "protocol"),          # not msgpack
    (frame([1, 2, 3]), "protocol"),                                         # not a map
    (frame({"k": "nope", "b": {}}), "protocol"),                            # unknown kind
    (frame({"k": "req", "id": 1, "b": {}}), "protocol"),                    # no op
    (frame({"k": "req", "op": "ping", "b": {}}), "protocol"),              # no id
    (frame({"k": "req", "op": "ping", "id": 1, "b": [1]}), "protocol"),     # body not a map
    (frame({"k": "req", "op": "ping", "id": 1, "hlc": -4, "b": {}}), "protocol"),
    (frame({"k": "req", "op": "rm -rf", "id": 1, "b": {}}), "unknown-op"),
    (struct.pack(">I", 1 << 31), "too-large"),
])
def test_bad_frames_raise_protocol_errors_with_a_code(data, code):
    decoder = FrameDecoder(max_frame=1 << 20, known_ops=frozenset({"ping"}))
    decoder.feed(data)
    with pytest.raises(ProtocolError) as info:
        decoder.next_message()
    assert info.value.code == code


def test_oversized_outgoing_message_is_refused():
    with pytest.raises(ProtocolError, match="frame limit"):
        encode(Message(REQUEST, "publish", 1, 0, {"x": "a" * 2000}), max_frame=1000)


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_garbage_never_crashes_the_decoder(data):
    decoder = FrameDecoder(max_frame=4096)
    decoder.feed(data)
    try:
        while decoder.next_message() is not None:
            pass
    except ProtocolError:
        pass


def test_terms_quads_events_and_patterns_round_trip():
    g = IRI("http://ex/g")
    terms = [IRI("http://ex/a"), Literal("x"), Literal("5", XSD + "integer"), Literal("chat", language="FR")]
    for term in terms:
        assert term_from_wire(term_to_wire(term)) == term
        assert term_from_wire(term_to_wire(term), trusted=True) == term
    quad = make_quad(g, terms[0], IRI("http://ex/p"), terms[3])
    assert quad_from_wire(quad_to_wire(quad)) == quad
    event = CompoundEvent(g, (quad, make_quad(g, terms[0], IRI("http://ex/q"), terms[2])))
    assert event_from_wire(event_to_wire(event)) == event
    assert event_from_wire(event_to_wire(event), trusted=True) == event
    assert pattern_from_wire([None, "http://ex/a", None, ["1", XSD + "integer"]])[1] == IRI("http://ex/a")


@pytest.mark.parametrize("bad", [5, ["only-one"], ["a", 1], {"x": 1}, "has space", ["x", "dt", "not a lang!"]])
def test_invalid_terms_are_bad_requests(bad):
    with pytest.raises(ProtocolError) as info:
        term_from_wire(bad)
    assert info.value.code == "bad-request"


def test_hybrid_clock_is_monotone_and_merges_remote_time():
    wall = [1000]
    clock = HybridClock(lambda: wall[0])
    a = clock.now()
    b = clock.now()
    assert b > a and unpack(b) == (1000, 1)
    remote = pack(5000, 3)
    merged = clock.observe(remote)
    assert merged > remote
    wall[0] = 10  # the wall clock goes backwards: timestamps do not
    assert clock.now() > merged
    wall[0] = 9000
    assert unpack(clock.now()) == (9000, 0)
    with pytest.raises(ValueError):
        clock.observe(-1)
