"""Tests of the CAN geometry: coordinates, zones, routing and multicast, on simulated overlays."""

from __future__ import annotations

from collections import Counter

import msgpack
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from eventcloud.overlay import (
    DIMENSIONS,
    CoordinateSpace,
    GeometryError,
    Zone,
    covering, disjoint, hull, intersection, subtree_reach, tiles,
    local_name,
    multicast_children,
    multicast_root,
    neighbours_of,
    next_hop,
)
from eventcloud.wire.codec import zone_from_wire, zone_to_wire
from eventcloud.rdf.model import IRI, Literal, Quad

DEFAULT = CoordinateSpace()
IDENTITY = CoordinateSpace(mapping="identity")
TINY = CoordinateSpace(mapping="identity", alphabet_lo=ord("a"), alphabet_hi=ord("c"), precision=2)


# --- coordinates ------------------------------------------------------------------------


def test_space_defaults_and_derived_values() -> None:
    assert DIMENSIONS == ("graph", "subject", "predicate", "object")
    assert DEFAULT.radix == 0x7E - 0x20 + 2 == 96
    assert DEFAULT.top == 96**128  # 128 characters place a term (identity IRIs share long prefixes)
    assert DEFAULT.whole_space() == ((0, 96**128),) * 4
    assert TINY.radix == 4 and TINY.top == 16


@pytest.mark.parametrize(
    ("iri", "expected"),
    [
        ("http://x.org/a/b", "b"),
        ("http://x.org/ns#name", "name"),
        ("urn:isbn:123", "123"),
        ("http://x.org/a/", "a"),
        ("http://x.org/a#", "a"),
        ("http://x.org/", "x.org"),
        ("http://", "http://"),
        ("nosep", "nosep"),
    ],
)
def test_local_name(iri: str, expected: str) -> None:
    assert local_name(iri) == expected
    if ":" in iri:  # (IRIs need a scheme; local_name itself takes any string)
        assert DEFAULT.coordinate_string(IRI(iri)) == expected


def test_coordinate_string_by_mapping() -> None:
    iri = IRI("http://x.org/ns#name")
    assert IDENTITY.coordinate_string(iri) == "http://x.org/ns#name"
    assert DEFAULT.coordinate_string(Literal("a/b#c")) == "a/b#c"
    assert IDENTITY.coordinate_string(Literal("42", "http://www.w3.org/2001/XMLSchema#integer")) == "42"
    with pytest.raises(GeometryError):
        DEFAULT.coordinate_string("not a term")  # type: ignore[arg-type]


def test_coordinate_digits() -> None:
    # TINY: digits '' -> 0, 'a' -> 1, 'b' -> 2, 'c' -> 3; radix 4, two digits.
    c = TINY.coordinate
    assert c(Literal("")) == 0
    assert c(Literal("a")) == 1 * 4
    assert c(Literal("ab")) == 1 * 4 + 2
    assert c(Literal("cc")) == 15 == TINY.top - 1
    assert c(Literal("ccc")) == 15  # truncated to precision
    assert c(Literal("A")) == c(Literal("a")) == c(Literal("Ac"))  # below: first digit, then end
    assert c(Literal("z")) == c(Literal("cc")) == c(Literal("z")) == TINY.top - 1  # above: last digits
    assert c(Literal("az")) == c(Literal("ac"))
    # Clamping alone would put "\x7f" (above ASCII) below "~0"; the continuation rule keeps order.
    assert DEFAULT.coordinate(Literal("~0")) <= DEFAULT.coordinate(Literal("\x7f"))
    assert DEFAULT.coordinate(Literal("\x1f~")) <= DEFAULT.coordinate(Literal(" "))
    assert DEFAULT.coordinate(Literal(" ")) == 1 * 96**127
    assert DEFAULT.coordinate(Literal("a")) < DEFAULT.coordinate(Literal("ab")) < DEFAULT.coordinate(Literal("b"))


def test_full_unicode_alphabet_is_the_original_radix() -> None:
    space = CoordinateSpace(mapping="identity", alphabet_lo=0, alphabet_hi=0x10FFFF, precision=3)
    assert space.radix == 0x110001
    assert space.coordinate(Literal("\U0010ffff")) == 0x110000 * 0x110001**2
    assert space.coordinate(Literal("a")) == (ord("a") + 1) * 0x110001**2


