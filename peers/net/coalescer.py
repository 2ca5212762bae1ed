"""Merging concurrent calls of one kind to one peer into one request, within one scheduling round.

A Python peer pays per message (a frame, a task, system calls), not per item. Calls whose
body is a list of independent items (deliveries, commits) are therefore merged per
(address, operation): the first call opens a batch and yields once to the scheduler; every
call for the same peer and operation made by the tasks that run meanwhile joins that batch;
then the first call sends it and all of them share the reply (or the error). At low load a
call goes out after one yield (no timer, no added latency); under load one message carries
what many tasks sent in the same round. Pushes (messages without a reply, e.g. commits) merge
the same way.

A batch never waits for an earlier request to return: peers deliver to each other at the
same time, and "wait until my previous request to you returns" would let two such requests
wait for each other forever.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import trio

from eventcloud.errors import Unavailable
from eventcloud.wire.ops import Op
from eventcloud.wire.schema import Body

__all__ = ["Coalescer"]

#: Items in one merged request at most (a batch stays far below the frame limit).
MAX_ITEMS = 512


@dataclass
class _Batch:
    items: list[Any] = field(default_factory=list)
    done: trio.Event = field(default_factory=trio.Event)
    reply: Any = None
    error: BaseException | None = None


class Coalescer:
    def __init__(self, call: Callable[[str, Op, Body], Awaitable[dict[str, Any]]], counters: Counter[str],
                 push: Callable[[str, Op, Body], Awaitable[None]] | None = None) -> None:
        self._call = call
        self._push = push
        self.counters = counters
        self._open: dict[tuple[str, Op, bool], _Batch] = {}

    async def call(self, address: str, op: Op, items: list[Any] | tuple[Any, ...],
                   body: Callable[[tuple[Any, ...]], Body]) -> dict[str, Any]:
        """Send `items` to `address` as (part of) one `op` request built by `body`; its reply."""
        return await self._merged(address, op, items, body, False)

    async def push(self, address: str, op: Op, items: list[Any] | tuple[Any, ...],
                   body: Callable[[tuple[Any, ...]], Body]) -> None:
        """Send `items` as (part of) one `op` push (no reply); returns once it is written."""
        assert self._push is not None
        await self._merged(address, op, items, body, True)

    async def _merged(self, address: str, op: Op, items: list[Any] | tuple[Any, ...],
                      body: Callable[[tuple[Any, ...]], Body], push: bool) -> Any:
        key = (address, op, push)
        batch = self._open.get(key)
        if batch is not None and len(batch.items) < MAX_ITEMS:
            batch.items.extend(items)  # joins a batch a call of this round opened
            await batch.done.wait()
        else:
            batch = _Batch(list(items))
            self._open[key] = batch
            try:
                await trio.lowlevel.checkpoint()  # the other tasks of this round may join
            finally:
                if self._open.get(key) is batch:
                    del self._open[key]
            await self._send(key, batch, body)
        if batch.error is not None:
            raise batch.error
        return batch.reply

    async def _send(self, key: tuple[str, Op, bool], batch: _Batch, body: Callable[[tuple[Any, ...]], Body]) -> None:
        address, op, push = key
        self.counters[f"merged:{op.value}"] += len(batch.items) - 1
        send = self._push if push else self._call
        assert send is not None
        try:
            batch.reply = await send(address, op, body(tuple(batch.items)))
        except Exception as exc:  # shared by every caller of the batch
            batch.error = exc
        except BaseException:  # this caller was cancelled: the others learn their batch did not go
            batch.error = Unavailable(f"the {op.value} message carrying this batch was cancelled")
            raise
        finally:
            batch.done.set()
