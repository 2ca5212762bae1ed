"""Hostile bodies: a valid body with any part replaced by garbage, or garbage alone, decodes to a
body or is refused with a BadRequest naming what is wrong, never another exception (which a
peer would report as an internal error, and which hid a KeyError in the parsed-subscription
decoder). The mutations reach every nested codec: terms, quads, events, zones, neighbours,
subscription records and their parsed forms, partial matches."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventcloud.errors import BadRequest
from eventcloud.rdf.model import XSD
from eventcloud.sparql.subscription import parse_subscription
from eventcloud.wire import messages as m
from eventcloud.wire.parsed import subscription_from_wire, subscription_to_wire
from tests.helpers import DROP as _DROP, paths, replaced
from tests.wire.samples import RECORD, SAMPLES

PARSED = subscription_to_wire(parse_subscription(
    'PREFIX ex: <http://ex/> SELECT DISTINCT ?s ?v WHERE { GRAPH ?g { ?s ex:p ?v ; ex:q "a"@en . ?v ex:r 3 '
    'FILTER(?v > 2 && REGEX(STR(?s), "^http") || xsd:integer(?v) IN (1, 2) || BOUND(?s) || ftcontains(?v, "rain")) } }'
    .replace("xsd:integer", f"<{XSD}integer>")))
BODIES = [*SAMPLES, m.StoreSubscription(dataclasses.replace(RECORD, parsed=PARSED))]
WIRES = [(type(body), msgpack.unpackb(msgpack.packb(body.to_wire()))) for body in BODIES]

STRINGS = st.text(max_size=12) | st.sampled_from(["", "?", "'", "@", "^", "var", "const", "call", "ext", "op", "cast",
                                                  "http://ex/p", XSD + "integer", "integer", "REGEX", "<", "and", "x"])
NUMBERS = st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats()
ATOMS = st.none() | NUMBERS | st.binary(max_size=8) | STRINGS
GARBAGE = st.recursive(ATOMS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=10)
FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def mutate(data: Any, draw: Any) -> Any:
    """`data` with one to three nodes, chosen uniformly (the whole too), replaced by garbage,
    or list items dropped: every nested decoder is reached."""
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(data)))
        node = data
        for key in path:
            node = node[key]
        if path and draw(st.integers(0, 9)) == 0:
            new = _DROP
        elif isinstance(node, str) and draw(st.booleans()):
            new = draw(STRINGS)  # the same kind of value, wrong: what reaches the deepest checks
        elif isinstance(node, (bool, int, float)) and draw(st.booleans()):
            new = draw(NUMBERS)
        else:
            new = draw(GARBAGE)
        data = replaced(data, path, new)
    return data


def decodes_or_refuses(decode: Any, data: Any) -> None:
    try:
        decode(data)
    except BadRequest as exc:
        assert exc.message  # a reason for the client
    # anything else propagates: the test fails with its traceback


@FUZZ
@given(st.sampled_from(WIRES), st.data())
def test_mutated_bodies_decode_or_are_bad_requests(pair, data) -> None:
    cls, wire = pair
    decodes_or_refuses(cls.from_wire, mutate(wire, data.draw))


@FUZZ
@given(st.data())
def test_mutated_parsed_subscriptions_build_or_are_bad_requests(data) -> None:
    decodes_or_refuses(lambda d: subscription_from_wire(d, "SELECT …"), mutate(PARSED, data.draw))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted({*m.REQUESTS.values(), *m.REPLIES.values()}, key=lambda c: c.__name__)), GARBAGE)
def test_garbage_bodies_of_every_type_are_bad_requests(cls, garbage) -> None:
    decodes_or_refuses(cls.from_wire, garbage)