def test_point_and_pattern_box() -> None:
    g, s, p, o = IRI("http://e/g1"), IRI("http://e/s"), IRI("http://e/p"), Literal("v")
    quad = Quad(g, s, p, o)
    point = DEFAULT.point(quad)
    assert point == tuple(DEFAULT.coordinate(t) for t in (g, s, p, o))
    box = DEFAULT.pattern_box([None, s, None, o])
    assert box[0] == box[2] == (0, DEFAULT.top)
    assert box[1] == (point[1], point[1] + 1)
    assert box[3] == (point[3], point[3] + 1)
    assert Zone(box).contains(point)
    with pytest.raises(GeometryError):
        DEFAULT.pattern_box([None, None, None])


def test_space_dict_round_trip_and_validation() -> None:
    for space in (DEFAULT, IDENTITY, TINY):
        data = space.to_dict()
        assert msgpack.unpackb(msgpack.packb(data)) == data
        assert CoordinateSpace.from_dict(data) == space
    assert CoordinateSpace.from_dict({}) == DEFAULT
    bad = [
        {"mapping": "hash"},
        {"precision": 0},
        {"precision": "32"},
        {"precision": True},
        {"precision": 10**6},
        {"alphabet_lo": 0x80, "alphabet_hi": 0x7F},
        {"alphabet_hi": 0x110000},
        {"alphabet_lo": -1},
        {"colour": "blue"},
    ]
    for d in bad:
        with pytest.raises(GeometryError):
            CoordinateSpace.from_dict(d)
    with pytest.raises(GeometryError):
        CoordinateSpace.from_dict(["mapping", "identity"])  # type: ignore[arg-type]


# --- zones --------------------------------------------------------------------------------

UNIT = Zone(((0, 16),) * 4)


def test_contains_intersects_distance() -> None:
    zone = Zone(((0, 8), (4, 8), (0, 16), (0, 16)))
    assert zone.contains((0, 4, 0, 15))
    assert not zone.contains((8, 4, 0, 0))
    assert zone.intersects(((7, 9), (0, 5), (0, 1), (3, 4)))
    assert not zone.intersects(((8, 9), (0, 16), (0, 16), (0, 16)))
    assert not zone.intersects(((0, 8), (5, 5), (0, 16), (0, 16)))  # empty box
    assert zone.distance((3, 5, 0, 0)) == 0
    assert zone.distance((10, 2, 0, 0)) == (10 - 7) + (4 - 2)


def test_split_cycles_dimensions() -> None:
    lower, upper = UNIT.split()
    assert lower == Zone(((0, 8), (0, 16), (0, 16), (0, 16)), (0,), (0,))
    assert upper == Zone(((8, 16), (0, 16), (0, 16), (0, 16)), (0,), (1,))
    zone = UNIT
    for expected_dim in (0, 1, 2, 3, 0, 1):
        lower, upper = zone.split()
        assert lower.splits[-1] == expected_dim
        assert lower.bounds[expected_dim][1] == upper.bounds[expected_dim][0]
        zone = upper
    with pytest.raises(GeometryError, match="too small"):
        Zone(((0, 1), (0, 16), (0, 16), (0, 16))).split()
    assert Zone(((5, 8),) * 4).split()[0].bounds[0] == (5, 6)


def test_is_neighbour() -> None:
    a = Zone(((0, 8), (0, 16), (0, 16), (0, 16)))
    b = Zone(((8, 16), (0, 8), (0, 16), (0, 16)))
    corner = Zone(((8, 16), (16, 20), (0, 16), (0, 16)))  # touches a only along an edge
    assert a.is_neighbour(b) and b.is_neighbour(a)
    assert not a.is_neighbour(a)
    assert not a.is_neighbour(corner)
    far = Zone(((9, 16), (0, 8), (0, 16), (0, 16)))
    assert not a.is_neighbour(far)


def test_covers() -> None:
    lower, upper = UNIT.split()
    ll, lu = lower.split()
    assert UNIT.covers(UNIT) and UNIT.covers(lower) and lower.covers(ll) and UNIT.covers(lu)
    assert not lower.covers(UNIT) and not ll.covers(lower) and not lower.covers(upper) and not upper.covers(ll)


