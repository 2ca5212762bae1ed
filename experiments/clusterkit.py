"""What the benchmarks on local peer processes share: their memory, another commit's code, and
how publishers and listeners run together.

`baseline_tree(commit)` checks a commit out in a temporary worktree, so a benchmark can start
that code's peers (`LocalCluster(cwd=…)`) and this code's in one run, on the same machine.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Iterator

import trio

__all__ = ["peak_rss_mb", "rss_mb", "cpu_seconds", "baseline_tree", "publish_while_listening"]


def _status_mb(pid: int, field: str) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def peak_rss_mb(pid: int) -> float:
    """VmHWM: the most resident memory the process ever had."""
    return _status_mb(pid, "VmHWM")


def rss_mb(pid: int) -> float:
    """VmRSS: the resident memory the process has now."""
    return _status_mb(pid, "VmRSS")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def baseline_tree(commit: str) -> Iterator[Path]:
    """`commit` checked out in a temporary worktree (removed afterwards)."""
    root = Path(__file__).resolve().parent.parent
    path = Path(tempfile.mkdtemp(prefix="eventcloud-baseline-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(path), commit], cwd=root, check=True,
                   capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=root, capture_output=True)


async def publish_while_listening(nursery: trio.Nursery, subs: Iterable[Any], listen: Callable[[Any], Awaitable[None]],
                                  publish: Callable[[int], Awaitable[None]], concurrency: int) -> None:
    """Start `listen(sub)` for each subscription in `nursery`, then run `publish(slot)` for each
    of `concurrency` slots until every one is done. The listeners go on in `nursery`: the
    caller decides how long they wait for the last notifications."""
    for sub in subs:
        nursery.start_soon(listen, sub)
    async with trio.open_nursery() as publishers:
        for slot in range(concurrency):
            publishers.start_soon(publish, slot)
