"""The load benchmark runs end to end on real peer processes and counts every notification."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_small_load_run_delivers_everything_once() -> None:
    done = subprocess.run([sys.executable, "-m", "experiments.load_bench", "--peers", "2", "--publishers", "2",
                           "--events", "5", "--subscribers", "2", "--algorithms", "osma", "--replicas", "1",
                           "--no-fsync", "--timeout", "60", "--settle", "0.2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    row = [line for line in done.stdout.splitlines() if line.startswith("| this | osma |")]
    assert row, done.stdout
    cells = [c.strip() for c in row[0].strip("|").split("|")]
    assert cells[2] == "10"                      # events
    assert cells[-3:-1] == [cells[-3], "0"]      # nothing not received
    assert cells[-1] == "0"                      # nothing duplicated
    assert " / " in cells[7]                     # latency from the publish call
