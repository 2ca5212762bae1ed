"""Typed message bodies: every op has one, bodies round-trip, and bad bodies name class and field."""

from __future__ import annotations

import pytest

from eventcloud.errors import BadRequest
from eventcloud.rdf.model import XSD
from eventcloud.wire import messages as m
from eventcloud.wire.ops import CLIENT_OPS, PEER_OPS, PUSH_OPS, ROUTED_OPS, Op
from eventcloud.wire.schema import Body
from tests.wire.samples import SAMPLES


def test_every_operation_has_a_request_type_and_every_client_or_peer_op_a_reply_type():
    assert set(m.REQUESTS) == set(Op)
    assert set(m.REPLIES) == CLIENT_OPS | PEER_OPS
    assert not (CLIENT_OPS & PEER_OPS) and not (ROUTED_OPS & (CLIENT_OPS | PEER_OPS)) and PUSH_OPS == {Op.NOTIFICATION, Op.ENDED}


@pytest.mark.parametrize("body", SAMPLES, ids=lambda b: type(b).__name__)
def test_bodies_round_trip(body):
    import msgpack

    wire = msgpack.unpackb(msgpack.packb(body.to_wire()))
    assert type(body).from_wire(wire) == body
    assert type(body).from_wire(wire, trusted=True) == body


@pytest.mark.parametrize("cls, data, words", [
    (m.Publish, {}, "Publish: field 'events' is missing"),
    (m.Publish, {"events": "x"}, "field 'events': expected a list"),
    (m.Publish, {"events": [{"graph": "http://g", "quads": [["x"]]}]}, "item 0"),
    (m.Subscribe, {"sparql": 5}, "field 'sparql': expected a string"),
    (m.Subscribe, {"sparql": "x", "kind": "loud"}, "unknown notification kind 'loud'"),
    (m.Route, {"point": ["0"] * 4, "op": "x", "body": {}, "hops": "1"}, "field 'hops': expected an integer"),
    (m.Delete, {"graph": ["lit", XSD + "string"]}, "field 'graph'"),
    (m.Find, {"pattern": [1, 2]}, "field 'pattern'"),
    (m.Counted, [], "must be a map"),
])
def test_bad_bodies_name_the_class_and_field(cls, data, words):
    with pytest.raises(BadRequest, match=words.replace("(", r"\(")):
        cls.from_wire(data)


def test_bodies_are_frozen():
    with pytest.raises(AttributeError):
        m.Counted(1).count = 2  # type: ignore[misc]


def test_bodies_encode_every_field_even_at_its_default() -> None:
    """Bodies are also the JSON of `--json` outputs and of the HTTP API's listings: a program
    reading them finds every field, defaults included."""
    info = m.SubscriptionInfo("id1", "SELECT …", "signal", False)
    assert set(info.to_wire()) == {"id", "sparql", "kind", "durable", "entry", "expires", "peers", "retained",
                                   "last", "acked", "dropped", "attached"}


_GENERIC_FROM = Body.from_wire.__func__  # type: ignore[attr-defined]
_ODD_VALUES = [None, 0, 1, True, -5, 2.5, "", "x", "http://ex/a", [], [1], ["a"], [[]], {}, {"a": 1}, b"\x00"]


def _outcome(decode, cls, data, trusted):
    try:
        return "ok", decode(cls, data, trusted)
    except BadRequest as exc:
        return "refused", exc.message
    except Exception as exc:  # the same failure either way, whatever it is
        return "failed", type(exc).__name__


@pytest.mark.parametrize("body", SAMPLES, ids=lambda b: type(b).__name__)
def test_compiled_codecs_agree_with_the_generic_ones(body):
    """Each body class has a `to_wire`/`from_wire` written out for its fields (schema._compile).
    They must encode the same and accept and refuse exactly what the generic loop does, with
    the same message: checked on the sample and on every field missing or replaced by odd values."""
    import msgpack

    cls = type(body)
    wire = msgpack.unpackb(msgpack.packb(body.to_wire()))
    assert body.to_wire() == Body.to_wire(body)
    variants = [wire, [], "x", None]
    for key in wire:
        variants.append({k: v for k, v in wire.items() if k != key})
        variants += [{**wire, key: odd} for odd in _ODD_VALUES]
    for variant in variants:
        for trusted in (False, True):
            compiled = _outcome(lambda c, d, t: c.from_wire(d, t), cls, variant, trusted)
            generic = _outcome(_GENERIC_FROM, cls, variant, trusted)
            assert compiled == generic, (variant, trusted)
