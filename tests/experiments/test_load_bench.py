"""The load benchmark runs end to end on real peer processes and counts every notification."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_small_load_run_delivers_everything_once() -> None:
    done = subprocess.run([sys.executable, "-m", "experiments.load_bench", "--peers", "2", "--publishers", "2",
                           "--events", "5", "--subscribers", "2", "--algorithms", "osma", "--replicas", "1",
                           "--no-fsync", "--timeout", "60", "--settle", "0.2", "--paced-seconds", "2",
                           "--low-events", "4"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {cells[2]: cells for cells in ([c.strip() for c in line.strip("|").split("|")]
                                          for line in done.stdout.splitlines() if line.startswith("| this | osma |"))}
    assert list(rows) == ["saturated", "0.5 of max", "one at a time"], done.stdout
    assert rows["saturated"][3] == "10" and rows["one at a time"][3] == "4"   # events
    assert float(rows["0.5 of max"][4].replace(",", "")) > 0                   # the paced rate offered
    for cells in rows.values():
        assert int(cells[-3].replace(",", "")) > 0   # notifications expected
        assert cells[-2] == "0"                      # nothing not received
        assert cells[-1] == "0"                      # nothing duplicated
        assert " / " in cells[9]                     # latency from the publish call