def test_merge() -> None:
    lower, upper = UNIT.split()
    assert lower.merge(upper) == UNIT
    assert upper.merge(lower) == UNIT
    assert lower.merge(lower) is None
    ll, lu = lower.split()
    assert lower.merge(ll) is None  # overlapping
    assert ll.merge(upper) is None  # not a box
    # Non-siblings forming a box keep the shorter history.
    a = Zone(((0, 8), (0, 16), (0, 16), (0, 16)), (1, 2, 3))
    b = Zone(((8, 16), (0, 16), (0, 16), (0, 16)), (0,))
    assert a.merge(b) == Zone(UNIT.bounds, (0,))
    # Equal length, different histories: the lower zone's.
    c = Zone(((8, 16), (0, 16), (0, 16), (0, 16)), (2,))
    d = Zone(((0, 8), (0, 16), (0, 16), (0, 16)), (1,))
    assert c.merge(d) == Zone(UNIT.bounds, (1,))
    # Same history but abutting along another dimension than the last split: no undo.
    e = Zone(((0, 16), (0, 8), (0, 16), (0, 16)), (0,))
    f = Zone(((0, 16), (8, 16), (0, 16), (0, 16)), (0,))
    assert e.merge(f) == Zone(UNIT.bounds, (0,))


def test_zones_know_their_path_in_the_split_tree_and_only_siblings_undo_a_split() -> None:
    """Two cousins can have the same split dimensions and abut along the last one: by
    dimensions alone they looked like siblings, and merging them broke the split tree (8 real
    peers moving ended with zones no plane cuts in two, and empty peers that could never leave)."""
    lower, upper = UNIT.split_at(0, 8)
    a_low, a_up = lower.split_at(1, 4)     # lower half, cut along 1 at 4
    b_low, b_up = upper.split_at(1, 12)    # upper half, cut along 1 at 12
    assert (a_low.sides, a_up.sides, b_low.sides, b_up.sides) == ((0, 0), (0, 1), (1, 0), (1, 1))
    assert a_low.sibling_of(a_up) and a_up.sibling_of(a_low) and not a_low.sibling_of(b_low)
    assert a_low.merge(a_up) == lower and b_up.merge(b_low) == upper
    x_low, x_up = a_up.split_at(1, 8)      # [8, 16) along 1 within the lower half along 0...
    y_low, y_up = b_low.split_at(1, 8)     # ... and [0, 8) within the upper half
    cousin_low, cousin_up = lower.split_at(1, 8)
    c_low, c_up = cousin_low.split_at(1, 4)[1], cousin_up.split_at(1, 12)[0]
    assert c_low.splits == c_up.splits and c_low.bounds[1][1] == c_up.bounds[1][0]
    assert c_low.merge(c_up) is not None and not c_low.sibling_of(c_up)   # a box, but cousins
    merged = c_low.merge(c_up)
    assert merged is not None and not merged.placed and not merged.split_at(0, 4)[0].placed
    assert x_low.sibling_of(x_up) and not x_low.sibling_of(y_up)
    # Zones from before paths were kept are not placed, and merge as they did.
    legacy_low, legacy_up = Zone(lower.bounds, (0,)), Zone(upper.bounds, (0,))
    assert not legacy_low.placed and not legacy_low.sibling_of(legacy_up)
    assert legacy_low.merge(legacy_up) == UNIT and UNIT.placed


