"""The per-event cost benchmark (issue 48) runs both sides end to end and checks every
notification against the expected set."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from experiments.peers_bench import expected, run_baseline

ROOT = Path(__file__).resolve().parents[2]


def test_the_sepa_design_notifies_exactly_the_expected_pairs() -> None:
    outcome = run_baseline(60, 200, 4, 60.0)
    want, missing, duplicated, unexpected = outcome.check(60)
    assert outcome.events == 200 and want == len(expected(60, range(200))) > 50
    assert (missing, duplicated, unexpected) == (0, 0, 0)


def test_a_small_comparison_runs_and_both_sides_are_exact() -> None:
    done = subprocess.run([sys.executable, "-m", "experiments.peers_bench", "--subscriptions", "20", "--events", "60",
                           "--peers", "2", "--publishers", "2", "--baseline-seconds", "30", "--settle", "0.2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    row = [line for line in done.stdout.splitlines() if line.startswith("| 20 |")]
    assert row, done.stdout
    cells = [c.strip() for c in row[0].strip("|").split("|")]
    assert cells[1].endswith("(60)") and float(cells[2].replace(",", "")) > 0
    assert cells[-2:] == ["0 / 0 / 0", "0 / 0 / 0"]     # missing / duplicated / unexpected, both sides
