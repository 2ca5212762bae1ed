"""Tasks of a peer: the steps of one request run at once, and tasks that outlive their request.

A trio nursery wraps what its tasks raise in an ExceptionGroup; a request that fans out
(deliveries to several next hops, announcements to several neighbours) must still fail with
one typed error naming what went wrong. `gather` runs the steps concurrently, lets every one
finish, and raises the first failure itself.

Some work outlives the request that began it (a subscriber's pump, a pooled connection's
reader, a join's timer, a mailbox's writer). A service never keeps a nursery for that: the
runtime owns every nursery, serves one `TaskStarter` per service for the service's lifetime,
and hands it to the service in its constructor.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable

import trio

__all__ = ["TaskStarter", "gather"]


async def gather(steps: Iterable[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run the steps concurrently; their results in order, or the first step's error (raised bare)."""
    steps = list(steps)
    results: list[Any] = [None] * len(steps)
    errors: list[tuple[int, BaseException]] = []

    async def one(index: int, step: Callable[[], Awaitable[Any]]) -> None:
        try:
            results[index] = await step()
        except Exception as exc:  # collected, re-raised below: never a group
            errors.append((index, exc))

    if len(steps) == 1:
        return [await steps[0]()]
    async with trio.open_nursery() as nursery:
        for index, step in enumerate(steps[1:], 1):
            nursery.start_soon(one, index, step)
        await one(0, steps[0])  # the first in this task: one task fewer to start and schedule
    if errors:
        raise min(errors, key=lambda e: e[0])[1]
    return results


class TaskStarter:
    """Starts a service's long-lived tasks in a nursery the runtime serves (`serve`).

    Before it serves and once it ended, a start raises RuntimeError, as a closed nursery's does:
    the peer is not serving yet or is stopping, and each service turns that into its own typed
    refusal. A task that fails fails the runtime, as any of its tasks does."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._nursery: trio.Nursery | None = None

    @property
    def open(self) -> bool:
        """Whether tasks can be started now."""
        return self._nursery is not None

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    def _nursery_or_refuse(self) -> trio.Nursery:
        if self._nursery is None:
            raise RuntimeError(f"{self.name}: the peer is not serving (stopping, or not started yet)")
        return self._nursery

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._nursery_or_refuse().start_soon(fn, *args)

    async def start(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Start `fn` and wait until it reports started (trio's `Nursery.start`); what it reports."""
        return await self._nursery_or_refuse().start(fn, *args)
