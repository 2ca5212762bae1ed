"""Annex zones as pure rules: the cut that sheds a crowded zone's neighbours without moving its
data, the host the empty side goes to, and the split that gives a newcomer either side."""

from __future__ import annotations

import random

from eventcloud.overlay import (
    HostOffer, Neighbour, Zone, choose_host, crowd_cut, cut_between, data_ranges, neighbours_of, split_for_join,
)
from tests.overlay.zones import WHOLE, guillotine as _guillotine, neighbour_table as _table

TOP = WHOLE.bounds[0][1]


def _crowded(flipped: bool = False) -> tuple[Zone, dict[str, Zone]]:
    """A zone with one neighbour below it along dimension 0 and ten thin ones above it (or,
    `flipped`, the ten below and the one above)."""
    third = TOP // 3
    rest = WHOLE.bounds[2:]
    zone = Zone(((third, 2 * third), (0, TOP)) + rest)
    step = TOP // 10
    one, many = ((2 * third, TOP), (0, third)) if flipped else ((0, third), (2 * third, TOP))
    neighbours = {"one": Zone((one, (0, TOP)) + rest)}
    for i in range(10):
        neighbours[f"many{i}"] = Zone((many, (i * step, TOP if i == 9 else (i + 1) * step)) + rest)
    return zone, neighbours


def test_a_crowded_zone_gives_away_its_empty_side_and_keeps_few_neighbours():
    zone, neighbours = _crowded()
    lo, hi = zone.bounds[0]
    points = [(lo + 5, 7, 0, 0), (lo + 9, TOP - 1, 3, 3)]   # its data lies near its lower face
    cut = crowd_cut(zone, neighbours, data_ranges(points))
    assert cut is not None and (cut.dim, cut.at, cut.annex_upper) == (0, lo + 10, True)
    assert cut.kept == 2      # the one below and the annex: the ten above are the annex's
    plan = split_for_join("Z", "z:1", zone, {k: Neighbour(f"{k}:1", z) for k, z in neighbours.items()}, "A", "a:1",
                          cut=(cut.dim, cut.at))
    assert set(plan.owner_table) == {"one", "A"}
    assert set(plan.newcomer_table) == {"Z", *(f"many{i}" for i in range(10))}
    assert not any(plan.granted.contains(p) for p in points)   # no data moves
    # the crowd below, the data near the upper face: the newcomer takes the lower side
    zone, neighbours = _crowded(flipped=True)
    points = [(hi - 3, 0, 0, 0), (hi - 1, TOP - 1, 5, 5)]
    cut = crowd_cut(zone, neighbours, data_ranges(points))
    assert cut is not None and (cut.dim, cut.at, cut.annex_upper, cut.kept) == (0, hi - 3, False, 2)
    plan = split_for_join("Z", "z:1", zone, {k: Neighbour(f"{k}:1", z) for k, z in neighbours.items()}, "A", "a:1",
                          cut=(cut.dim, cut.at), newcomer_lower=True)
    assert set(plan.owner_table) == {"one", "A"} and all(plan.kept.contains(p) for p in points)
    assert plan.granted.bounds[0] == (lo, hi - 3) and "many0" in plan.newcomer_table


def test_a_zone_whose_data_reaches_every_face_is_not_cut_unless_through_its_data():
    zone, neighbours = _crowded()
    corners = [tuple(lo for lo, _ in zone.bounds), tuple(hi - 1 for _, hi in zone.bounds)]
    assert crowd_cut(zone, neighbours, data_ranges(corners)) is None
    assert crowd_cut(zone, neighbours, data_ranges(corners), through_data=True) is not None
    assert crowd_cut(zone, {}, None) is None                 # no neighbours: nothing to shed
    assert data_ranges([]) is None


def test_on_random_overlays_the_cut_keeps_what_it_promised_and_never_moves_data():
    """Every zone of random guillotine overlays, with random data inside it: the split the cut
    describes leaves the zone exactly `kept` neighbours, fewer than before, and the annex side
    holds none of its data; an empty zone gives away its upper side."""
    rng = random.Random(3)
    cuts = empties = 0
    for _ in range(40):
        zones = _guillotine(rng, rng.randrange(6, 40))
        for key, zone in sorted(zones.items()):
            table = _table(zones, key)
            empty = rng.random() < 0.2
            points = [] if empty else [tuple(rng.randrange(lo, hi) for lo, hi in zone.bounds)
                                       for _ in range(rng.randrange(1, 4))]
            cut = crowd_cut(zone, {k: n.zone for k, n in table.items()}, data_ranges(points))
            if cut is None:
                continue
            cuts += 1
            plan = split_for_join(key, "k:1", zone, table, "annex", "a:1", cut=(cut.dim, cut.at),
                                  newcomer_lower=not cut.annex_upper)
            assert len(plan.owner_table) == cut.kept < len(table)
            assert not any(plan.granted.contains(p) for p in points)
            assert cut_between(zone, plan.granted) == (cut.dim, cut.at, not cut.annex_upper)
            others = {k: z for k, z in zones.items() if k != key}
            assert set(plan.newcomer_table) == set(neighbours_of(plan.granted, {**others, key: plan.kept}))
            if empty:
                empties += 1
                assert cut.annex_upper
    assert cuts > 100 and empties > 10


def test_the_annex_goes_to_the_host_it_adds_fewest_neighbours_to_within_the_cap():
    offers = [HostOffer("a", "a:1", now=50, after=61, zones=1),   # over cap - headroom (60)
              HostOffer("b", "b:1", now=30, after=40, zones=1),
              HostOffer("c", "c:1", now=45, after=47, zones=3),
              HostOffer("d", "d:1", now=20, after=22, zones=2)]
    assert choose_host(offers, cap=64).host == "d"             # +2, then fewer after
    assert choose_host(offers[:2], cap=64).host == "b"
    assert choose_host(offers[:1], cap=64) is None            # none within the cap: no cut
    assert choose_host([], cap=64) is None


def test_cut_between_names_the_cut_or_refuses_what_is_not_one_side():
    zone = WHOLE
    lower, upper = zone.split_at(2, 1234)
    assert cut_between(zone, lower) == (2, 1234, True)
    assert cut_between(zone, upper) == (2, 1234, False)
    assert cut_between(zone, zone) is None
    quarter = lower.split_at(1, 77)[0]
    assert cut_between(zone, quarter) is None                 # two cuts away
    assert cut_between(upper, lower) is None                  # not inside
