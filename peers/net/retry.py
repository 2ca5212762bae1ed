"""One retry policy for every retried step of a peer: exponential backoff within a window.

`FAILED` names the errors that mean "that peer cannot be reached now", as opposed to a refusal
it sent: only those are retried or routed around.
"""

from __future__ import annotations

from dataclasses import dataclass

import trio

from eventcloud.errors import ConnectionLost, Unreachable

__all__ = ["Attempts", "FAILED", "RetryPolicy"]

#: Errors that mean "that peer cannot be reached now" (as opposed to a refusal it sent).
FAILED = (Unreachable, ConnectionLost)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff from `first_delay` to `max_delay`, for at most `window` seconds."""

    window: float
    first_delay: float = 0.05
    max_delay: float = 1.0

    def start(self) -> "Attempts":
        return Attempts(self)


class Attempts:
    """One retried operation: `await attempts.pause()` between tries; False once the window is over."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._policy = policy
        self.deadline = trio.current_time() + policy.window
        self._delay = policy.first_delay

    @property
    def expired(self) -> bool:
        return trio.current_time() > self.deadline

    async def pause(self) -> bool:
        if self.expired:
            return False
        await trio.sleep(min(self._delay, max(0.0, self.deadline - trio.current_time()) + 0.001))
        self._delay = min(self._delay * 2, self._policy.max_delay)
        return True