def test_wire_round_trip_through_msgpack() -> None:
    big = DEFAULT.top
    zone = Zone(((0, big), (big // 3, big // 2), (5, 6), (0, 1)), (0, 1, 2, 3, 0))
    placed = Zone(zone.bounds, zone.splits, (1, 0, 0, 1, 1))
    for zone in (zone, placed, Zone(zone.bounds)):
        wire = zone_to_wire(zone)
        assert zone_from_wire(msgpack.unpackb(msgpack.packb(wire))) == zone
        assert zone_from_wire(msgpack.unpackb(msgpack.packb(wire), use_list=False)) == zone
    assert len(zone_to_wire(placed)) == 3 and len(zone_to_wire(Zone(zone.bounds, (0,)))) == 2


@pytest.mark.parametrize(
    "data",
    [
        None,
        42,
        "zone",
        [],
        [[["0", "1"]] * 4],
        [[["0", "1"]] * 3, []],
        [[["0", "1"]] * 5, []],
        [[["0", "1"], ["0", "1"], ["0", "1"], ["0"]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], [0, 1]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], ["0x0", "1"]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], ["-1", "1"]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], [" 0", "1"]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], ["0_0", "1"]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], ["", "1"]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], ["zz", "1"]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], ["1", "1"]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], ["2", "1"]], []],
        [[["0", "1"], ["0", "1"], ["0", "1"], ["0", "f" * 5000]], []],
        [[["0", "1"]] * 4, [4]],
        [[["0", "1"]] * 4, [-1]],
        [[["0", "1"]] * 4, [True]],
        [[["0", "1"]] * 4, ["0"]],
        [[["0", "1"]] * 4, "0"],
        [[["0", "1"]] * 4, None],
        [[["0", "1"]] * 4, [0, 1], [0]],         # a side for some splits only
        [[["0", "1"]] * 4, [0], [2]],
        [[["0", "1"]] * 4, [0], [True]],
        [[["0", "1"]] * 4, [0], [1.0]],
        [[["0", "1"]] * 4, [0], None],
        [[["0", "1"]] * 4, [0], [0], []],
        {"bounds": [], "splits": []},
    ],
)
def test_from_wire_rejects_garbage(data: object) -> None:
    with pytest.raises(GeometryError):
        zone_from_wire(data)


# --- routing and multicast on hand-built overlays -----------------------------------------


def test_next_hop_basics() -> None:
    lower, upper = UNIT.split()
    ul, uu = upper.split()  # split along subject
    neighbours = {"b": ul, "c": uu}
    assert next_hop(lower, neighbours, (0, 0, 0, 0)) is None
    assert next_hop(lower, neighbours, (12, 12, 0, 0)) == "c"
    assert next_hop(lower, neighbours, (12, 2, 0, 0)) == "b"
    assert next_hop(lower, neighbours, (12, 12, 0, 0), exclude={"c"}) == "b"
    # Ties go to the smallest key.
    twins = {"z": Zone(((8, 16),) + ((0, 16),) * 3), "y": Zone(((8, 16),) + ((0, 16),) * 3)}
    assert next_hop(lower, twins, (9, 0, 0, 0)) == "y"
    with pytest.raises(GeometryError, match="no route"):
        next_hop(lower, neighbours, (12, 12, 0, 0), exclude=["b", "c"])
    with pytest.raises(GeometryError, match="no route"):
        next_hop(lower, {}, (12, 12, 0, 0))


def test_multicast_root_and_children() -> None:
    lower, upper = UNIT.split()
    ul, uu = upper.split()
    zones = {"a": lower, "b": ul, "c": uu}
    box = ((4, 12), (0, 16), (3, 4), (0, 16))
    assert multicast_root(box) == (4, 0, 3, 0)
    assert covering(zones, box) == ["a", "b", "c"]
    # a owns the root; b and c both hang off a's upper face in the graph dimension.
    assert multicast_children(lower, neighbours_of(lower, zones), box) == ["b", "c"]
    assert multicast_children(ul, neighbours_of(ul, zones), box) == []
    assert multicast_children(uu, neighbours_of(uu, zones), box) == []
    # Box only in the upper half: b is the root, c its child along subject.
    box2 = ((8, 16), (0, 16), (0, 16), (0, 16))
    assert multicast_children(ul, neighbours_of(ul, zones), box2) == ["c"]
    assert multicast_children(lower, neighbours_of(lower, zones), box2) == []
    with pytest.raises(GeometryError):
        multicast_root(((0, 0), (0, 1), (0, 1), (0, 1)))
    with pytest.raises(GeometryError):
        multicast_root(((0, 1), (0, 1), (0, 1)))  # type: ignore[arg-type]


def test_neighbours_of_and_covering() -> None:
    lower, upper = UNIT.split()
    ul, uu = upper.split()
    zones = {"a": lower, "b": ul, "c": uu}
    assert neighbours_of(lower, zones) == {"b": ul, "c": uu}
    assert neighbours_of(ul, zones) == {"a": lower, "c": uu}
    assert covering(zones, ((0, 1), (0, 1), (0, 1), (0, 1))) == ["a"]
    assert covering(zones, ((15, 16), (15, 16), (0, 1), (0, 1))) == ["c"]
    assert covering(zones, ((0, 16), (3, 3), (0, 16), (0, 16))) == []


