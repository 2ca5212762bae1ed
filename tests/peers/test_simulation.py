"""The deterministic fault simulation (eventcloud/testing/simulation.py) over many seeds: each
seed's schedule of partitions, crashes and restarts must end with every invariant holding. A
failing seed names the one line that replays it.

Three seeds of the first 40 still break, and stay here as expected failures (strict: one that
starts passing fails the suite, to be moved up) until the zone lifecycle is one state machine
(issue 44, item 3):
* 9 and 27: a zone stays unserved. Its owner crashed while the peer holding its current copy
  was deposed (cut off past its lease) and, stepping down, dropped the copies it held for
  others; the peer holding an older copy is, rightly, refused the claim.
* 29: acknowledged quads lost. A peer rejoined by splitting its own old zone's stand-in, took
  writes, crashed; its zone went to a stand-in of the stand-in, and its quads did not survive
  the joins that followed.
"""

from __future__ import annotations

import pytest

from eventcloud.testing.simulation import simulate

SEEDS = [*range(1, 9), 30, 31, 33]
OPEN = {9: "a zone left unserved: its current copy dropped by a deposed replica",
        27: "a zone left unserved: its current copy dropped by a deposed replica",
        29: "acknowledged quads lost after a stand-in of a stand-in and a re-split"}


@pytest.mark.parametrize("seed", SEEDS + [pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=r))
                                          for s, r in OPEN.items()])
async def test_a_seeded_schedule_of_partitions_and_crashes_ends_with_every_invariant_holding(autojump_clock, seed):
    outcome = await simulate(seed)
    assert outcome.acknowledged > 0
    assert not outcome.violations, (f"seed {seed} broke: {outcome.violations}; schedule: {outcome.schedule}; "
                                    f"replay: {outcome.repro}")
