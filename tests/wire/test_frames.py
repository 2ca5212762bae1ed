"""The sans-I/O frame codec, without any socket: round trips, and every bad frame named by code."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventcloud.errors import ErrorCode, LocalProtocolError, ProtocolError, RemoteProtocolError
from eventcloud.wire.frames import FrameDecoder, Kind, Message, encode
from eventcloud.wire.ops import Op


def frame(envelope) -> bytes:
    payload = msgpack.packb(envelope)
    return struct.pack(">I", len(payload)) + payload


def test_messages_round_trip_even_split_byte_by_byte():
    messages = [Message(Kind.REQUEST, Op.PUBLISH, 7, 123, {"events": []}),
                Message(Kind.REPLY, None, 7, 124, {"g": "x"}),
                Message(Kind.ERROR, None, 8, 1, {"code": "bad-request", "message": "no"}),
                Message(Kind.PUSH, Op.NOTIFICATION, None, 5, {"subscription": "s"}),
                Message(Kind.REQUEST, Op.PING, 9, (1 << 64) - 1, {})]
    data = b"".join(encode(m) for m in messages)
    decoder = FrameDecoder()
    out = []
    for byte in data:
        decoder.feed(bytes([byte]))
        while (m := decoder.next_message()) is not None:
            out.append(m)
    assert out == messages
    assert decoder.pending == 0
    assert out[2].error_code is ErrorCode.BAD_REQUEST


def test_messages_are_immutable():
    message = Message(Kind.REQUEST, Op.PING, 1)
    with pytest.raises(AttributeError):
        message.hlc = 5  # type: ignore[misc]


@pytest.mark.parametrize("data, code", [
    (struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1", ErrorCode.PROTOCOL),           # not msgpack
    (frame([1, 2, 3]), ErrorCode.PROTOCOL),                                          # not a map
    (frame({"k": "nope", "b": {}}), ErrorCode.PROTOCOL),                             # unknown kind
    (frame({"k": "req", "id": 1, "b": {}}), ErrorCode.PROTOCOL),                     # no op
    (frame({"k": "req", "op": "ping", "b": {}}), ErrorCode.PROTOCOL),                # no id
    (frame({"k": "req", "op": "ping", "id": 1, "b": [1]}), ErrorCode.PROTOCOL),      # body not a map
    (frame({"k": "req", "op": "ping", "id": 1, "hlc": -4, "b": {}}), ErrorCode.PROTOCOL),
    (frame({"k": "req", "op": "ping", "id": 1, "hlc": "4", "b": {}}), ErrorCode.PROTOCOL),
    (frame({"k": "req", "op": "ping", "id": True, "b": {}}), ErrorCode.PROTOCOL),
    (frame({"k": "req", "op": "rm -rf", "id": 1, "b": {}}), ErrorCode.UNKNOWN_OP),
    (frame({"k": "req", "op": "store_sub", "id": 1, "b": {}}), ErrorCode.UNKNOWN_OP),  # not accepted here
    (frame({"k": "push", "op": 7, "b": {}}), ErrorCode.PROTOCOL),
    (struct.pack(">I", 1 << 31), ErrorCode.TOO_LARGE),
])
def test_bad_frames_raise_protocol_errors_with_a_code(data, code):
    decoder = FrameDecoder(max_frame=1 << 20, accepted_ops=frozenset({Op.PING}))
    decoder.feed(data)
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_message()
    assert info.value.code is code


def test_oversized_outgoing_message_is_a_local_protocol_error():
    with pytest.raises(LocalProtocolError, match="frame limit") as info:
        encode(Message(Kind.REQUEST, Op.PUBLISH, 1, 0, {"x": "a" * 2000}), max_frame=1000)
    assert info.value.code is ErrorCode.TOO_LARGE


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


@given(st.dictionaries(st.sampled_from(["k", "op", "id", "hlc", "b"]),
                       st.one_of(st.none(), st.integers(-(2**63), 2**64 - 1), st.text(max_size=8), st.lists(st.integers(0, 9), max_size=2),
                                 st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2))))
@settings(max_examples=300, deadline=None)
def test_structurally_fuzzed_envelopes_are_accepted_or_refused_with_a_code(envelope):
    decoder = FrameDecoder()
    decoder.feed(frame(envelope))
    try:
        message = decoder.next_message()
    except RemoteProtocolError as exc:
        assert exc.code in (ErrorCode.PROTOCOL, ErrorCode.UNKNOWN_OP)
    else:
        assert message is not None and isinstance(message.body, dict)


@pytest.mark.parametrize("first", [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"HTTP/1.0 501 Unsupported method\r\n",
                                   b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"POST /events HTTP/1.1\r\n"])
def test_http_on_the_peer_protocol_is_named_as_such(first):
    """An HTTP server's answer (or an HTTP client's request) read as a frame would be a length of
    ~1.2 GB: it is named as HTTP, with where to point the CLI and where HTTP clients go."""
    decoder = FrameDecoder()
    decoder.feed(first)
    with pytest.raises(RemoteProtocolError) as refused:
        decoder.next_message()
    assert "speaks HTTP" in refused.value.message and "gateway" in refused.value.message
    assert "bytes is over" not in refused.value.message


def test_a_frame_after_the_first_is_never_read_as_http():
    """Only a connection's first bytes can be HTTP: later bytes are frames (a length that big is
    refused as too large, as ever)."""
    decoder = FrameDecoder()
    decoder.feed(frame({"k": "req", "op": "ping", "id": 1, "b": {}}) + b"HTTP")
    assert decoder.next_message() is not None
    with pytest.raises(RemoteProtocolError) as refused:
        decoder.next_message()
    assert refused.value.code is ErrorCode.TOO_LARGE
