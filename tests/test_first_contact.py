"""Lighter first contact (issue 15): the README's first command installs the core only, and the
demo runs with nothing but the core dependencies importable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEV_ONLY = ("pyspark", "matplotlib", "pytest", "hypothesis", "cryptography", "trio_websocket",
            "SPARQLWrapper", "selenium")


def test_the_readme_installs_the_core_first_and_everything_for_the_tests():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```sh\n(python3 -m venv .*?)\n```", readme)
    assert "pip install -q -e . &&" in commands[0] and "eventcloud demo" in commands[0]
    assert "'.[dev]'" in commands[1] and "pytest" in commands[1]
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=\[ ]", d, maxsplit=1)[0].lower() for d in core}
    assert not names & {n.lower() for n in DEV_ONLY}, names


@pytest.mark.processes
def test_the_demo_needs_only_the_core(tmp_path):
    """Every dev-only package made unimportable (in the demo and in its peer processes)."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        f"for name in {DEV_ONLY!r}:\n"
        "    sys.modules[name] = None  # import fails: ModuleNotFoundError\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "eventcloud", "demo", "--peers", "2", "--events", "12"],
                          capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"== (\d+) notifications for \1 matching events", done.stdout), done.stdout
