"""What every task of a running peer is waiting on: `kill -USR1 PID` logs it.

A hung request in an async daemon shows no thread stack worth reading: the tasks are
suspended coroutines. This walks trio's task tree from the root and, for each task, the chain
of coroutines it awaits, and names the line each one stopped at.
"""

from __future__ import annotations

import logging
import signal
from types import CoroutineType, FrameType
from typing import Any, Callable, Iterator

import trio

log = logging.getLogger(__name__)

__all__ = ["describe_peer", "dump_tasks", "serve_task_dumps"]


def _frames(coro: Any) -> Iterator[FrameType]:
    """The frames of a coroutine and of what it awaits, outermost first."""
    seen = 0
    while coro is not None and seen < 200:
        seen += 1
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            yield frame
        coro = (getattr(coro, "cr_await", None) if isinstance(coro, CoroutineType)
                else getattr(coro, "ag_await", None) or getattr(coro, "gi_yieldfrom", None))


#: Locals that say what a stopped frame waits on: a request's peer and operation.
_NAMED = ("address", "op")


def _waits_on(frame: FrameType) -> str:
    """` (address=…, op=…)` for a frame of ours that has them: which peer a hung call waits on
    is what tells a request cycle between peers from one slow peer."""
    if "site-packages" in frame.f_code.co_filename:
        return ""
    found = [(name, frame.f_locals[name]) for name in _NAMED if name in frame.f_locals]
    shown = ", ".join(f"{name}={getattr(value, 'value', value)!s:.60}" for name, value in found)
    return f" ({shown})" if shown else ""


def dump_tasks(root: trio.lowlevel.Task | None = None) -> str:
    """One line per task (indented by nesting), then where each of its coroutines is stopped."""
    lines: list[str] = []

    def visit(task: trio.lowlevel.Task, depth: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}task {task.name}")
        for frame in _frames(task.coro):
            code = frame.f_code
            lines.append(f"{pad}    {code.co_filename}:{frame.f_lineno} in {code.co_name}{_waits_on(frame)}")
        for nursery in task.child_nurseries:
            for child in sorted(nursery.child_tasks, key=lambda t: t.name):
                visit(child, depth + 1)

    visit(root or trio.lowlevel.current_root_task(), 0)  # type: ignore[arg-type]
    return "\n".join(lines)


def describe_peer(state: Any) -> str:
    """Who is dumping: its id and address now, and its neighbour table (a hole in it is what a
    peer answering "every way forward is a dead end" for minutes showed)."""
    if state is None:
        return "this peer"
    table = ", ".join(f"{k} at {n.address}" for k, n in sorted(state.neighbours.items()))
    zone = "no zone" if not state.has_zone else f"zone splits {state.zone.splits}"
    return f"peer {state.id} at {state.address} ({zone}; {len(state.neighbours)} neighbours: {table})"


async def serve_task_dumps(who: Callable[[], str] = lambda: "this peer", *,
                           task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Log the task tree each time the process gets SIGUSR1, headed by `who()` (the peer's id and
    address as they are then: a moved peer has a new id)."""
    with trio.open_signal_receiver(signal.SIGUSR1) as signals:
        task_status.started()
        async for _ in signals:
            log.warning("tasks of %s (SIGUSR1):\n%s", who(), dump_tasks())
