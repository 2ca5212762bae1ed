"""The deterministic fault simulation (eventcloud/testing/simulation.py) over many seeds: each
seed's schedule of partitions, crashes and restarts must end with every invariant holding. Each
seed runs as the one line that replays it does (`python -m eventcloud.testing.simulation --seed N`,
a process of its own), so the suite and the replay see the same run.

Three seeds of the first 40 still break, and stay here as expected failures (strict: one that
starts passing fails the suite, to be moved up; but for UNSTEADY ones, below) until the zone lifecycle is one state machine
(issue 44, item 3):
* 9 and 27: a zone stays unserved. Its owner crashed while the peer holding its current copy
  was deposed (cut off past its lease) and, stepping down, dropped the copies it held for
  others; the peer holding an older copy is, rightly, refused the claim.
* 29: acknowledged quads lost. A peer rejoined by splitting its own old zone's stand-in, took
  writes, crashed; its zone went to a stand-in of the stand-in, and its quads did not survive
  the joins that followed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SEEDS = [*range(1, 9), 30, 31, 33]
OPEN = {9: "a zone left unserved: its current copy dropped by a deposed replica",
        27: "a zone left unserved: its current copy dropped by a deposed replica",
        29: "acknowledged quads lost after a stand-in of a stand-in and a re-split"}


#: Seeds whose run is not the same every time even in a process of its own: seed 27 broke in 4 of 4
#: runs on a quiet machine and passed once inside the whole suite on 2 busy cores (the
#: simulation's peers keep on-disk stores, whose timing the virtual clock does not cover).
#: Expected to fail, not required to.
UNSTEADY = {27}


@pytest.mark.parametrize("seed", SEEDS + [pytest.param(s, marks=pytest.mark.xfail(strict=s not in UNSTEADY, reason=r))
                                          for s, r in OPEN.items()])
def test_a_seeded_schedule_of_partitions_and_crashes_ends_with_every_invariant_holding(seed):
    # Run as its replay line runs it, in a process of its own: in a process that ran other
    # schedules before, module state they left (caches, counters) changed the interleaving, and
    # seed 27 passed or broke depending on which tests ran first in the same process.
    done = subprocess.run([sys.executable, "-m", "eventcloud.testing.simulation", "--seed", str(seed)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert " acknowledged" in done.stdout and not done.stdout.startswith(f"seed {seed}: 0 acknowledged"), done.stderr
    assert done.returncode == 0, (f"seed {seed} broke:\n{done.stdout[-3000:]}{done.stderr[-2000:]}\n"
                                  f"replay: python -m eventcloud.testing.simulation --seed {seed}")
