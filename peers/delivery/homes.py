"""The home side of durable subscriptions: mailboxes, their numbering, leases and forwarding.

A durable subscription's *home* is the owner of `space.key_point(id)`, so any peer finds it by
routing, and it moves with its zone (join, leave, takeover) like any stored data: its mailbox
(`peers.store.mailboxes`) is store mutations, replicated before they are acknowledged.

* A notifier hands each notification to the home (`mailbox_notify`); the home completes a
  CSMA notification, numbers it and stores it durably before answering, so a notification
  the matcher counts as done is never lost. One writer per mailbox assigns the numbers, in
  batches (one durable write for all notifications waiting).
* An entry peer *attaches* a subscriber's connection (`mailbox_attach`, repeated every
  `attach_refresh` seconds). The home forwards what is numbered after the attachment's cursor
  to that entry peer, in order, one batch at a time (`mailbox_deliver`); a busy entry is
  retried, a gone one is detached. Nothing is removed until acknowledged (`mailbox_ack`).
  Attachments live in memory only: after a takeover the next refresh re-creates them.
* Leases: `mailbox_end` renews (with the ticket) or cancels; a lease that runs out ends the
  subscription. Ending removes it from every peer (`remove_sub`), drops its notifications, and
  keeps a tombstone for `ended_ttl` so that a late resume is told why.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable

import msgpack
import trio

from eventcloud.errors import ErrorCode, EventCloudError, RemoteError, RequestError
from eventcloud.overlay import Box, Point
from eventcloud.wire.codec import point_from_wire, point_to_wire
from eventcloud.wire.hlc import unpack
from eventcloud.wire.messages import (
    Attached, Empty, Leases, MailboxAck, MailboxAttach, MailboxDeliver, MailboxEnd, MailboxOpen, Notification,
    Notify, SubscriptionId, SubscriptionInfo, SubscriptionRecord,
)
from eventcloud.wire.ops import Op
from peers.store import mailboxes as mb
from peers.delivery.reconstruction import Gatherer, reconstruct
from peers.net import FAILED, Router
from peers.store import AsyncStore, PeerState, ZoneGuard
from peers.matching import OperatorRunner, Stored, Subscriptions, indexing_box
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["Homes", "ticket_hash"]

#: Bytes of notifications per delivery to an entry peer.
DELIVERY_BUDGET = 1024 * 1024


def ticket_hash(ticket: str) -> str:
    """What a mailbox keeps of its ticket: a leaked store or replica does not give it away."""
    return hashlib.sha256(ticket.encode("utf-8")).hexdigest()


def _not_kept(ident: str) -> RequestError:
    """What a caller waiting for a notification to be kept learns when this peer stops first."""
    return RequestError(f"subscription {ident}: the notification was not kept; retry", ErrorCode.UNAVAILABLE)


@dataclass
class _Forwarding:
    entry: str           # the entry peer's address
    epoch: int           # when it attached (hybrid clock): a later attachment wins
    cursor: int          # notifications up to this number were forwarded
    seen: float          # trio time of its last refresh
    wake: trio.Event = field(default_factory=trio.Event)


@dataclass
class _Pending:
    graph: str
    published_ms: int
    note: bytes
    done: trio.Event = field(default_factory=trio.Event)
    error: BaseException | None = None


class Homes:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, subscriptions: Subscriptions,
                 gatherer: Gatherer, counters: Counter[str], tasks: TaskStarter, *, physical_ms: Callable[[], int],
                 retry_window: float,
                 attach_refresh: float, lease_check_every: float, ended_ttl: float, lease_grace: float,
                 reconstruct_deadline: float, guard: ZoneGuard, runner: OperatorRunner | None = None,
                 clock_agrees: Callable[[], Awaitable[bool]] | None = None) -> None:
        self.state = state
        # asked before anything lapses: a lease set by another peer means nothing on a clock that
        # jumped (peers/runtime/clock_check.py)
        self.clock_agrees = clock_agrees
        self.tasks = tasks   # forwarders and mailbox writers run there
        self.guard = guard  # mailbox writes against zone changes (a join's split, a leave)
        self.router = router
        self.store = store
        self.subscriptions = subscriptions
        self.runner = runner  # operator calls of rebuilt bindings: once per event, off the loop
        self.gatherer = gatherer   # whole events for CSMA notifications
        self.counters = counters
        self.physical_ms = physical_ms
        self.retry_window = retry_window
        self.attach_refresh = attach_refresh
        self.lease_check_every = lease_check_every
        self.ended_ttl = ended_ttl
        self.lease_grace = lease_grace
        self.reconstruct_deadline = reconstruct_deadline
        self._attachments: dict[str, _Forwarding] = {}
        self._pending: dict[str, list[_Pending]] = {}
        self._writing: set[str] = set()
        self._unremoved: set[str] = set()   # ended here, not yet removed from every peer

    @property
    def boxes(self) -> mb.Mailboxes:
        return self.store.sync.mailboxes

    def routed(self) -> dict[Op, Any]:
        return {Op.MAILBOX_OPEN: self._local_open, Op.MAILBOX_ATTACH: self._local_attach,
                Op.MAILBOX_ACK: self._local_ack, Op.MAILBOX_NOTIFY: self._local_notify,
                Op.MAILBOX_END: self._local_end, Op.LEASE_SUB: self._local_leases, Op.SUBS_LOCAL: self._local_list}

    def home(self, ident: str) -> Point:
        return self.state.space.key_point(ident)

    def owns(self, box: mb.Mailbox) -> bool:
        return self.state.has_zone and self.state.zone.contains(point_from_wire(box.record["home"]))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await self._lease_loop()

    # --- opening, attaching, acknowledging ----------------------------------------------------------

    async def _local_open(self, body: MailboxOpen) -> int:
        record = dict(body.record)
        record["home"] = point_to_wire(self.home(body.id))
        (opened,) = await self._write_home(body.id, [mb.box(body.id, record)])
        return int(bool(opened))

    async def _write_home(self, ident: str, mutations: list[Any]) -> list[Any]:
        """Write to mailbox `ident` while this peer is its home. Under the zone guard: a zone
        change (a join's split, a leave) waits for the write, and takes its snapshot after it,
        or the write waits for the change and finds its home moved (the caller retries: routing
        finds the new home). Without it a notification kept during a leave's handover was
        acknowledged and lost with the leaving peer."""
        async with self.guard.store():
            self._still_home(ident)
            return await self.store.write(mutations)

    def _still_home(self, ident: str) -> None:
        """After a write: if the zone moved away meanwhile (a join split it), the new owner may
        not have what was just written: the caller must try again (routing finds the new home)."""
        if not (self.state.has_zone and self.state.zone.contains(self.home(ident))):
            raise RequestError(f"the home of subscription {ident} moved; retry", ErrorCode.UNAVAILABLE)

    def _box(self, ident: str, ticket: str | None) -> mb.Mailbox:
        """The open mailbox `ident`, its ticket checked (None: the caller is an admin or a peer)."""
        box = self.boxes.get(ident)
        if box is None:
            raise RequestError(f"no durable subscription {ident}", ErrorCode.NOT_FOUND)
        if box.ended:
            raise RequestError(f"subscription {ident} has ended: {box.ended}", ErrorCode.GONE)
        if ticket is not None and not hmac.compare_digest(ticket_hash(ticket), box.record["ticket"]):
            self.counters["wrong_tickets"] += 1
            raise RequestError(f"wrong ticket for subscription {ident}", ErrorCode.FORBIDDEN)
        return box

    async def _local_attach(self, body: MailboxAttach) -> dict[str, Any]:
        box = self._box(body.id, body.ticket)
        after = box.acked if body.after is None else body.after
        if after > box.last:
            raise RequestError(f"subscription {body.id}: sequence number {after} is from the future (the newest "
                               f"is {box.last})", ErrorCode.BAD_REQUEST)
        if after < box.acked:
            raise RequestError(f"subscription {body.id}: notifications up to {box.acked} were acknowledged and are "
                               f"no longer kept; resume after {box.acked} or later", ErrorCode.GONE)
        current = self._attachments.get(body.id)
        if current is not None and (current.entry, current.epoch) == (body.entry, body.epoch):
            current.seen = trio.current_time()
            if after > current.cursor:
                current.cursor = after
        elif current is not None and current.epoch > body.epoch:
            raise RequestError(f"subscription {body.id} is attached to another connection now", ErrorCode.GONE)
        else:
            if current is not None:
                current.wake.set()   # its forwarder sees it was replaced and stops
            current = _Forwarding(body.entry, body.epoch, after, trio.current_time())
            self._attachments[body.id] = current
            try:
                self.tasks.start_soon(self._forward, body.id, current)
            except RuntimeError:
                del self._attachments[body.id]
                raise RequestError("this peer is stopping", ErrorCode.UNAVAILABLE) from None
        self.counters["attachments"] = len(self._attachments)
        return Attached(box.id, box.record["sparql"], box.record["kind"], box.expires, after, box.last,
                        box.acked).to_wire()

    async def _local_ack(self, body: MailboxAck) -> int:
        box = self._box(body.id, None)
        current = self._attachments.get(body.id)
        if current is None or current.epoch != body.epoch:
            raise RequestError(f"subscription {body.id} is not attached through this entry peer any more",
                               ErrorCode.GONE)
        if body.seq > box.last:
            raise RequestError(f"subscription {body.id}: cannot acknowledge {body.seq}, the newest is {box.last}",
                               ErrorCode.BAD_REQUEST)
        if body.seq <= box.acked:
            return box.acked
        (acked,) = await self._write_home(body.id, [mb.ack(body.id, body.seq)])
        return acked

    # --- accepting notifications ----------------------------------------------------------------

    async def _local_notify(self, body: Notify) -> int:
        """Number and keep one notification (durably, before answering); 0 if its subscription is
        gone (the notifier then forgets it), 1 once kept or when it was kept before."""
        box = self.boxes.get(body.subscription)
        if box is None or box.ended:
            return 0
        if body.event in box.seen:
            self.counters["duplicates_filtered"] += 1
            return 1
        note = Notification(body.subscription, body.event, box.record["kind"], body.published,
                            solutions=body.solutions or (), quads=body.quads or (), truncated=body.truncated)
        if body.csma and (note.kind != "signal" or body.verify):
            # a home is seldom a peer of the subscription's box: the mailbox's text then serves
            stored = self.subscriptions.get(body.subscription) or self._from_mailbox(body.subscription, box)
            completed = await reconstruct(self.gatherer, stored, body.event, body.size, body.published,
                                          deadline=self.reconstruct_deadline, counters=self.counters,
                                          taxonomy=self.subscriptions.taxonomy, runner=self.runner,
                                          verify=body.verify, origin=body.origin)
            if completed is None:
                return 1  # the whole event does not match after all: nothing to keep
            note = completed
        packed = msgpack.packb(note.to_wire(), use_bin_type=True)
        await self._keep(body.subscription, _Pending(body.event, unpack(body.published)[0], packed))
        self._still_home(body.subscription)
        return 1

    def _from_mailbox(self, ident: str, box: Any) -> Stored:
        """The subscription as its mailbox describes it (parsed once per text: `sparql.shapes`)."""
        record = SubscriptionRecord(ident, box.record["sparql"], box.record["kind"], "", box.record["t"])
        return Stored.of(record, self.subscriptions.parse(record))

    async def _keep(self, ident: str, pending: _Pending) -> None:
        """Queue a notification for the mailbox's writer; return once it is durable. The writer is
        a task of this service, not of the first caller: a caller cancelled (its request's
        connection closed) must not stop the writing the others wait for."""
        self._pending.setdefault(ident, []).append(pending)
        if ident not in self._writing:
            try:
                self.tasks.start_soon(self._writer, ident)
                self._writing.add(ident)
            except RuntimeError:
                self._pending[ident].remove(pending)
                raise RequestError("this peer is stopping", ErrorCode.UNAVAILABLE) from None
        await pending.done.wait()
        if pending.error is not None:
            raise pending.error

    async def _writer(self, ident: str) -> None:
        """Write the notifications waiting for mailbox `ident`, a batch (one durable write) at a
        time, until none waits. A batch that fails is told so; the next one is tried still."""
        try:
            while self._pending.get(ident):
                batch = self._pending.pop(ident)
                try:
                    await self._write_pending(ident, batch)
                except EventCloudError as exc:
                    log.info("peer %s: notifications for %s not kept: %s", self.state.id, ident, exc)
        finally:
            self._writing.discard(ident)
            for left in self._pending.pop(ident, []):  # this peer is stopping
                left.error = _not_kept(ident)
                left.done.set()

    async def _write_pending(self, ident: str, batch: list[_Pending]) -> None:
        box = self.boxes.get(ident)
        mutations, taken = [], set()
        seq = box.next_seq if box is not None else 1
        for item in batch:
            if box is None or box.ended or item.graph in box.seen or item.graph in taken:
                continue
            taken.add(item.graph)
            mutations.append(mb.put(ident, seq, item.graph, item.published_ms, item.note))
            seq += 1
        try:
            if mutations:
                await self._write_home(ident, mutations)
                self.counters["notifications_kept"] += len(mutations)
        except Exception as exc:
            for item in batch:
                item.error = exc
            raise
        except BaseException:  # this peer is stopping: a typed error for each waiting caller
            for item in batch:
                item.error = _not_kept(ident)
            raise
        finally:
            for item in batch:
                item.done.set()
        current = self._attachments.get(ident)
        if current is not None:
            current.wake.set()

    # --- forwarding to the attached entry peer --------------------------------------------------

    async def _forward(self, ident: str, attachment: _Forwarding) -> None:
        """Send the attachment's entry peer what is numbered after its cursor, in order, until it
        is replaced, its entry peer is gone, the subscription ends or its zone moves away."""
        try:
            while self._attachments.get(ident) is attachment:
                box = self.boxes.get(ident)
                if box is None or not self.owns(box):
                    return
                if box.ended:
                    await self._tell_ended(ident, attachment, box.ended)
                    return
                if trio.current_time() - attachment.seen > 3 * self.attach_refresh:
                    return  # the entry peer stopped refreshing: its subscriber went away
                fetched = self.boxes.fetch(ident, attachment.cursor, DELIVERY_BUDGET)
                if not fetched.notes and fetched.gap is None:
                    attachment.wake = trio.Event()
                    with trio.move_on_after(self.attach_refresh):
                        await attachment.wake.wait()
                    continue
                notes = []
                if fetched.gap is not None:
                    notes.append(Notification(ident, "", "gap", 0, seq=fetched.gap[1], gap=fetched.gap,
                                              error=f"notifications {fetched.gap[0]} to {fetched.gap[1]} were dropped: "
                                                    f"more were waiting unacknowledged than the subscription keeps"))
                notes += [replace(Notification.from_wire(msgpack.unpackb(note, raw=False), trusted=True), seq=seq)
                          for seq, note in fetched.notes]
                last = fetched.notes[-1][0] if fetched.notes else fetched.gap[1]  # type: ignore[index]
                try:
                    with trio.fail_after(self.retry_window):
                        await self.router.call(attachment.entry, Op.MAILBOX_DELIVER,
                                               MailboxDeliver(ident, attachment.epoch, tuple(notes)))
                except RemoteError as exc:
                    if exc.code is ErrorCode.BUSY:  # its subscriber is slow: keep the cursor, try again
                        await trio.sleep(0.2)
                        continue
                    return
                except (*FAILED, trio.TooSlowError):
                    return
                attachment.cursor = max(attachment.cursor, last)
                self.counters["notifications_forwarded"] += len(notes)
        finally:
            if self._attachments.get(ident) is attachment:
                del self._attachments[ident]
            self.counters["attachments"] = len(self._attachments)

    async def _tell_ended(self, ident: str, attachment: _Forwarding, reason: str) -> None:
        try:
            with trio.fail_after(self.retry_window):
                await self.router.call(attachment.entry, Op.MAILBOX_DELIVER,
                                       MailboxDeliver(ident, attachment.epoch, (), ended=reason))
        except (*FAILED, EventCloudError, trio.TooSlowError):
            pass  # its next refresh is told

    # --- leases, renewal and cancellation -----------------------------------------------------------

    async def _local_end(self, body: MailboxEnd) -> int:
        """Renew (`lease_ms` > 0; the new expiry) or cancel (0) a durable subscription."""
        box = self._box(body.id, None if body.admin else body.ticket)
        if body.lease_ms > 0:
            expires = self.physical_ms() + body.lease_ms
            await self._write_home(body.id, [mb.lease(body.id, expires)])
            await self.router.multicast(self._stored_on(box), Op.LEASE_SUB, Leases(((body.id, expires),)))
            return expires
        await self._end(box, "cancelled")
        return 0

    async def _end(self, box: mb.Mailbox, reason: str) -> None:
        await self._write_home(box.id, [mb.end(box.id, reason, self.physical_ms())])
        self.counters[f"subscriptions_{reason}"] += 1
        current = self._attachments.get(box.id)
        if current is not None:
            current.wake.set()
        self._unremoved.add(box.id)
        await self._remove_everywhere(box.id)

    def _stored_on(self, box: mb.Mailbox | None) -> Box:
        """The box of the peers that store a durable subscription (its indexing pattern's)."""
        try:
            return indexing_box(self.state.space, box.record["sparql"], self.subscriptions.operators)
        except Exception:  # no record left, or an unreadable one: every peer
            return self.state.space.whole_space()

    async def _remove_everywhere(self, ident: str) -> None:
        try:
            with trio.fail_after(self.retry_window * 2):
                box = self._stored_on(self.store.sync.mailboxes.get(ident))
                await self.router.multicast(box, Op.REMOVE_SUB, SubscriptionId(ident))
            self._unremoved.discard(ident)
        except (EventCloudError, trio.TooSlowError) as exc:
            log.info("peer %s: subscription %s not removed everywhere yet (%s); retried", self.state.id, ident, exc)

    async def _local_leases(self, body: Leases) -> int:
        updated = 0
        for ident, expires in body.leases:
            if isinstance(ident, str) and isinstance(expires, int):
                updated += await self.subscriptions.renew(ident, expires)
        return updated

    async def _lease_loop(self) -> None:
        while True:
            await trio.sleep(self.lease_check_every)
            await self.expire_once()

    async def expire_once(self) -> None:
        """End the mailboxes whose lease ran out, retry removals, forget old tombstones, and drop
        records of subscriptions nobody removed (their entry or home is gone for good)."""
        now = self.physical_ms()
        cutoff = now - int(self.lease_grace * 1000)
        lapsing = self.subscriptions.lapsed_before(cutoff) or any(
            self.owns(box) and not box.ended and box.expires and box.expires <= now for box in self.boxes.all())
        if lapsing and self.clock_agrees is not None and not await self.clock_agrees():
            return   # our clock may be the one that is wrong: nothing lapses until it agrees again
        for box in self.boxes.all():
            if not self.owns(box):
                continue
            if not box.ended and box.expires and box.expires <= now:
                try:
                    await self._end(box, "expired")
                except EventCloudError as exc:
                    log.warning("peer %s: could not end expired subscription %s: %s", self.state.id, box.id, exc)
            elif box.ended and box.ended_at + self.ended_ttl * 1000 <= now and box.id not in self._unremoved:
                await self.store.write([mb.forget(box.id)], durable=False)
        for ident in list(self._unremoved):
            await self._remove_everywhere(ident)
        await self.subscriptions.expire(cutoff)

    # --- listing ------------------------------------------------------------------------------

    async def _local_list(self, body: Empty) -> list[Any]:
        """What this peer knows: the records it stores and the mailboxes it homes."""
        out = []
        for stored in self.subscriptions:
            r = stored.record
            out.append(SubscriptionInfo(r.id, r.sparql, r.kind, r.home is not None, r.entry, r.expires,
                                        peers=1).to_wire())
        for box in self.boxes.all():
            if not self.owns(box) or box.ended:
                continue
            current = self._attachments.get(box.id)
            out.append(SubscriptionInfo(box.id, box.record["sparql"], box.record["kind"], True, "", box.expires,
                                        retained=len(box.retained), last=box.last, acked=box.acked,
                                        dropped=box.dropped, attached=current.entry if current else "").to_wire())
        return out
