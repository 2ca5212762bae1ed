"""The one codec: every value type round-trips, and malformed data is a BadRequest naming it."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventcloud.errors import BadRequest, ErrorCode
from eventcloud.matching.csma import PartialMatch
from eventcloud.overlay import CoordinateSpace, Neighbour, Zone
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, make_quad
from eventcloud.wire.codec import (
    box_from_wire, box_to_wire, coordinate_to_wire, event_from_wire, event_to_wire, neighbour_from_wire, neighbour_to_wire,
    partial_from_wire, partial_to_wire, pattern_from_wire, pattern_to_wire, point_from_wire, point_to_wire,
    quad_from_wire, quad_to_wire, solutions_from_wire, solutions_to_wire, term_from_wire, term_to_wire,
    zone_from_wire, zone_to_wire,
)

G = IRI("http://ex/g")
TERMS = [IRI("http://ex/a"), Literal("x"), Literal("5", XSD + "integer"), Literal("chat", language="FR")]


def through_msgpack(data):
    return msgpack.unpackb(msgpack.packb(data))


def test_terms_quads_events_and_patterns_round_trip():
    for term in TERMS:
        assert term_from_wire(through_msgpack(term_to_wire(term))) == term
        assert term_from_wire(through_msgpack(term_to_wire(term)), trusted=True) == term
    quad = make_quad(G, TERMS[0], IRI("http://ex/p"), TERMS[3])
    assert quad_from_wire(through_msgpack(quad_to_wire(quad))) == quad
    event = CompoundEvent(G, (quad, make_quad(G, TERMS[0], IRI("http://ex/q"), TERMS[2])))
    assert event_from_wire(through_msgpack(event_to_wire(event))) == event
    assert event_from_wire(through_msgpack(event_to_wire(event)), trusted=True) == event
    pattern = (None, IRI("http://ex/a"), None, Literal("1", XSD + "integer"))
    assert pattern_from_wire(through_msgpack(pattern_to_wire(pattern))) == pattern
    rows = [{"a": TERMS[0], "b": TERMS[3]}]
    assert list(solutions_from_wire(through_msgpack(solutions_to_wire(rows)))) == rows


@pytest.mark.parametrize("bad", [5, None, ["only-one"], ["a", 1], {"x": 1}, "has space", "",
                                 ["x", "dt", "not a lang!"], ["x", XSD + "string", "en"], ["x", ""]])
def test_invalid_terms_are_bad_requests(bad):
    with pytest.raises(BadRequest) as info:
        term_from_wire(bad)
    assert info.value.code is ErrorCode.BAD_REQUEST


@pytest.mark.parametrize("bad", [None, [], ["http://g", "http://s", "http://p"],
                                 [["x", XSD + "string"], "http://s", "http://p", "http://o"],
                                 ["http://g", ["lit", XSD + "string"], "http://p", "http://o"],
                                 ["http://g", "http://s", ["lit", XSD + "string"], "http://o"]])
def test_invalid_quads_are_bad_requests(bad):
    with pytest.raises(BadRequest):
        quad_from_wire(bad)


@pytest.mark.parametrize("bad", [None, {"graph": "http://g"}, {"graph": "http://g", "quads": []},
                                 {"graph": 5, "quads": [["http://s", "http://p", "http://o"]]},
                                 {"graph": "http://g", "quads": [["http://s", "http://p"]]}])
def test_invalid_events_are_bad_requests(bad):
    with pytest.raises(BadRequest):
        event_from_wire(bad)


def test_geometry_round_trips_beyond_64_bits():
    big = CoordinateSpace().top
    zone = Zone(((0, big), (big // 3, big // 2), (5, 6), (0, 1)), (0, 1, 2, 3, 0))
    assert zone_from_wire(through_msgpack(zone_to_wire(zone))) == zone
    assert zone_from_wire(msgpack.unpackb(msgpack.packb(zone_to_wire(zone)), use_list=False)) == zone
    assert box_from_wire(through_msgpack(box_to_wire(zone.bounds))) == zone.bounds
    point = (0, big - 1, 7, big // 2)
    assert point_from_wire(through_msgpack(point_to_wire(point))) == point
    ident, neighbour = neighbour_from_wire(through_msgpack(neighbour_to_wire("p1", Neighbour("h:1", zone))))
    assert (ident, neighbour) == ("p1", Neighbour("h:1", zone))


@pytest.mark.parametrize("bad", [None, [], ["0"] * 3, ["0", "0", "0", "X"], ["0", "0", "0", 0], ["-1"] * 4,
                                 ["f" * 3000] * 4])
def test_invalid_points_are_bad_requests(bad):
    with pytest.raises(BadRequest):
        point_from_wire(bad)


def test_coordinates_are_about_as_long_as_their_term():
    """A coordinate is a term's prefix padded with zero digits: its trailing zeros are counted,
    not written, and a constant's interval [c, c + 1) is written [c]."""
    space = CoordinateSpace()
    c = space.coordinate(IRI("http://example.org/sensor/traffic-158324"))
    assert len(format(c, "x")) > 200
    assert len(coordinate_to_wire(c)) < 60
    assert point_from_wire(point_to_wire((c, 0, space.top, c + 1))) == (c, 0, space.top, c + 1)
    box = space.pattern_box((None, IRI("http://example.org/sensor/traffic-158324"), None, None))
    wire = box_to_wire(box)
    assert len(wire[1]) == 1 and box_from_wire(through_msgpack(wire)) == box
    assert point_from_wire(["1a3*120", "0", "ff", "10"]) == (0x1a3 * 96 ** 120, 0, 255, 16)
    assert all(coordinate_to_wire(x) == format(x, "x") for x in (0, 1, 96 ** 3 + 1, 2 ** 700 + 1))
    assert all(point_from_wire(point_to_wire((x, x, x, x)))[0] == x for x in (96 ** 200, 3 * 96 ** 5, 2 ** 700))


