"""Running several steps of one request at once without exception groups reaching anyone.

A trio nursery wraps what its tasks raise in an ExceptionGroup; a request that fans out
(deliveries to several next hops, announcements to several neighbours) must still fail with
one typed error naming what went wrong. `gather` runs the steps concurrently, lets every one
finish, and raises the first failure itself.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable

import trio

__all__ = ["gather"]


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
