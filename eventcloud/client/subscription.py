"""A subscription as the application sees it: an async iterator of notifications.

A *non-durable* subscription lives as long as the connection that made it; when the
connection ends, its iterator raises ClientError (never a silent hang).

A *durable* one outlives connections. Its notifications carry numbers 1, 2, 3, …; the
subscription remembers the highest number received, drops any number it has already seen
(a re-attachment may repeat a few), and after a reconnection the client attaches it again
after that number, so the application sees each (subscription, event) once and in order. A
notification is acknowledged (the home may forget it) when the application asks for the next
one (`auto_ack`), or when it calls `ack`. When the subscription ends for good (lease expired,
cancelled), the iterator raises ClientError with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio

from eventcloud.client.link import ClientError
from eventcloud.errors import ErrorCode
from eventcloud.wire.messages import Notification

__all__ = ["Subscription"]


@dataclass(eq=False)
class Subscription:
    id: str
    sparql: str
    kind: str
    _client: Any = field(repr=False)       # the Client that made it (acks, re-attachment)
    durable: bool = False
    ticket: str = field(default="", repr=False)
    expires: int = 0                 # end of the lease (Unix ms; durable)
    auto_ack: bool = True
    buffer: int = 100_000
    received: int = 0                # highest number received (durable)
    delivered: int = 0               # highest number handed to the application
    acked: int = 0                   # highest number acknowledged to the overlay
    ack_wanted: int = 0
    gaps: int = 0
    resumed_after: int = 0           # `resume`: the notifications numbered after this one followed
    ended: ClientError | None = None
    stalled: bool = False            # the local buffer overflowed: attach again once drained
    _send: trio.MemorySendChannel = field(init=False, repr=False)
    _receive: trio.MemoryReceiveChannel = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[Notification](self.buffer)

    # --- what the application calls -------------------------------------------------------------

    def __aiter__(self) -> "Subscription":
        return self

    async def __anext__(self) -> Notification:
        if self.durable and self.auto_ack and self.delivered > self.ack_wanted:
            self.ack(self.delivered)
        try:
            note = await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            if self.ended is not None:
                raise self.ended from None
            raise StopAsyncIteration from None
        if self.durable:
            self.delivered = max(self.delivered, note.seq)
            if self.stalled and self._receive.statistics().current_buffer_used < self.buffer // 2:
                self.stalled = False
                self._client._reattach_soon(self)
        return note

    async def receive(self) -> Notification:
        return await self.__anext__()

    def ack(self, seq: int | None = None) -> None:
        """Acknowledge every notification up to `seq` (default: all handed out so far); sent in the
        background, the newest at a time."""
        if not self.durable:
            return
        seq = self.delivered if seq is None else min(seq, self.received)
        if seq > self.ack_wanted:
            self.ack_wanted = seq
            self._client._acks_wanted()

    async def unsubscribe(self) -> None:
        await self._client.unsubscribe(self)

    async def cancel(self) -> None:
        await self._client.unsubscribe(self)

    async def renew(self, lease: float = 0.0) -> int:
        """Extend a durable subscription's lease (`lease` seconds from now; 0: the default)."""
        self.expires = await self._client.renew(self.id, self.ticket, lease)
        return self.expires

    # --- what the client calls ------------------------------------------------------------------

    def push(self, note: Notification) -> bool:
        """A notification from the entry peer; False if it was dropped (buffer full, non-durable)."""
        if self.ended is not None:
            return False
        if self.durable:
            if note.seq <= self.received or self.stalled:
                return True  # a repeat after a re-attachment, or replayed later
            if note.kind == "gap":
                self.gaps += 1
            try:
                self._send.send_nowait(note)
            except trio.WouldBlock:
                self.stalled = True  # the home keeps it: attach again after `received` once drained
                return True
            self.received = note.seq
            return True
        try:
            self._send.send_nowait(note)
            return True
        except (trio.WouldBlock, trio.ClosedResourceError):
            return False

    def end(self, error: ClientError | None) -> None:
        """No more notifications: the iterator drains what is queued, then raises `error` (or stops)."""
        if self.ended is None:
            self.ended = error
        self._send.close()

    def end_remotely(self, body: dict[str, Any]) -> None:
        code = body.get("code", ErrorCode.GONE.value)
        self.end(ClientError(str(body.get("reason", "the subscription ended")), code))
