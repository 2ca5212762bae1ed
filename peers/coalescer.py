"""Merging concurrent calls of one kind to one peer into one request, without waiting for anything.

A Python peer pays per message (a frame, a task, system calls), not per item. Calls whose
body is a list of independent items (deliveries, commits) are therefore merged per
(address, operation) *lane*: when nothing is in flight on the lane, a call goes out at once
(no added latency at low load); while one is in flight, later calls gather in the next batch,
which leaves as soon as the first returns. Under load, one message carries what many callers
sent; each caller gets the shared reply (or the shared error).
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


@dataclass
class _Lane:
    open: _Batch = field(default_factory=_Batch)
    busy: bool = False
    turn: trio.Event = field(default_factory=trio.Event)   # set when a request of the lane returns


class Coalescer:
    def __init__(self, call: Callable[[str, Op, Body], Awaitable[dict[str, Any]]], counters: Counter[str]) -> None:
        self._call = call
        self.counters = counters
        self._lanes: dict[tuple[str, Op], _Lane] = {}

    async def call(self, address: str, op: Op, items: list[Any] | tuple[Any, ...],
                   body: Callable[[tuple[Any, ...]], Body]) -> dict[str, Any]:
        """Send `items` to `address` as (part of) one `op` request built by `body`; its reply."""
        key = (address, op)
        lane = self._lanes.setdefault(key, _Lane())
        batch = lane.open
        batch.items.extend(items)
        if len(batch.items) >= MAX_ITEMS:
            lane.open = _Batch()  # full: later callers start the next one
        while not batch.done.is_set():
            if not lane.busy and not batch.done.is_set():
                await self._send(lane, key, batch, body)  # nothing in flight: this caller sends it
                break
            await lane.turn.wait()
        if not lane.busy and not lane.open.items:
            self._lanes.pop(key, None)
        if batch.error is not None:
            raise batch.error
        return batch.reply

    async def _send(self, lane: _Lane, key: tuple[str, Op], batch: _Batch,
                    body: Callable[[tuple[Any, ...]], Body]) -> None:
        lane.busy = True
        if lane.open is batch:
            lane.open = _Batch()
        self.counters[f"merged:{key[1].value}"] += len(batch.items) - 1
        try:
            batch.reply = await self._call(key[0], key[1], body(tuple(batch.items)))
        except Exception as exc:  # shared by every caller of the batch
            batch.error = exc
        except BaseException:  # this caller was cancelled: the others learn their batch did not go
            batch.error = Unavailable(f"the {key[1].value} request carrying this batch was cancelled")
            raise
        finally:
            batch.done.set()
            lane.busy = False
            lane.turn.set()       # the next batch's first caller sends it
            lane.turn = trio.Event()
