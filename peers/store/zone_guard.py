"""Stores that decided from the zone, against changes that shrink it.

A peer decides that it owns a quad (its zone contains the quad's point), then writes it, which
takes a durable, replicated write. If its zone split for a newcomer in between, the quad would
land after the handover's snapshot, in a zone that is no longer this peer's: stored where no
reader or matcher looks for it. So a store holds the guard *shared* from its decision to the
end of its write, and a split (or a leave) holds it *exclusive* while it changes the zone and
takes its snapshot: it waits for the stores under way, and stores that come after it decide
from the new zone.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

import trio

from eventcloud.errors import Unavailable

__all__ = ["ZoneGuard"]


class ZoneGuard:
    """A reader-writer gate that prefers the writer: once a zone change waits, new stores wait
    behind it (a steady stream of publications cannot starve a join)."""

    def __init__(self) -> None:
        self._gate = trio.Lock()      # held by a zone change; a store passes through it to enter
        self._stores = 0
        self._idle = trio.Event()
        self._idle.set()

    async def _pass_gate(self) -> None:
        """Take the gate; Unavailable once the zone was handed over for good (a leave keeps the
        gate until the peer stops, so the task that took it ends holding it)."""
        try:
            await self._gate.acquire()
        except trio.BrokenResourceError:  # the leave that took it ended: this peer is stopping
            raise Unavailable("this peer handed its zone over and is stopping; retry (routing finds the new "
                              "owner)") from None

    async def acquire_store(self) -> None:
        """A store decides from the zone now; call `release_store()` once its write is done. Unavailable
        once the zone was handed over for good."""
        await self._pass_gate()
        try:
            self._stores += 1
            if self._stores == 1:
                self._idle = trio.Event()
        finally:
            self._gate.release()

    async def store_within(self, seconds: float) -> bool:
        """`acquire_store`, waiting for a zone change at most `seconds`; False (not entered) if it took
        longer or the zone was handed over meanwhile."""
        with trio.move_on_after(seconds):
            try:
                await self.acquire_store()
            except Unavailable:
                return False
            return True
        return False

    def release_store(self) -> None:
        self._stores -= 1
        if self._stores == 0:
            self._idle.set()

    @asynccontextmanager
    async def store(self) -> AsyncIterator[None]:
        await self.acquire_store()
        try:
            yield
        finally:
            self.release_store()

    async def acquire_change(self) -> None:
        """Wait for the stores under way, and hold new ones off (until `release_change`).
        Unavailable once the zone was handed over for good (a join that came too late)."""
        await self._pass_gate()
        try:
            await self._idle.wait()
        except BaseException:
            self._gate.release()
            raise

    def release_change(self) -> None:
        self._gate.release()

    @asynccontextmanager
    async def change(self) -> AsyncIterator[None]:
        await self.acquire_change()
        try:
            yield
        finally:
            self.release_change()