# --- simulated overlays (property tests) --------------------------------------------------


def owner(zones: dict[str, Zone], point: tuple[int, int, int, int]) -> str:
    owners = [key for key, zone in zones.items() if zone.contains(point)]
    assert len(owners) == 1, (point, owners)
    return owners[0]


def build_overlay(space: CoordinateSpace, ops: list[tuple[str, tuple[int, ...]]]) -> dict[str, Zone]:
    """Apply joins (owner of a point splits, newcomer takes the upper half) and leaves
    (a peer leaves only if a neighbour merges with it into a box; that neighbour takes the union)."""
    zones = {"p000": Zone(space.whole_space())}
    fresh = 1
    for kind, args in ops:
        if kind == "join":
            point = tuple(a % space.top for a in args)
            key = owner(zones, point)  # type: ignore[arg-type]
            try:
                lower, upper = zones[key].split()
            except GeometryError:
                continue
            zones[key] = lower
            zones[f"p{fresh:03d}"] = upper
            fresh += 1
        elif len(zones) > 1:
            leaver = sorted(zones)[args[0] % len(zones)]
            for key, zone in sorted(neighbours_of(zones[leaver], zones).items()):
                union = zone.merge(zones[leaver])
                if union is not None:
                    zones[key] = union
                    del zones[leaver]
                    break
    return zones


coordinates = st.integers(min_value=0, max_value=2**256)
join = st.tuples(st.just("join"), st.tuples(coordinates, coordinates, coordinates, coordinates))
leave = st.tuples(st.just("leave"), st.tuples(st.integers(0, 1000)))
operations = st.lists(st.one_of(join, join, leave), max_size=40)
spaces = st.sampled_from(
    [
        DEFAULT,
        TINY,
        CoordinateSpace(mapping="identity", alphabet_lo=ord("a"), alphabet_hi=ord("b"), precision=3),
        CoordinateSpace(alphabet_lo=0, alphabet_hi=6, precision=4),
    ]
)


@st.composite
def points(draw: st.DrawFn, space: CoordinateSpace) -> tuple[int, int, int, int]:
    return tuple(draw(st.integers(0, space.top - 1)) for _ in range(4))  # type: ignore[return-value]


@st.composite
def boxes(draw: st.DrawFn, space: CoordinateSpace):  # type: ignore[no-untyped-def]
    """Like subscription patterns: each axis a fixed point or the whole axis, sometimes a range."""
    intervals = []
    for _ in range(4):
        kind = draw(st.sampled_from(["point", "whole", "range"]))
        if kind == "whole":
            intervals.append((0, space.top))
        elif kind == "point":
            c = draw(st.integers(0, space.top - 1))
            intervals.append((c, c + 1))
        else:
            a, b = sorted(draw(st.lists(st.integers(0, space.top), min_size=2, max_size=2, unique=True)))
            intervals.append((a, b))
    return tuple(intervals)


PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(space=spaces, ops=operations, data=st.data())
def test_overlay_is_a_partition_with_symmetric_neighbours(space, ops, data) -> None:  # type: ignore[no-untyped-def]
    zones = build_overlay(space, ops)
    volume = 0
    for zone in zones.values():
        v = 1
        for lo, hi in zone.bounds:
            assert 0 <= lo < hi <= space.top
            v *= hi - lo
        volume += v
    assert volume == space.top**4
    keys = sorted(zones)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            assert not zones[a].intersects(zones[b].bounds)
            assert zones[a].is_neighbour(zones[b]) == zones[b].is_neighbour(zones[a])
    for _ in range(5):
        owner(zones, data.draw(points(space)))
    for zone in zones.values():
        assert zone_from_wire(msgpack.unpackb(msgpack.packb(zone_to_wire(zone)))) == zone


