"""The matching work of a peer: a bounded queue, worker tasks, and each worker's own next work.

Handlers submit work (an event to match, a CSMA chain to start); `workers` tasks take it from a
bounded channel. A handler that finds the channel full waits at most `enqueue_timeout`, then
gets `busy`: a peer overloaded with matching refuses instead of queueing without bound. Work a
worker produces for its own peer (a chain step that lands here) is done by that worker next,
never queued behind itself, where a full queue would deadlock it.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from typing import Any, Awaitable, Callable, Generic, TypeVar

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RequestError

log = logging.getLogger(__name__)

__all__ = ["WorkQueue"]

W = TypeVar("W")

#: How far up the task tree `submit` looks for the worker it runs under.
TREE_DEPTH = 64


class WorkQueue(Generic[W]):
    def __init__(self, do: Callable[[W], Awaitable[None]], counters: Counter[str], *, workers: int, size: int,
                 enqueue_timeout: float, name: str = "") -> None:
        self.do = do
        self.counters = counters
        self.workers = workers
        self.enqueue_timeout = enqueue_timeout
        self.name = name                  # the peer's id, in the `busy` refusal and the logs
        self._send, self._receive = trio.open_memory_channel[Any](size)
        self._inline: dict[trio.lowlevel.Task, deque[W]] = {}   # each worker's own next work

    @property
    def queued(self) -> int:
        """Work waiting for a worker."""
        return self._send.statistics().current_buffer_used

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The workers, for as long as the peer runs."""
        async with trio.open_nursery() as nursery:
            for _ in range(self.workers):
                nursery.start_soon(self._worker, self._receive.clone())
            task_status.started()

    def _own_queue(self) -> deque[W] | None:
        """The own queue of the worker under which the caller runs: the worker's task or a task
        started inside it (`gather`). Not a context variable: tasks copy their starter's context,
        so a connection first opened by a worker (and every request later served on it) would
        pass its work to that worker, which may be idle, waiting for the channel."""
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
        for _ in range(TREE_DEPTH):
            if task is None:
                return None
            found = self._inline.get(task)
            if found is not None:
                return found
            nursery = task.parent_nursery
            task = nursery.parent_task if nursery is not None else None
        return None

    async def submit(self, work: W) -> None:
        inline = self._own_queue()
        if inline is not None:
            inline.append(work)
            return
        try:
            self._send.send_nowait(work)  # room in the queue: no cancel scope, no trip through the scheduler
            return
        except trio.WouldBlock:
            pass
        with trio.move_on_after(self.enqueue_timeout):
            await self._send.send(work)
            return
        self.counters["matching_busy"] += 1
        raise RequestError(f"peer {self.name} is overloaded: its matching queue stayed full", ErrorCode.BUSY)

    async def _worker(self, receive: trio.MemoryReceiveChannel[Any]) -> None:
        inline: deque[W] = deque()
        me = trio.lowlevel.current_task()
        self._inline[me] = inline
        try:
            async with receive:
                async for item in receive:
                    inline.append(item)
                    while inline:
                        await self._do_one(inline.popleft())
        finally:
            del self._inline[me]

    async def _do_one(self, work: W) -> None:
        """One piece of work; a failure is counted and logged, and the worker goes on (what
        failed is matched again by the outbox)."""
        try:
            await self.do(work)
        except EventCloudError as exc:
            self.counters["matching_errors"] += 1
            log.info("peer %s: matching step failed (retried later): %s", self.name, exc)
        except Exception:
            self.counters["matching_errors"] += 1
            log.exception("peer %s: matching step failed", self.name)
