"""The counts-while-moving harness runs real peer processes, publishes, and asks the three counts."""

from __future__ import annotations

import argparse

from experiments.move_counts import run


async def test_a_small_run_looks_and_reports_each_count() -> None:
    args = argparse.Namespace(peers=3, events=120, mapping="identity", min_quads=100, seconds=3.0, interval=0.5,
                              look_timeout=30.0, log_level="warning")
    looks, wrong, refused, by_count = await run(args, 1)
    assert looks >= 1 and 0 <= wrong <= looks and refused >= 0
    assert set(by_count) == {"status", "COUNT(*)", "count()"} and all(0 <= n <= wrong for n in by_count.values())
