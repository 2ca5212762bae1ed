"""The popular-subscriptions benchmark runs and shows identical subscriptions sharing entries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_small_popular_run_shares_entries_and_notifies() -> None:
    done = subprocess.run([sys.executable, "-m", "experiments.popular_bench", "--subscriptions", "600",
                           "--distinct", "30", "--events", "20"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    row = [line for line in done.stdout.splitlines() if line.startswith("| this |")]
    assert row, done.stdout
    cells = [c.strip().replace(",", "") for c in row[0].strip("|").split("|")]
    assert 1 <= int(cells[1]) <= 30              # one entry per distinct text held
    assert float(cells[-1]) >= 1                 # every event matches the subscribers of its chain
