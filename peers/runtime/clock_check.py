"""Clock agreement: a peer serves only while its wall clock agrees with other peers'.

A lease is a wall-clock time set by one peer and compared by others: an entry peer sets its
subscribers' leases and every peer storing a subscription drops it once the lease is over
(docs/pubsub.md, "Leases"). A host two hours ahead dropped every subscription it stored as
lapsed, and one two hours behind set leases that every other peer found over: notifications
were lost without a word (issue 44.6). As CockroachDB does with its maximum clock offset, peers
measure their offsets to each other and refuse what is too far off:

- a peer measures its offset to another with a ping (the answer carries the other's clock; the
  offset is taken at the middle of the round trip, which bounds its error by half of it);
- a peer joining, or coming back with its zone, first checks its clock against the peer it
  joins through (or most of its old neighbours) and refuses to start if it is off by more than
  `max_offset`, saying by how much and what to do (`ClockOffset`);
- a running peer samples a few neighbours now and then: when most of them (at least two) are
  that far off, its own clock is the odd one out, and it stops serving, as after a crash (its
  replicas take its zones over, and nothing acknowledged is lost);
- before a peer drops any subscription or mailbox as lapsed, it checks its clock once more, so
  a clock that jumped since the last sample lapses nothing.

`max_offset` must stay below the lease grace (peers/config.py enforces it): a lease compared on
a clock that far off still ends within its grace, never before its time.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Counter, Iterable

import trio

from eventcloud.errors import ClockOffset, EventCloudError
from eventcloud.wire.ops import Op
from eventcloud.wire.messages import Empty, Pong
from peers.net import FAILED
from peers.runtime.restart_checks import Ask
from peers.store import PeerState

__all__ = ["ClockCheck", "Offset"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Offset:
    """How far another peer's clock is from ours, as one ping measured it."""

    address: str
    ms: float        # their clock minus ours, at the middle of the round trip
    rtt_ms: float    # the round trip: the measure is right within half of it

    def beyond(self, max_ms: float) -> bool:
        """Off by more than `max_ms`, whatever the round trip's share of the measure."""
        return abs(self.ms) - self.rtt_ms / 2 > max_ms

    def words(self) -> str:
        side = "behind" if self.ms > 0 else "ahead of"
        return f"{abs(self.ms) / 1000:,.1f} s {side} the clock of the peer at {self.address}"


class ClockCheck:
    def __init__(self, state: PeerState, physical_ms: Callable[[], int], ask: Ask, counters: Counter[str], *,
                 max_offset: float, every: float, sample: int = 3, rng: random.Random | None = None) -> None:
        self.state = state
        self.physical_ms = physical_ms
        self.ask = ask                     # one request to an address: its reply, or None
        self.counters = counters
        self.max_ms = max_offset * 1000
        self.every = every
        self.sample = sample
        self.rng = rng or random.Random()
        self._said = -float("inf")   # when a disagreement was last logged

    async def offset(self, address: str, ask: Ask | None = None) -> Offset | None:
        """Our offset to the peer at `address`; None if it does not answer (or says no clock)."""
        began = self.physical_ms()
        reply = await (ask or self.ask)(address, Op.PING, Empty())
        ended = self.physical_ms()
        if reply is None:
            return None
        clock = Pong.from_wire(reply).clock
        if clock is None:
            return None
        return Offset(address, clock - (began + ended) / 2, max(0, ended - began))

    async def offsets(self, addresses: Iterable[str], ask: Ask | None = None) -> list[Offset]:
        """Our offsets to these peers, measured at once; those that answered."""
        found: list[Offset] = []

        async def one(address: str) -> None:
            measured = await self.offset(address, ask)
            if measured is not None:
                found.append(measured)

        async with trio.open_nursery() as nursery:
            for address in addresses:
                nursery.start_soon(one, address)
        return found

    def _refusal(self, off: list[Offset], of: int) -> ClockOffset:
        worst = max(off, key=lambda o: abs(o.ms))
        others = f" ({len(off)} of the {of} peers asked are that far off)" if of > 1 else ""
        return ClockOffset(f"this host's clock is {worst.words()}{others}, more than the {self.max_ms / 1000:g} s "
                           f"peers may differ (a lease set by one peer is compared on another's clock); set this "
                           f"host's time right (NTP), or the other's, and start the peer again")

    async def check_most(self, addresses: list[str], ask: Ask | None = None) -> None:
        """ClockOffset if most of the peers at `addresses` that answer (at least two of them, or
        the only one asked: the peer a joiner joins through) are too far off: our clock is then
        the odd one out. Not answering is no refusal (the join or rejoin fails on its own)."""
        found = await self.offsets(addresses, ask)
        off = [o for o in found if o.beyond(self.max_ms)]
        if off and (len(off) * 2 > len(found)) and (len(off) >= 2 or len(addresses) == 1):
            self.counters["clock_refusals"] += 1
            raise self._refusal(off, len(found))

    def _neighbours(self) -> list[str]:
        addresses = sorted({n.address for n in self.state.neighbours.values() if n.address != self.state.address})
        return self.rng.sample(addresses, min(self.sample, len(addresses)))

    async def agrees(self) -> bool:
        """Whether our clock agrees with most of a few neighbours' now (True when none answers:
        an isolated peer has nobody to disagree with). Asked before lapsing anything."""
        found = await self.offsets(self._neighbours())
        off = [o for o in found if o.beyond(self.max_ms)]
        if off and len(off) * 2 >= len(found):
            self.counters["clock_disagreements"] += 1
            now = trio.current_time()
            if now - self._said < 60:   # asked every second while something would lapse: said once a minute
                return False
            self._said = now
            log.error("peer %s: its clock is %s (%d of %d neighbours asked are more than %g s off): it lapses "
                      "no lease until that is set right", self.state.id, max(off, key=lambda o: abs(o.ms)).words(),
                      len(off), len(found), self.max_ms / 1000)
            return False
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sample a few neighbours every `every` seconds (with jitter); once most of them (at
        least two) are too far off, stop this peer (ClockOffset ends its runtime)."""
        task_status.started()
        while True:
            await trio.sleep(self.every * (0.75 + self.rng.random() / 2))
            neighbours = self._neighbours()
            if len(neighbours) < 2:
                continue
            try:
                await self.check_most(neighbours)
            except ClockOffset as exc:
                self.counters["clock_stops"] += 1
                log.error("peer %s stops serving: %s", self.state.id, exc.message)
                raise


def via(call: Callable[[str, Op, Any], Awaitable[Any]], within: float) -> Ask:
    """An Ask over `call` (the router's connections): None instead of a failure or a time-out."""
    async def ask(address: str, op: Op, body: Any) -> Any:
        try:
            with trio.fail_after(within):
                return await call(address, op, body)
        except (*FAILED, EventCloudError, trio.TooSlowError):
            return None
    return ask