@PROPERTY
@given(space=spaces, ops=operations, data=st.data())
def test_greedy_routing_reaches_the_owner(space, ops, data) -> None:  # type: ignore[no-untyped-def]
    zones = build_overlay(space, ops)
    tables = {key: neighbours_of(zone, zones) for key, zone in zones.items()}
    for _ in range(4):
        start = data.draw(st.sampled_from(sorted(zones)))
        target = data.draw(points(space))
        here, hops = start, 0
        while (step := next_hop(zones[here], tables[here], target)) is not None:
            assert step in tables[here]
            assert zones[step].distance(target) < zones[here].distance(target)
            here, hops = step, hops + 1
            assert hops <= len(zones)
        assert here == owner(zones, target)
        assert zones[here].distance(target) == 0


@PROPERTY
@given(space=spaces, ops=operations, data=st.data())
def test_multicast_reaches_each_covering_peer_once(space, ops, data) -> None:  # type: ignore[no-untyped-def]
    zones = build_overlay(space, ops)
    tables = {key: neighbours_of(zone, zones) for key, zone in zones.items()}
    for _ in range(4):
        box = data.draw(boxes(space))
        root = owner(zones, multicast_root(box))
        deliveries: Counter[str] = Counter()
        queue = [root]
        while queue:
            peer = queue.pop()
            deliveries[peer] += 1
            assert deliveries[peer] == 1, f"{peer} reached twice"
            queue.extend(multicast_children(zones[peer], tables[peer], box))
        assert sorted(deliveries) == covering(zones, box)
        pieces = [intersection(zones[peer], box) for peer in deliveries]
        assert tiles(box, pieces)  # what a stable overlay's multicast reports always tiles the box
        if len(pieces) > 1:  # a zone missed, or one reached twice, never does
            assert not tiles(box, pieces[1:])
            assert not tiles(box, pieces + pieces[:1])


@PROPERTY
@given(space=spaces, ops=operations, data=st.data())
def test_a_multicast_of_many_items_reaches_each_items_zones_once(space, ops, data) -> None:  # type: ignore[no-untyped-def]
    """One tree over the items' hull, each child sent only the items whose box meets its
    subtree's reach: every item still reaches exactly the zones meeting its own box, once."""
    zones = build_overlay(space, ops)
    tables = {key: neighbours_of(zone, zones) for key, zone in zones.items()}
    items = data.draw(st.lists(boxes(space), min_size=1, max_size=6))
    whole = hull(items)
    root = owner(zones, multicast_root(whole))
    ran: dict[int, Counter[str]] = {i: Counter() for i in range(len(items))}
    visits: Counter[str] = Counter()
    queue = [(root, list(range(len(items))))]
    while queue:
        peer, carried = queue.pop()
        visits[peer] += 1
        assert visits[peer] == 1, f"{peer} reached twice"
        for i in carried:
            if zones[peer].intersects(items[i]):
                ran[i][peer] += 1
        for child in multicast_children(zones[peer], tables[peer], whole):
            reach = subtree_reach(zones[child], whole)
            sent = [i for i in carried if intersection(Zone(reach), items[i]) is not None]
            if sent:
                queue.append((child, sent))
    for i, box in enumerate(items):
        assert sorted(ran[i]) == covering(zones, box)
        assert tiles(box, [intersection(zones[peer], box) for peer in ran[i]])
    assert len(visits) <= len(covering(zones, whole))


def test_hull_and_subtree_reach() -> None:
    a = ((0, 2), (5, 6), (0, 9), (3, 4))
    b = ((1, 3), (0, 1), (2, 4), (3, 4))
    assert hull([a, b]) == ((0, 3), (0, 6), (0, 9), (3, 4))
    child = Zone(((1, 16), (0, 8), (4, 16), (0, 16)))
    assert subtree_reach(child, hull([a, b])) == ((1, 3), (0, 6), (4, 9), (3, 4))
    with pytest.raises(GeometryError):
        hull([])


