"""The annex design study (python -m experiments.annex_study) on a small overlay: its de-crowding
pass keeps the zones a partition with exact tables, leaves no host over the cap it is given and
moves no data between hosts."""

from __future__ import annotations

import random

from eventcloud.overlay import CoordinateSpace
from experiments.annex_study import AnnexOverlay
from experiments.scale import paper_dataset, place


def test_the_de_crowding_pass_bounds_hosts_neighbours_and_keeps_the_partition():
    space = CoordinateSpace(mapping="identity")
    points = place(space, paper_dataset(3000, seed=1).quads)
    overlay = AnnexOverlay(space, points, random.Random(2), rule="after", probes=4)
    while len(overlay) < 200:
        overlay.join()
    loads = {h: overlay.host_load(h) for h in overlay.zones_of}
    worst = max(overlay.host_count(h) for h in overlay.zones_of)
    cap = worst - 4                       # below today's worst, so that the pass has work to do
    overlay.decrowd(cap - 6, cap, random.Random(3))
    assert len(overlay.zones) > 200 and overlay.decrowd_cuts > 0
    assert max(overlay.host_count(h) for h in overlay.zones_of) <= cap
    assert {h: overlay.host_load(h) for h in overlay.zones_of} == loads   # annexes are empty, no data moved
    # then joins go on, climbing by host load, each followed by the pass over the zones it touched
    overlay.host_climb = True
    for _ in range(40):
        new = overlay.join()
        overlay.decrowd(cap - 6, cap, random.Random(4), zones={new, *overlay.tables[new]}, host_pass=False)
    overlay.rebalance_hosts(cap, random.Random(5))
    assert len(overlay.zones_of) == 240 and min(overlay.host_load(h) for h in overlay.zones_of) > 0
    assert max(overlay.host_count(h) for h in overlay.zones_of) < worst   # (the cap here is tight: 34)
    whole, _ = overlay.multicast(0, space.whole_space())   # reaches every zone exactly once (checked)
    assert whole == len(overlay.zones)
    for zone_id, table in overlay.tables.items():          # tables name exactly the zones touching
        zone = overlay.zones[zone_id]
        assert set(table) == {k for k, z in overlay.zones.items() if k != zone_id and zone.is_neighbour(z)}


def test_the_peers_rule_keeps_every_host_within_the_cap_without_moving_data():
    """What peers/membership/annexes.py does, grown join by join (`--peers-rule --host-climb`): no cut
    through data, a host over the cap hands its most crowded empty annex on."""
    space = CoordinateSpace(mapping="identity")
    points = place(space, paper_dataset(3000, seed=1).quads)
    overlay = AnnexOverlay(space, points, random.Random(2), rule="after", probes=4)
    overlay.peers_rule = overlay.host_climb = True
    rng = random.Random(3)
    cap = 30
    while len(overlay.zones_of) < 150:
        overlay.grow_one(cap - 6, cap, rng)
    overlay.settle(cap, rng, passes=False)
    assert overlay.decrowd_cuts > 0 and overlay.moves > 0 and getattr(overlay, "data_cuts", 0) == 0
    assert len(overlay.zones) > 150 and min(overlay.host_load(h) for h in overlay.zones_of) > 0
    assert max(overlay.host_count(h) for h in overlay.zones_of) <= cap
    assert all(not overlay.held[z] for h in overlay.zones_of for z in overlay.zones_of[h]
               if z not in {max(overlay.zones_of[h], key=lambda z: len(overlay.held[z]))})   # annexes are empty
    whole, _ = overlay.multicast(0, space.whole_space())
    assert whole == len(overlay.zones)
