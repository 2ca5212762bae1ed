"""What the connections of one server may hold together: how many there are, how many come
from one host without credentials, and how many bytes of unfinished frames they buffer."""

from __future__ import annotations

from typing import Callable, Protocol

import trio

from eventcloud.errors import ErrorCode
from eventcloud.wire.frames import Kind, Message, encode
from eventcloud.wire.hlc import HybridClock

__all__ = ["ConnectionLimits", "Limited", "refuse_connection"]


class Limited(Protocol):
    """What the limits read of a connection (eventcloud.net.rpc.RpcConnection is one)."""

    role: str
    remote: str
    probation: bool
    last_request: float

    @property
    def waiting(self) -> bool: ...

    @property
    def closed(self) -> bool: ...

    @property
    def evicting(self) -> bool: ...

    def evict(self, why: str) -> None: ...


class ConnectionLimits:
    """What the connections of one server may hold together: how many there are, and how many
    bytes of frames not yet complete they buffer."""

    def __init__(self, max_connections: int, max_buffered: int, *, per_address: int = 0, reserved: int = 0,
                 evictable: Callable[[Limited], bool] = lambda conn: True) -> None:
        self.max_connections = max_connections
        self.max_buffered = max_buffered
        self.per_address = per_address  # connections without credentials one host may hold (0: any)
        self.reserved = reserved        # slots only connections that prove a role may keep (peers, admin)
        self.evictable = evictable      # whether a connection holds nothing its loss would end (subscriptions)
        self.open = 0
        self.evicted = 0
        self._live: dict[Limited, str] = {}   # connection -> the host it comes from
        self._buffered = 0
        self._reserved = 0
        self._changed = trio.Event()

    def admit(self, conn: Limited) -> str | None:
        """Count a new connection in; why it is refused (None: admitted).

        Connections without credentials cannot lock others out. One host may hold `per_address`
        of them, and all together leave `reserved` slots free. Where a newcomer would pass one
        of these bounds (or the total), the least recently active connection in that bound that
        proved nothing, has no request being served and holds no subscription is ended for it:
        idle connections, kept alive or not, only delay newcomers. With none to end, the
        newcomer is refused, or enters the reserved slots on probation (its first request must
        prove the cluster secret or the admin token; the dispatcher refuses any other)."""
        anonymous = {other: host for other, host in self._live.items() if other.role == "client"}
        if self.per_address and conn.remote and sum(1 for h in anonymous.values() if h == conn.remote) \
                >= self.per_address:
            if not self._evict([c for c, h in anonymous.items() if h == conn.remote],
                               f"{conn.remote} holds {self.per_address} connections without credentials"):
                return f"holds {self.per_address} connections without credentials from {conn.remote} already"
        elif self.open >= self.max_connections or len(anonymous) >= self.max_connections - self.reserved:
            if not self._evict(list(anonymous), "the server is full of connections without credentials"):
                if self.open >= self.max_connections:
                    return f"serves {self.max_connections} connections already"
                conn.probation = True
        self._live[conn] = conn.remote
        self.open += 1
        return None

    def _evict(self, candidates: list[Limited], why: str) -> bool:
        idle = [c for c in candidates if c.waiting and not c.closed and not c.evicting and self.evictable(c)]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.last_request)
        oldest.evict(f"closing: {why}, and this one was the least active (reconnect when needed)")
        self._live.pop(oldest, None)   # its slot goes to the newcomer now; `release` finds it gone
        self.open -= 1
        self.evicted += 1
        return True

    def release(self, conn: Limited) -> None:
        if self._live.pop(conn, None) is not None:
            self.open -= 1

    def buffered(self, delta: int) -> None:
        self._buffered += delta
        if delta < 0:
            self._changed.set()
            self._changed = trio.Event()

    @property
    def over_budget(self) -> bool:
        return self._buffered + self._reserved > self.max_buffered

    def reserve(self, wanted: int) -> int:
        """Room for one read: at most `wanted`, at least 4 KiB (a small message always gets through)."""
        size = max(4096, min(wanted, self.max_buffered - self._buffered - self._reserved))
        self._reserved += size
        return size

    def unreserve(self, size: int) -> None:
        self._reserved -= size

    async def below_budget(self) -> None:
        while self.over_budget:
            await self._changed.wait()


async def refuse_connection(stream: trio.abc.Stream, clock: HybridClock, why: str) -> None:
    """A connection the limits did not admit: one error frame (busy, saying why), then closed."""
    with trio.move_on_after(1):
        try:
            await stream.send_all(encode(Message(Kind.ERROR, None, None, clock.now(),
                                                 {"code": ErrorCode.BUSY.value, "message": why})))
            await stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