@pytest.mark.parametrize("bad", [None, [["0", "1"]] * 3, [["1", "0"]] * 4, [["0", "1", "2"]] * 4, [[0, 1]] * 4,
                                 [["1*0"]] * 4, [["1*99999"]] * 4, [["1*"]] * 4, [["*5"]] * 4,
                                 [["1*1025"]] * 4])
def test_invalid_boxes_are_bad_requests(bad):
    with pytest.raises(BadRequest):
        box_from_wire(bad)


@pytest.mark.parametrize("bad", [None, {"id": "x"}, {"id": "", "address": "a:1", "zone": None},
                                 {"id": "x", "address": 5, "zone": None}, {"id": "x", "address": "a:1", "zone": 3}])
def test_invalid_neighbours_are_bad_requests(bad):
    with pytest.raises(BadRequest):
        neighbour_from_wire(bad)


@given(st.lists(st.integers(min_value=0, max_value=9), unique=True).map(sorted),
       st.dictionaries(st.text(min_size=1, max_size=5), st.sampled_from(TERMS), max_size=4))
@settings(max_examples=100, deadline=None)
def test_partial_matches_round_trip(remaining, bindings):
    partial = PartialMatch(tuple(remaining), tuple(sorted(bindings.items())))
    assert partial_from_wire(through_msgpack(partial_to_wire(partial))) == partial


def test_a_zone_decoded_before_does_not_make_a_lookalike_acceptable():
    """Zones are remembered by their wire form (the same few come back in every delivery's
    reply); forms that would make an equal key but are not valid are still refused."""
    from eventcloud.overlay import Zone
    from eventcloud.wire.codec import zone_from_wire, zone_to_wire

    zone = Zone(((0, 15), (1, 15), (2, 15), (0, 15)), (0, 1))   # pairs of one-digit coordinates
    wire = zone_to_wire(zone)
    assert zone_from_wire(wire) == zone and zone_from_wire(wire) is zone_from_wire(wire)
    lookalikes = [
        [["".join(pair) for pair in wire[0]], wire[1]],     # a pair as one string "0f": tuple("0f") == ("0", "f")
        [wire[0], [True, 1]],                                # a bool where a split dimension goes
        [wire[0], [0.0, 1]],
        [[[[lo], hi] for lo, hi in wire[0]], wire[1]],       # a list where a coordinate goes
    ]
    for data in lookalikes:
        with pytest.raises(BadRequest):
            zone_from_wire(data)
