"""The hostile-client attacks (experiments/attacks.py) against a real local cluster, smaller: every
step refused and no traceback in any peer's log."""

from __future__ import annotations

import pytest

from experiments.attacks import main

pytestmark = pytest.mark.processes


def test_every_attack_step_is_refused_and_no_peer_logs_a_traceback(capsys):
    assert main(["--peers", "3", "--subscriptions", "2000", "--idle", "300", "--guesses", "40"]) == 0, \
        capsys.readouterr().out