def test_an_item_reaches_a_zone_whose_parent_it_does_not_meet() -> None:
    """C's parent in the tree is D, which the item's box misses: D must still carry the item."""
    whole = (0, 16)
    a, d = Zone(((0, 8), (0, 8), whole, whole)), Zone(((0, 8), (8, 16), whole, whole))
    b, c = Zone(((8, 16), (0, 8), whole, whole)), Zone(((8, 16), (8, 16), whole, whole))
    zones = {"a": a, "b": b, "c": c, "d": d}
    item, box = ((8, 16), (8, 16), whole, whole), TINY.whole_space()
    assert multicast_children(a, neighbours_of(a, zones), box) == ["b", "d"]
    assert multicast_children(d, neighbours_of(d, zones), box) == ["c"]
    assert not d.intersects(item)
    assert Zone(subtree_reach(d, box)).intersects(item)
    assert not Zone(subtree_reach(b, box)).intersects(((0, 8), (8, 16), whole, whole))


def test_tiles_refuses_overlap_that_balances_a_gap() -> None:
    """A peer that answered with its zone before a split plus the newcomer (counted twice),
    while an equal-sized zone was missed: the volumes add up, the pieces still do not tile."""
    box = ((0, 4), (0, 1), (0, 1), (0, 1))
    stale = ((0, 2), (0, 1), (0, 1), (0, 1))    # old owner, before its split
    newcomer = ((1, 2), (0, 1), (0, 1), (0, 1))  # its upper half, answered by the newcomer
    missed = ((2, 3), (0, 1), (0, 1), (0, 1))
    rest = ((3, 4), (0, 1), (0, 1), (0, 1))
    assert tiles(box, [stale, missed, rest])
    assert not tiles(box, [stale, newcomer, rest])          # same volume as the box
    assert not tiles(box, [((0, 5), (0, 1), (0, 1), (0, 1))])  # outside the box


def test_disjoint_accepts_a_partial_cover_and_refuses_a_zone_counted_twice() -> None:
    """What a partial multicast (status, with a peer down) checks of those that answered: a
    heir that answered with the merged zone and the leaver with its own overlap, and would
    count the leaver's quads twice."""
    box = ((0, 4), (0, 1), (0, 1), (0, 1))
    leaver = ((2, 3), (0, 1), (0, 1), (0, 1))
    heir_merged = ((1, 3), (0, 1), (0, 1), (0, 1))
    first = ((0, 1), (0, 1), (0, 1), (0, 1))
    assert disjoint(box, [first, leaver])                  # the rest is down: fine, counted once
    assert not tiles(box, [first, leaver])
    assert not disjoint(box, [first, heir_merged, leaver])  # the leaver's zone twice
    assert not disjoint(box, [((3, 5), (0, 1), (0, 1), (0, 1))])  # outside the box


# --- coordinate monotonicity --------------------------------------------------------------

any_text = st.text(st.characters(codec="utf-8"), max_size=40)
ascii_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=32)
tiny_text = st.text(st.sampled_from("abc"), max_size=2)


@settings(max_examples=300, deadline=None)
@given(a=any_text, b=any_text, space=st.sampled_from([DEFAULT, IDENTITY, TINY]))
def test_coordinate_is_monotone_in_code_point_order(a: str, b: str, space: CoordinateSpace) -> None:
    a, b = sorted((a, b))
    ca, cb = space.coordinate(Literal(a)), space.coordinate(Literal(b))
    assert 0 <= ca <= cb < space.top


@settings(max_examples=300, deadline=None)
@given(a=ascii_text, b=ascii_text)
def test_coordinate_is_strictly_order_preserving_within_the_alphabet(a: str, b: str) -> None:
    assume(a != b)
    a, b = sorted((a, b))
    assert DEFAULT.coordinate(Literal(a)) < DEFAULT.coordinate(Literal(b))


@settings(max_examples=100, deadline=None)
@given(a=tiny_text, b=tiny_text)
def test_coordinate_is_strictly_order_preserving_at_small_precision(a: str, b: str) -> None:
    assume(a != b)
    a, b = sorted((a, b))
    assert TINY.coordinate(Literal(a)) < TINY.coordinate(Literal(b))


@settings(max_examples=100, deadline=None)
@given(text=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x2FF, exclude_characters='<>"{}|^`\\%#[]',
                                  exclude_categories=("Cc",)), min_size=1))
def test_identity_iri_and_literal_share_the_axis(text: str) -> None:
    text = "u:" + text  # an IRI needs a scheme (and, RFC 3987, no control character, lone '%' or '[')
    assert IDENTITY.coordinate(IRI(text)) == IDENTITY.coordinate(Literal(text))
