"""The entry side of durable subscriptions: subscribers attached to this peer's connections.

A subscriber (re)attaches a durable subscription to its connection with `attach` (id, ticket,
the last number it has). This peer registers the attachment, asks the subscription's home to
forward to it (`mailbox_attach`), and repeats that every `attach_refresh` seconds: the
refresh keeps the attachment alive and re-creates it on a home that took the zone over.
Notifications the home forwards (`mailbox_deliver`) are queued for the connection in number
order (a number already queued is dropped; a full queue answers `busy`, and the home tries
again later). `ack` from the subscriber is forwarded to the home, the newest one at a time.
Nothing of a durable subscription ends with the connection: only the attachment does.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RemoteError, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import (
    Ack, Attach, Attached, Empty, Ended, MailboxAck, MailboxAttach, MailboxDeliver, MailboxEnd, Renew, Renewed,
    SubscriptionInfo, SubscriptionList,
)
from eventcloud.wire.ops import Op
from peers.delivery.subscribers import Subscribers, Session
from peers.net import Router
from peers.store import PeerState
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["Attachments"]

#: Errors from a home after which an attachment is over (the subscriber is told why).
_FINAL = frozenset({ErrorCode.GONE, ErrorCode.NOT_FOUND, ErrorCode.FORBIDDEN})


@dataclass
class _EntryAttachment:
    id: str
    ticket: str
    epoch: int
    session: Session
    last: int = 0              # the newest number queued for the subscriber
    acked: int = 0             # the newest number the subscriber acknowledged
    ack_sent: int = 0
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    ack_wake: trio.Event = field(default_factory=trio.Event)


class Attachments:
    def __init__(self, state: PeerState, router: Router, delivery: Subscribers, clock: HybridClock,
                 counters: Counter[str], tasks: TaskStarter, *, attach_refresh: float, retry_window: float) -> None:
        self.state = state
        self.tasks = tasks   # each attachment's refresh runs there
        self.router = router
        self.delivery = delivery
        self.clock = clock
        self.counters = counters
        self.attach_refresh = attach_refresh
        self.retry_window = retry_window
        self._by_key: dict[tuple[str, int], _EntryAttachment] = {}
        self._by_conn: dict[RpcConnection, dict[str, _EntryAttachment]] = {}

    def handlers(self) -> dict[Op, Any]:
        return {Op.ATTACH: self._on_attach, Op.ACK: self._on_ack, Op.RENEW: self._on_renew,
                Op.SUBSCRIPTIONS: self._on_list, Op.MAILBOX_DELIVER: self._on_deliver}

    def _home(self, ident: str):  # noqa: ANN202 - a Point
        return self.state.space.key_point(ident)

    # --- attaching ----------------------------------------------------------------------------

    async def _on_attach(self, conn: RpcConnection, body: Attach) -> Attached:
        if not self.tasks.open:
            raise RequestError("this peer is stopping", ErrorCode.UNAVAILABLE)
        session = self.delivery.session(conn)
        previous = self._by_conn.get(conn, {}).get(body.id)
        if previous is not None:
            self._detach(previous)
        attachment = _EntryAttachment(body.id, body.ticket, self.clock.now(), session)
        self._register(conn, attachment)
        try:
            reply = Attached.from_wire(await self._ask_home(attachment, body.after), trusted=True)
        except BaseException:
            self._detach(attachment)
            raise
        attachment.last = max(attachment.last, reply.after)
        attachment.acked = attachment.ack_sent = reply.acked
        try:
            self.tasks.start_soon(self._keep_attached, attachment)
        except RuntimeError:
            self._detach(attachment)
            raise RequestError("this peer is stopping", ErrorCode.UNAVAILABLE) from None
        self.counters["attach"] += 1
        return reply

    async def _ask_home(self, attachment: _EntryAttachment, after: int | None) -> Any:
        try:
            return await self.router.route(self._home(attachment.id), Op.MAILBOX_ATTACH, MailboxAttach(
                attachment.id, attachment.ticket, self.state.address, attachment.epoch, after))
        except RemoteError as exc:
            raise RequestError(exc.message, exc.code) from None

    def _register(self, conn: RpcConnection, attachment: _EntryAttachment) -> None:
        self._by_key[(attachment.id, attachment.epoch)] = attachment
        self._by_conn.setdefault(conn, {})[attachment.id] = attachment

    def _detach(self, attachment: _EntryAttachment) -> None:
        attachment.scope.cancel()
        if attachment.acked > attachment.ack_sent and self.tasks.open:
            try:
                self.tasks.start_soon(self._last_ack, attachment)  # what was acknowledged is not lost
            except RuntimeError:
                pass  # this peer is stopping: the subscriber gets those again and drops what it has
        if self._by_key.get((attachment.id, attachment.epoch)) is attachment:
            del self._by_key[(attachment.id, attachment.epoch)]
        mine = self._by_conn.get(attachment.session.conn, {})
        if mine.get(attachment.id) is attachment:
            del mine[attachment.id]

    def _end(self, attachment: _EntryAttachment, code: ErrorCode, reason: str) -> None:
        """The subscription is over for this subscriber: tell it (a final push), forget it."""
        attachment.session.offer(Ended(attachment.id, code.value, reason), Op.ENDED)
        self._detach(attachment)
        self.counters["attachments_ended"] += 1

    async def _keep_attached(self, attachment: _EntryAttachment) -> None:
        """Refresh the attachment at the home, and forward acknowledgements, until detached."""
        with attachment.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._forward_acks, attachment)
                while True:
                    with trio.move_on_after(self.attach_refresh):
                        await trio.sleep_forever()
                    try:
                        await self._ask_home(attachment, attachment.last)
                    except RequestError as exc:
                        if exc.code in _FINAL:
                            self._end(attachment, exc.code, exc.message)
                            return
                        log.info("peer %s: refreshing the attachment of %s failed (retried): %s", self.state.id,
                                 attachment.id, exc.message)
                    except EventCloudError as exc:
                        log.info("peer %s: refreshing the attachment of %s failed (retried): %s", self.state.id,
                                 attachment.id, exc.message)

    def holds(self, conn: RpcConnection) -> bool:
        """Whether durable subscriptions are attached on `conn` (their subscriber listens there)."""
        return bool(self._by_conn.get(conn))

    async def connection_closed(self, conn: RpcConnection) -> None:
        """The subscriber's connection ended: its attachments end (its subscriptions do not)."""
        for attachment in list(self._by_conn.pop(conn, {}).values()):
            self._detach(attachment)

    # --- notifications from the home, acknowledgements from the subscriber ------------------------

    async def _on_deliver(self, conn: RpcConnection, body: MailboxDeliver) -> Empty:
        attachment = self._by_key.get((body.id, body.epoch))
        if attachment is None or attachment.session.closed:
            raise RequestError(f"subscription {body.id} is not attached here", ErrorCode.NOT_FOUND)
        if body.ended:
            self._end(attachment, ErrorCode.GONE, f"subscription {body.id} has ended: {body.ended}")
            return Empty()
        fresh = [note for note in body.notes if note.seq > attachment.last]
        if len(fresh) > attachment.session.room():
            self.counters["deliveries_busy"] += 1
            raise RequestError(f"the subscriber of {body.id} is slow: its queue is full", ErrorCode.BUSY)
        for note in fresh:
            attachment.session.offer(note)
            attachment.last = note.seq
        self.counters["notifications_durable"] += len(fresh)
        return Empty()

    async def _on_ack(self, conn: RpcConnection, body: Ack) -> Empty:
        attachment = self._by_conn.get(conn, {}).get(body.id)
        if attachment is None:
            raise RequestError(f"subscription {body.id} is not attached to this connection (attach it first)",
                               ErrorCode.NOT_FOUND)
        if body.seq > attachment.last:
            raise RequestError(f"cannot acknowledge notification {body.seq} of {body.id}: only {attachment.last} "
                               f"were delivered", ErrorCode.BAD_REQUEST)
        if body.seq > attachment.acked:
            attachment.acked = body.seq
            attachment.ack_wake.set()
        return Empty()

    async def _last_ack(self, attachment: _EntryAttachment) -> None:
        with trio.move_on_after(self.retry_window):
            try:
                await self.router.route(self._home(attachment.id), Op.MAILBOX_ACK,
                                        MailboxAck(attachment.id, attachment.epoch, attachment.acked))
            except EventCloudError:
                pass  # the subscriber gets those again: it drops the numbers it has

    async def _forward_acks(self, attachment: _EntryAttachment) -> None:
        """The newest acknowledgement to the home, one at a time (acknowledging n covers 1..n)."""
        while True:
            if attachment.ack_sent >= attachment.acked:
                attachment.ack_wake = trio.Event()
                await attachment.ack_wake.wait()
                continue
            seq = attachment.acked
            try:
                await self.router.route(self._home(attachment.id), Op.MAILBOX_ACK,
                                        MailboxAck(attachment.id, attachment.epoch, seq))
                attachment.ack_sent = seq
            except RemoteError as exc:
                if exc.code in _FINAL:
                    attachment.ack_sent = seq  # a later attachment or the end: the refresh deals with it
                else:
                    await trio.sleep(min(self.attach_refresh, 1.0))
            except EventCloudError:
                await trio.sleep(min(self.attach_refresh, 1.0))

    # --- leases and listing -------------------------------------------------------------------

    async def _on_renew(self, conn: RpcConnection, body: Renew) -> Renewed:
        leases = self.delivery.leases
        lease_ms = int(min(body.lease or leases.default, leases.maximum) * 1000)
        try:
            expires = await self.router.route(self._home(body.id), Op.MAILBOX_END,
                                              MailboxEnd(body.id, body.ticket, lease_ms=lease_ms))
        except RemoteError as exc:
            raise RequestError(exc.message, exc.code) from None
        return Renewed(body.id, int(expires))

    async def _on_list(self, conn: RpcConnection, body: Empty) -> SubscriptionList:
        """Every subscription of the overlay (for operators: it shows every subscriber's text)."""
        chunks = await self.router.multicast(self.state.space.whole_space(), Op.SUBS_LOCAL, Empty())
        merged: dict[str, dict[str, Any]] = {}
        for chunk in chunks:
            for item in chunk:
                info = SubscriptionInfo.from_wire(item, trusted=True).to_wire()
                found = merged.setdefault(info["id"], info)
                if found is not info:
                    for key, value in info.items():   # a mailbox's counters complete the records
                        if key == "peers":
                            found["peers"] = found.get("peers", 0) + value
                        elif value and not found.get(key):
                            found[key] = value
        items = sorted(merged.values(), key=lambda i: i["id"])
        return SubscriptionList(tuple(SubscriptionInfo.from_wire(i, trusted=True) for i in items))
