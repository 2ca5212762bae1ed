"""A bounded chaos run with real processes: kill -9 of peers while publishing, then the history check.

The full runs (8 peers, thousands of events, more kills) are `python -m experiments.chaos`,
with their figures in docs/reliability.md.
"""

from __future__ import annotations

import argparse

import pytest

from experiments.chaos import run_once

pytestmark = pytest.mark.processes


@pytest.mark.parametrize(("algorithm", "limit"), [("osma", 3), ("csma", 3), ("csma", 0)])
async def test_killed_peers_lose_nothing_acknowledged_and_notify_each_pair_once(algorithm, limit):
    """With a neighbour limit of 3, annexes start (and are handed on) while peers are killed;
    with 0, none does."""
    args = argparse.Namespace(peers=6, events=250, kills=2, every=3.0, down=4.0, never_restart=True,
                              lose_disk=False, replicas=2, failure_timeout=2.0, concurrency=4, rate=20,
                              publish_retry=60.0, seed=7, log_level="error",
                              neighbour_limit=limit, host_neighbour_cap=12, annex_every=2.0)
    report = await run_once(algorithm, args)
    print(report)
    assert len(report.kills) == 2, "the chaos task killed peers while publications went on"
    assert report.acknowledged == 250 and report.failed == 0  # the SDK's retries completed every one
    assert report.stored_whole == 250 and report.lost == 0 and report.partial == 0, report.problems
    assert report.expected > 100 and report.notified == report.expected and report.missing == 0, report.problems
    assert report.duplicated == 0
    if limit:   # 6 peers, a stand-in and a rejoin make 8 at most
        assert report.peers_at_end > 8, "no annex started"
    else:
        assert report.peers_at_end <= 8


async def test_the_diagnosis_of_a_failed_count_says_whether_the_zones_tile_the_space(autojump_clock):
    """What the run prints when a whole-space read keeps missing zones (here: a peer killed,
    with no replica to take it over): the zones no longer tile the space, and the dead peer."""
    from eventcloud.testing import open_overlay
    from experiments.chaos import tiling

    async with open_overlay(4, seed=3, replicas=1) as overlay:
        async with overlay.client(0, "diagnosis") as client:
            assert "do NOT" not in (healthy := await tiling(client)) and "(disjoint)" in healthy
            victim = overlay.peers[3]
            victim.stop()
            await overlay.network.kill(victim.address)
            broken = await tiling(client)
    assert f"peer {victim.id}" in broken and "DOWN" in broken, broken
