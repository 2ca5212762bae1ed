"""Balanced joins as pure decisions: where a zone with data is cut, and whom a joiner splits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from eventcloud.overlay import (
    MIN_SHARE, CoordinateSpace, GeometryError, Neighbour, Zone, climb, cut_for, evenly, median_split, split_for_join,
)

SPACE = CoordinateSpace(precision=4)
WHOLE = Zone(SPACE.whole_space())
TOP = SPACE.top

points_st = st.lists(st.tuples(*[st.integers(0, TOP - 1)] * 4), min_size=0, max_size=60)


@settings(max_examples=300, deadline=None)
@given(points_st, st.lists(st.integers(0, 3), max_size=6))
def test_a_median_cut_is_inside_the_zone_and_leaves_points_on_both_sides(points, history):
    zone = Zone(WHOLE.bounds, tuple(history))
    choice = median_split(zone, points)
    distinct = any(len({p[d] for p in points}) > 1 for d in range(4))
    if not distinct:
        assert choice is None
        return
    assert choice is not None
    lo, hi = zone.bounds[choice.dim]
    assert lo < choice.at < hi
    below = sum(1 for p in points if p[choice.dim] < choice.at)
    assert (choice.lower, choice.upper) == (below, len(points) - below)
    assert choice.lower > 0 and choice.upper > 0
    lower, upper = zone.split_at(choice.dim, choice.at)
    assert lower.splits == upper.splits == zone.splits + (choice.dim,)
    assert all(lower.contains(p) != upper.contains(p) for p in points)


@settings(max_examples=300, deadline=None)
@given(points_st, st.lists(st.integers(0, 3), max_size=6))
def test_the_cut_dimension_is_the_least_split_among_those_that_cut_evenly(points, history):
    zone = Zone(WHOLE.bounds, tuple(history))
    choice = median_split(zone, points)
    if choice is None:
        return
    counts = zone.splits_along()
    even = []
    for dim in range(4):
        other = _best_cut(points, dim)
        if other is not None and other >= MIN_SHARE:
            even.append(dim)
    if even:
        assert choice.share >= MIN_SHARE
        assert counts[choice.dim] == min(counts[d] for d in even)
    else:  # nothing reaches the share: the most even cut there is
        assert choice.share == max(s for d in range(4) if (s := _best_cut(points, d)) is not None)


def _best_cut(points, dim):
    """The share of the most even cut along `dim` at the value just above or at the median (reference)."""
    values = sorted(p[dim] for p in points)
    n = len(values)
    shares = []
    for at in set(values[1:]):
        below = sum(1 for v in values if v < at)
        if 0 < below < n:
            shares.append((abs(2 * below - n), min(below, n - below) / n))
    return min(shares)[1] if shares else None


def test_data_on_a_line_is_cut_along_that_line_at_its_median():
    # every point differs only in the object: a slab is the only way to split it
    points = [(5, 5, 5, o) for o in range(0, 100, 10)]
    choice = median_split(WHOLE, points)
    assert choice is not None and choice.dim == 3 and choice.at == 50 and (choice.lower, choice.upper) == (5, 5)


def test_dimensions_are_taken_in_turn_when_the_data_allows():
    points = [(g, s, p, o) for g in (1, 9) for s in (1, 9) for p in (1, 9) for o in (1, 9)]
    zone, seen = WHOLE, []
    for _ in range(4):
        choice = median_split(zone, points)
        seen.append(choice.dim)
        zone, _ = zone.split_at(choice.dim, choice.at)
        points = [p for p in points if zone.contains(p)]
    assert seen == [0, 1, 2, 3]


def test_a_lopsided_dimension_is_avoided_while_another_cuts_evenly():
    # graph: 9 of 10 points share one value (a cut leaves 10%); subject: spread evenly
    points = [(3 if i else 7, i, 0, 0) for i in range(10)]
    choice = median_split(WHOLE, points)
    assert choice.dim == 1 and choice.share == 0.5


def test_cut_for_falls_back_to_the_midpoint_rule_without_data_or_on_one_point():
    assert cut_for(WHOLE, []) == (0, TOP // 2)
    zone = Zone(WHOLE.bounds, (0,))
    assert cut_for(zone, [(1, 2, 3, 4)] * 3) == (1, TOP // 2)
    thin = Zone(((0, 1), (0, 1), (4, 8), (0, 1)), (0,))
    assert cut_for(thin, []) == (2, 6)  # the next dimension wide enough
    with pytest.raises(GeometryError):
        cut_for(Zone(((0, 1),) * 4), [])


def test_split_at_refuses_cuts_on_or_outside_the_bounds():
    with pytest.raises(GeometryError):
        WHOLE.split_at(0, 0)
    with pytest.raises(GeometryError):
        WHOLE.split_at(0, TOP)
    with pytest.raises(GeometryError):
        WHOLE.split_at(4, 1)


def test_split_for_join_takes_the_cut():
    a, b = WHOLE.split()
    plan = split_for_join("A", "a:1", a, {"B": Neighbour("b:1", b)}, "C", "c:1", cut=(3, 17))
    assert plan.kept.bounds[3] == (0, 17) and plan.granted.bounds[3] == (17, TOP)
    assert set(plan.owner_table) == {"B", "C"} and set(plan.newcomer_table) == {"A", "B"}


def test_the_climb_moves_to_the_busiest_busier_neighbour_only():
    assert climb("a", 10, {"b": 12, "c": 30, "d": 30}) == "c"
    assert climb("a", 10, {"b": 10, "c": 3}) == "a"
    assert climb("a", 0, {}) == "a"


def test_evenly_samples_spread_over_the_whole_sequence():
    items = list(range(10_000))
    sample = evenly(items, 100)
    assert len(sample) == 100 and sample[0] == 0 and sample[-1] >= 9_800
    assert evenly(items[:5], 100) == items[:5]


def test_identity_coordinates_keep_iris_with_a_long_common_prefix_apart():
    from eventcloud.rdf.model import IRI

    space = CoordinateSpace(mapping="identity")
    base = "http://www.insight-centre.org/dataset/SampleEventService#AarhusTrafficData158324-Observation-"
    a, b = IRI(base + "1041-AvgSpeed"), IRI(base + "1042-AvgSpeed")
    assert len(base) > 90 and space.coordinate(a) < space.coordinate(b)


def test_the_rebalancer_moves_only_a_light_peer_toward_a_much_busier_one():
    from eventcloud.overlay import should_move

    assert should_move(0, 5_000, ratio=4, min_quads=1_000)          # an empty peer, a loaded one
    assert should_move(1_000, 4_000, ratio=4, min_quads=1_000)
    assert not should_move(1_001, 4_000, ratio=4, min_quads=1_000)  # not light enough
    assert not should_move(0, 999, ratio=4, min_quads=1_000)        # not worth moving for
    with pytest.raises(ValueError, match="at least 2"):
        should_move(0, 10, ratio=1.5, min_quads=1)                  # a move could undo another


def test_a_move_must_cut_the_busiest_zone_so_that_both_sides_hold_twice_the_movers_load():
    from eventcloud.overlay import Zone, gains_enough, joiner_share

    zone = Zone(((0, 1000), (0, 1000), (0, 1000), (0, 1000)))
    spread = [(i * 7 % 1000, i * 13 % 1000, i * 31 % 1000, i * 17 % 1000) for i in range(100)]
    even = joiner_share(zone, spread)
    assert 0.4 <= even <= 0.6                        # spread data: the join takes about half
    line = spread + [(500, 500, 500, 500)] * 900     # a line population: 90% on one point
    lopsided = joiner_share(zone, line)
    assert min(lopsided, 1 - lopsided) < 0.1         # whatever the cut, one side is nearly empty
    assert joiner_share(zone, [(500, 500, 500, 500)] * 10) == 1.0   # one point: the midpoint cut hands it all
    assert not gains_enough(0, 10, 10)
    assert joiner_share(zone, []) == 0.0
    assert gains_enough(100, 1_000, 500)             # an even cut of a 10x busier zone
    assert not gains_enough(100, 1_000, 950)         # the mover takes the point: the rest would move back
    assert not gains_enough(100, 1_000, 150)         # the mover gains too little: it would move again
    assert gains_enough(0, 1_000, 998) and not gains_enough(0, 1_000, 999)
