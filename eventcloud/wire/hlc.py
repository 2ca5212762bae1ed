"""Hybrid logical clock: causal timestamps without trusting wall clocks to agree.

A timestamp is one integer, ``physical_ms << 16 | logical``, so comparisons are plain
integer comparisons and it travels in msgpack as a 64-bit int. The physical clock is
passed in (a callable returning milliseconds), never read here, so tests drive it.
Entry peers stamp subscriptions (indexation time) and publications (publication time);
every request and reply carries the sender's clock and receivers merge it, so anything
that causally follows a subscription gets a larger timestamp (Kulkarni et al., 2014).
"""

from __future__ import annotations

from typing import Callable

LOGICAL_BITS = 16
_LOGICAL_MASK = (1 << LOGICAL_BITS) - 1


def pack(physical_ms: int, logical: int) -> int:
    return (physical_ms << LOGICAL_BITS) | logical


def unpack(timestamp: int) -> tuple[int, int]:
    return timestamp >> LOGICAL_BITS, timestamp & _LOGICAL_MASK


#: How far ahead of our own wall clock a remote time is believed (one hour); a remote time
#: beyond it is clamped, so a hostile or broken peer cannot push our clock to the end of time.
MAX_AHEAD_MS = 3_600_000


class HybridClock:
    """One process's HLC. Not thread-safe; each peer owns exactly one.

    A saved time (`last`) or a remote time further than `max_ahead_ms` ahead of the wall
    clock is clamped to it: clocks stay bounded whatever a message or a state file says."""

    __slots__ = ("_physical", "_last", "max_ahead_ms", "clamped")

    def __init__(self, physical_ms: Callable[[], int], last: int = 0, max_ahead_ms: int = MAX_AHEAD_MS) -> None:
        self._physical = physical_ms
        self.max_ahead_ms = max_ahead_ms
        self.clamped = 0
        self._last = min(last, self._limit()) if last >= 0 else 0

    def _limit(self) -> int:
        return pack(self._physical() + self.max_ahead_ms, 0)

    @property
    def last(self) -> int:
        """The largest timestamp issued or seen so far."""
        return self._last

    def now(self) -> int:
        """A fresh timestamp for a local or send event, larger than any seen."""
        wall = pack(self._physical(), 0)
        self._last = wall if wall > self._last else self._last + 1
        return self._last

    def observe(self, remote: int) -> int:
        """Merge a timestamp received in a message; returns the new local time."""
        if not isinstance(remote, int) or remote < 0:
            raise ValueError(f"invalid hybrid-clock timestamp {remote!r}")
        limit = self._limit()
        if remote > limit:
            self.clamped += 1
            remote = limit
        wall = pack(self._physical(), 0)
        self._last = max(wall, self._last + 1, remote + 1)
        return self._last
