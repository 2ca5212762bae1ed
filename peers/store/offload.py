"""Blocking calls run off the event loop: in worker threads, at most `threads` at once.

Reading and writing files (a peer's state, a replica's copy, a restored stand-in's state) and
pyoxigraph's calls block; a peer's event loop must not wait on them. Under a test's autojumping
MockClock a thread would let virtual time leap while it works, so in-memory test peers run the
same calls inline (`enabled=False`), which keeps virtual time honest.
"""

from __future__ import annotations

from typing import Any

import trio

__all__ = ["Offload"]


class Offload:
    """Runs blocking calls in worker threads, at most `threads` at once, off the event loop.

    With `enabled=False` calls run inline: for in-memory stores in tests under a mock clock,
    where a thread would let virtual time jump while it works.
    """

    def __init__(self, enabled: bool, threads: int = 1) -> None:
        self.enabled = enabled
        self._limiter = trio.CapacityLimiter(threads)

    async def run(self, fn: Any, *args: Any) -> Any:
        if not self.enabled:
            return fn(*args)
        return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)
