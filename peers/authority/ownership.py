"""A peer's standing with the ownership authority: its lease, its zone's epoch, the fence on writes.

Keys per zone (a zone is named by its owner's id, which a stand-in keeps):

* `eventcloud/<overlay>/epoch/<id>`: the zone's epoch (the owner's incarnation), a key without a
  lease: it outlives every owner;
* `eventcloud/<overlay>/owner/<id>`: who serves it at that epoch, attached to the server's lease:
  it vanishes when the authority stops hearing from that runtime;
* `eventcloud/<overlay>/replica/<id>`: the peer holding its current copy, which the owner records
  (`record_replica`) before it acknowledges a write that only the new copy holds. Only that peer
  may claim the zone: a peer that held an older copy (the owner replaced it while the two could
  not talk) would serve it without the writes acknowledged since. An heir taking the zone over
  in a leave marks it `absorbed:<heir>` first (`absorb`), so no copy of it is claimed after;
* `eventcloud/<overlay>/leave/<id>`: a leave under way (`leaving:<token>`), decided by one
  transaction, the heir's (`absorbed:<heir>`) or the leaver's withdrawal (`settle_leave`);
* `eventcloud/<overlay>/join/<id>`: the split that made the zone (`granted:<splitter>`), decided
  by one of the splitter's transactions, its commit (`committed:<splitter>`) or its undo;
* `eventcloud/<overlay>/zone/<id>`: the zone's box: the zone map, written by the transactions
  that decide a founding, a split's commit and a leave, and by nothing else.

A runtime serves its zone only after it *registered* (a transaction: the epoch is its
incarnation -> the owner key is its, under its lease), and acknowledges a write only while its
lease is surely alive (`fence`): the lease is taken as valid for its TTL from the moment the
last successful renewal was *sent*, which ends no later than the authority's own expiry (the
authority started its count after receiving it), with no wall clock compared across hosts.

A replica takes a zone over only by *claiming* it (`claim`: the owner key is absent, so the
owner's lease expired, and the epoch is still the one it copied -> the epoch goes one up). A
replica cut off from the authority cannot claim, and a live owner keeps its key: neither a
partition nor a slow link deposes a healthy owner. An owner that lost its lease re-registers
if its epoch is unchanged (nobody claimed), and steps down if it moved on (`superseded`).

Without an authority (`authority=None`: in-process tests written before it, and the overlay
of a lone peer started without one), every check passes: the peer decides alone, as before.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter

import trio

from eventcloud.errors import AuthorityUnreachable, Fenced, LeaseExpired
from peers.authority.base import Authority, Delete, Entry, Put, Same
from peers.authority.decisions import ABSORBED, COMMITTED, GRANTED, LEAVING, DecidedAtTheAuthority, zone_map
from peers.authority.watched import WatchedZoneMap, served_at
from peers.store import PeerState, StateError

log = logging.getLogger(__name__)

__all__ = ["ABSORBED", "COMMITTED", "GRANTED", "LEAVING", "Ownership", "lease_ttl", "zone_map"]

#: A renewal slower than the base TTL over this leaves the lease at risk: it is extended.
SLOW_RENEWAL = 1 / 5
#: ... to this many times the base TTL, until this many renewals in a row came back fast again
#: (under the base TTL over FAST_RENEWAL), when it returns to the base TTL.
EXTENDED = 3
FAST_AGAIN = 10
FAST_RENEWAL = 1 / 20


def lease_ttl(failure_timeout: float) -> int:
    """A lease's TTL for a failure timeout: four times it, in whole seconds (etcd's unit), at
    least 10 (Consul's sessions start at 10 s, Kubernetes' leader leases at 15, Patroni's at 30).

    A crashed owner's zone is claimable once its lease expired, so this bounds the takeover time
    from below; but a live owner must renew through whatever its link carries besides: behind a
    saturated 16 kbit/s link (`experiments.faults`, scenario slow) nothing crossed for several
    seconds at a time, and a 5 s lease lapsed on a live peer in 2 of 10 runs even with renewals
    hedged and extended once slow (the extension itself must cross the link, and came too late).
    No peer can tell a silent peer from a dead one faster than its link lets it speak."""
    return max(10, math.ceil(4 * failure_timeout))


class Ownership(DecidedAtTheAuthority):
    def __init__(self, state: PeerState, authority: Authority | None, counters: Counter[str], *, ttl: int,
                 watched: WatchedZoneMap | None = None) -> None:
        self.state = state
        self.authority = authority
        self.watched = watched   # the zone map as watched: where zones are served, without a request
        self.counters = counters
        self.base_ttl = ttl     # a lease's TTL while renewals come back fast
        self.ttl = ttl          # the TTL of the lease held now (longer while renewals are slow)
        self._fast = 0          # renewals in a row that came back fast, since the lease was extended
        self._adapting = False  # a move of the owner key to another lease is under way
        self._renewals: trio.Nursery | None = None
        self.lease: int | None = None
        self.registered = False
        self.valid_until = -math.inf   # the trio clock's time until which the lease surely holds
        self.superseded = trio.Event()  # the zone's epoch moved past ours: this runtime steps down
        self.newer_epoch = 0
        self.retired = False
        self._unreachable_logged = False

    @property
    def enabled(self) -> bool:
        return self.authority is not None

    @property
    def url(self) -> str:
        """Where peers joining without `--authority` find this overlay's authority ("" : none to tell)."""
        return str(getattr(self.authority, "advertised", "") or "")

    def _key(self, kind: str, ident: str) -> str:
        return f"eventcloud/{self.state.overlay}/{kind}/{ident}"

    # --- the fence -------------------------------------------------------------------------------

    def fence(self) -> None:
        """Raise `Fenced` unless this runtime surely holds its zone now."""
        if self.authority is None:
            return
        if self.superseded.is_set():
            raise Fenced(f"peer {self.state.id}'s zone moved to epoch {self.newer_epoch}: this owner is deposed; retry")
        if not self.registered or trio.current_time() >= self.valid_until:
            self.counters["writes_fenced"] += 1
            raise Fenced(f"peer {self.state.id} holds no live lease on its zone with the ownership authority "
                         f"(unreachable, or the lease lapsed): nothing is acknowledged until it does; retry")

    # --- registering, renewing ------------------------------------------------------------------

    async def establish(self) -> None:
        """Take a lease and register this runtime as its zone's owner at its incarnation. Sets
        `superseded` if the epoch moved on. `AuthorityUnreachable` leaves it to `run` to retry."""
        if self.authority is None:
            return
        sent = trio.current_time()
        if self.lease is None:
            self.lease, self.ttl = await self.authority.grant(self.base_ttl), self.base_ttl
        await self._register()
        if self.registered:
            self.valid_until = sent + self.ttl

    async def _register(self) -> None:
        assert self.authority is not None and self.lease is not None
        state = self.state
        epoch, owner = self._key("epoch", state.id), self._key("owner", state.id)
        mine, record = str(state.incarnation), self._record()
        if await self.authority.transact([Same(epoch, mine)], [Put(owner, record, self.lease)]):
            self.registered = True
            return
        current = await self.authority.get(epoch)
        seen = int(current.value) if current is not None else None
        if seen is not None and seen > state.incarnation:
            self._deposed(seen)
            return
        # A zone new to the authority (a new peer's, or one served before it was used), or one
        # whose epoch an older incarnation left lower: this incarnation's, if nobody moved it meanwhile.
        expected = None if current is None else current.value
        if await self.authority.transact([Same(epoch, expected)], [Put(epoch, mine), Put(owner, record, self.lease)]):
            self.registered = True
            self.counters["zones_registered"] += 1

    def _record(self) -> str:
        return json.dumps({"address": self.state.address, "incarnation": self.state.incarnation}, sort_keys=True)

    def _deposed(self, epoch: int) -> None:
        if not self.superseded.is_set():
            log.warning("peer %s: the ownership authority holds its zone at epoch %d, past its own %d: "
                        "another peer serves it now; this one steps down", self.state.id, epoch,
                        self.state.incarnation)
            self.newer_epoch = epoch
            self.counters["deposed_by_authority"] += 1
            self.registered = False
            self.superseded.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Renew the lease every third of its TTL, each renewal in a task of its own that may
        take up to the TTL: behind a slow or saturated link a renewal waits seconds, and the
        next one must not wait for it (renewals in turn lapsed a live peer's lease behind 16
        kbit/s). Re-register after losing the lease; retry an unreachable authority twice as
        often (the fence holds writes meanwhile)."""
        task_status.started()
        if self.authority is None:
            await trio.sleep_forever()
        try:
            async with trio.open_nursery() as renewals:
                self._renewals = renewals
                while not self.superseded.is_set():
                    if self.registered and self.lease is not None:
                        await trio.sleep(self.base_ttl / 3)
                        if self.registered and self.lease is not None:
                            renewals.start_soon(self._renew, self.lease)
                    else:
                        await trio.sleep(self.base_ttl / 6)
                        await self._reestablish()
                renewals.cancel_scope.cancel()
            await trio.sleep_forever()   # deposed: the runtime steps down (it watches `superseded`)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await self.release_lease()

    def retire(self) -> None:
        """This runtime handed its zone over (a leave, a move, an annex handed on): when it ends,
        the zone's keys go too, so that no replica can claim a zone that lives on elsewhere."""
        self.retired = True

    async def abandon_join(self) -> None:
        """This runtime's join surely did not commit (it failed before the commit was sent, or the
        splitter refused it; the splitter keeps or takes back the zone): its keys go, so that the
        copy it made of the zone it was granted is never claimed (simulation seed 12, and the
        fault harness's minority scenario: a replica took such a zone over, and two peers served
        it, each with part of its writes). A commit whose answer was lost keeps them: the
        splitter may have committed, and then that copy is the zone's only one (seed 92)."""
        self.retire()
        if self.authority is None:
            return
        with trio.move_on_after(1):
            try:   # its renewals may have ended (and the lease gone) with the runtime already
                await self._delete_keys()
            except (AuthorityUnreachable, LeaseExpired):
                pass
            await self.release_lease()

    async def _read(self, kind: str, ident: str) -> Entry | None:
        """One of `ident`'s keys; None if absent, unreachable or no authority."""
        if self.authority is None:
            return None
        try:
            return await self.authority.get(self._key(kind, ident))
        except AuthorityUnreachable:
            return None

    async def epoch_of(self, ident: str) -> int | None:
        """The authority's epoch of `ident`'s zone; None if unknown, unreachable or no authority."""
        entry = await self._read("epoch", ident)
        return int(entry.value) if entry is not None else None

    async def server_of(self, ident: str) -> tuple[str, int] | None:
        """Where `ident`'s zone is served now, as its server registered it: (address,
        incarnation); None if nobody holds it (its lease lapsed), unreachable, or no authority.
        From the watched zone map while its watch is live (routing never waits on the
        authority), else read."""
        if self.watched is not None and self.watched.synced:
            self.counters["servers_located_from_watch"] += 1
            return self.watched.server_of(ident)
        entry = await self._read("owner", ident)
        if entry is None:
            return None
        try:
            return served_at(entry)
        except ValueError:
            log.warning("peer %s: the authority's owner record of %s is not one: %r", self.state.id, ident,
                        entry.value[:200])
            return None

    async def _renew(self, lease: int) -> None:
        """One renewal, bounded by the TTL (past it, a renewal could only arrive too late)."""
        assert self.authority is not None
        sent, ttl = trio.current_time(), self.ttl
        answered = trio.Event()
        if self._renewals is not None:
            self._renewals.start_soon(self._extend_unless, answered)
        with trio.move_on_after(ttl):
            try:
                await self.authority.keep_alive(lease)
                answered.set()
                if lease == self.lease and self.registered:
                    self.valid_until = max(self.valid_until, sent + ttl)
                self._answered()
                self._timed(trio.current_time() - sent)
            except LeaseExpired:
                if lease == self.lease:
                    log.warning("peer %s: its lease with the ownership authority expired; writes wait until it "
                                "registers again (or steps down, if its zone was taken over)", self.state.id)
                    self.counters["leases_lost"] += 1
                    self.lease, self.registered, self.valid_until = None, False, -math.inf
            except AuthorityUnreachable as exc:
                self._unreachable(exc)

    def _timed(self, took: float) -> None:
        """A renewal's round trip: the slowest is kept, and one past a third of the TTL is said
        (the link or the authority is that slow: a few more and the lease lapses on a live peer).
        An extended lease goes back to the base TTL after FAST_AGAIN fast ones in a row."""
        if took < self.base_ttl * FAST_RENEWAL:
            self._fast += 1
            if self.ttl > self.base_ttl and self._fast >= FAST_AGAIN and self._renewals is not None:
                self._renewals.start_soon(self._adapt, self.base_ttl)
        else:
            self._fast = 0
        ms = int(took * 1000)
        self.counters["lease_renewal_slowest_ms"] = max(self.counters["lease_renewal_slowest_ms"], ms)
        if took > self.ttl / 3:
            self.counters["lease_renewals_slow"] += 1
            log.warning("peer %s: a renewal of its lease took %.1f s of the lease's %d s (a slow or saturated "
                        "link to the ownership authority?)", self.state.id, took, self.ttl)

    async def _extend_unless(self, answered: trio.Event) -> None:
        """A renewal not answered within a fifth of the base TTL: the link to the authority (or
        the authority) is slow, and a few more like it let the lease lapse on a live peer (behind
        a saturated 16 kbit/s link nothing crossed for over 10 s, past the 5 s lease). The owner
        key moves to a lease EXTENDED times as long while renewals are slow: a peer that cannot
        be told from a dead one quickly is taken over slowly, should it crash meanwhile."""
        with trio.move_on_after(self.base_ttl * SLOW_RENEWAL):
            await answered.wait()
        if not answered.is_set() and self.ttl == self.base_ttl:
            await self._adapt(self.base_ttl * EXTENDED)

    async def _adapt(self, ttl: int) -> None:
        """Move the owner key to a new lease of `ttl` seconds (a transaction: the epoch and the
        record still ours), then revoke the old lease. An outcome not known (the answer lost)
        re-registers, as a lost lease does: a key left on a lease nobody renews would vanish
        while the fence still passed."""
        if self._adapting or not self.registered or self.lease is None or self.authority is None:
            return
        self._adapting = True
        old, sent = self.lease, trio.current_time()
        epoch, owner = self._key("epoch", self.state.id), self._key("owner", self.state.id)
        try:
            lease = await self.authority.grant(ttl)
            try:
                moved = await self.authority.transact(
                    [Same(epoch, str(self.state.incarnation)), Same(owner, self._record())],
                    [Put(owner, self._record(), lease)])
            except (AuthorityUnreachable, LeaseExpired):
                if self.lease == old:
                    self.lease, self.registered, self.valid_until = None, False, -math.inf
                return
            if not moved or self.lease != old:
                await self.authority.revoke(lease)
                return
            self.lease, self.ttl, self.valid_until, self._fast = lease, ttl, sent + ttl, 0
            longer = ttl > self.base_ttl
            self.counters["leases_extended" if longer else "leases_restored"] += 1
            log.log(logging.WARNING if longer else logging.INFO,
                    "peer %s: %s; its lease is now %d s (a takeover of this peer, should it crash, waits as long)",
                    self.state.id, "renewals of its lease are slow" if longer else "renewals are fast again", ttl)
            await self.authority.revoke(old)
        except (AuthorityUnreachable, LeaseExpired):
            pass
        finally:
            self._adapting = False

    async def _reestablish(self) -> None:
        try:
            await self.establish()
            self._answered()
        except LeaseExpired:
            self.lease = None   # granted, then gone before it registered: a new one next time
        except AuthorityUnreachable as exc:
            self._unreachable(exc)

    def _answered(self) -> None:
        if self._unreachable_logged:
            log.info("peer %s: the ownership authority answers again", self.state.id)
            self._unreachable_logged = False

    def _unreachable(self, exc: AuthorityUnreachable) -> None:
        self.counters["authority_unreachable"] += 1
        if not self._unreachable_logged:
            log.warning("peer %s: %s (its writes are refused once its lease may have lapsed)", self.state.id, exc)
            self._unreachable_logged = True

    async def release_lease(self) -> None:
        """This runtime ends: its lease goes now, so a replica need not wait out the TTL."""
        if self.authority is None or self.lease is None:
            return
        lease, self.lease, self.registered, self.valid_until = self.lease, None, False, -math.inf
        try:
            if self.retired:
                await self._delete_keys()
            await self.authority.revoke(lease)
        except (AuthorityUnreachable, LeaseExpired):
            pass

    async def _delete_keys(self) -> None:
        """This zone's epoch, owner, replica and join keys, deleted while the epoch is still ours
    (its box in the zone map went with the transaction that gave the zone to its heir; a join
    abandoned never had one)."""
        assert self.authority is not None
        epoch = self._key("epoch", self.state.id)
        await self.authority.transact([Same(epoch, str(self.state.incarnation))],
                                      [Delete(epoch), Delete(self._key("owner", self.state.id)),
                                       Delete(self._key("replica", self.state.id)),
                                       Delete(self._key("join", self.state.id))])

    async def record_replica(self, replica: str, address: str = "") -> None:
        """Name `replica` (at `address`) as the holder of this zone's current copy (before any
        write only it holds is acknowledged). `Fenced` if the zone's epoch moved on: this owner
        is deposed. The address tells apart two runtimes under one id: a peer taken over rejoins
        under a new id, keeping the copies it held, while a stand-in serves on under its old one;
        named by id alone, the stand-in's fresh copy let the rejoined peer claim with its stale
        one (simulation seed 32, once a deposed owner's copy no longer replaced newer ones)."""
        if self.authority is None:
            return
        epoch = self._key("epoch", self.state.id)
        if await self.authority.transact([Same(epoch, str(self.state.incarnation))],
                                         [Put(self._key("replica", self.state.id), _named(replica, address))]):
            return
        current = await self.epoch_of(self.state.id)
        if current is not None and current > self.state.incarnation:
            self._deposed(current)
        raise Fenced(f"peer {self.state.id} cannot name its new replica: its zone's epoch is not its own "
                     f"({current}, not {self.state.incarnation})")

    async def refuse_a_second_overlay(self) -> None:
        """A first peer (no --join, no zone of its own) starts no overlay beside one the authority
        knows to be served: a wiped peer restarted with its first command joins it instead."""
        try:
            live = {o: a for o, a in (await self.live_overlays()).items() if a}
        except AuthorityUnreachable as exc:
            raise StateError(f"cannot start a new overlay: {exc}") from None
        if live:
            overlay, addresses = next(iter(live.items()))
            raise StateError(f"the ownership authority knows overlay {overlay}, served by {len(addresses)} peer(s) "
                             f"(e.g. {addresses[0]}); this peer has no data of its own (a new or wiped data "
                             f"directory), so it would start a second overlay: start it with --join {addresses[0]}")

    async def live_overlays(self) -> dict[str, list[str]]:
        """Overlay id -> addresses of its live owners, as the authority knows them (empty without
        one). A first peer asks before it starts a new overlay: a wiped one restarted with its own
        command would otherwise start a second overlay at the old address."""
        if self.authority is None:
            return {}
        found: dict[str, list[str]] = {}
        for entry in await self.authority.scan("eventcloud/"):
            parts = entry.key.split("/")
            if len(parts) == 4 and parts[2] == "owner":
                try:
                    address = str(json.loads(entry.value).get("address", ""))
                except (ValueError, AttributeError):
                    address = ""
                found.setdefault(parts[1], [])
                if address:
                    found[parts[1]].append(address)
        return found

    # --- taking a zone over ----------------------------------------------------------------------

    async def refusal(self, owner: str, incarnation: int, holder: str = "", holder_address: str = "") -> str:
        """Why `claim` of `owner`'s zone at `incarnation` was not won, read from the authority's
        keys (for the log: each condition of the claim's transaction can fail on its own)."""
        if self.authority is None:
            return "no authority"
        try:
            lease = await self.authority.get(self._key("owner", owner))
            epoch = await self.authority.get(self._key("epoch", owner))
            replica = await self.authority.get(self._key("replica", owner))
        except AuthorityUnreachable as exc:
            return f"the ownership authority did not say why: {exc}"
        if lease is not None:
            try:
                taker = json.loads(lease.value).get("claimed_by")
            except (ValueError, AttributeError):
                taker = None
            if taker:
                return f"peer {taker} claimed it first"
            return "it still holds its lease with the ownership authority (alive, or its lease has not lapsed yet)"
        if epoch is None:
            return "the authority holds no epoch of its zone (its keys were retired: the zone lives on elsewhere)"
        if epoch.value != str(incarnation):
            return f"its zone's epoch is {epoch.value}, not {incarnation} (taken over by another peer first)"
        if replica is not None and replica.value.startswith(ABSORBED):
            return f"it left: peer {replica.value[len(ABSORBED):]} took its zone over"
        if replica is not None and replica.value not in self._names(holder, holder_address):
            return f"the authority names another copy of it as current (taken as {replica.value})"
        return "another claim won meanwhile"

    def _names(self, holder: str, holder_address: str) -> list[str | None]:
        """How the authority may name a copy this runtime holds as current: as the runtime that
        took it (a kept copy: `holder` at `holder_address`), as this runtime, by id alone (written
        by older code), or not at all (an owner that never named one: a stand-in that did not get
        to choose its replica, a peer whose writes were never replicated)."""
        names: list[str | None] = []
        if holder and holder_address:
            names.append(_named(holder, holder_address))
        names += [_named(self.state.id, self.state.address), holder or self.state.id, self.state.id, None, ""]
        return list(dict.fromkeys(names))

    async def claim(self, owner: str, incarnation: int, holder: str = "", holder_address: str = "") -> bool:
        """Whether this runtime won `owner`'s zone, at `incarnation` + 1: only if the owner's
        lease expired (its key is gone) and nobody claimed the zone first. `holder`: the id the
        copy was taken under, when an earlier runtime of this peer took it (it rejoined since).
        Without an authority, True (the replica decides alone). `AuthorityUnreachable`: nothing claimed."""
        if self.authority is None:
            return True
        if self.lease is None:
            raise AuthorityUnreachable(f"peer {self.state.id} holds no lease with the ownership authority: "
                                       f"it cannot claim peer {owner}'s zone now")
        epoch, key, replica = self._key("epoch", owner), self._key("owner", owner), self._key("replica", owner)
        record = json.dumps({"address": "", "incarnation": incarnation + 1, "claimed_by": self.state.id},
                            sort_keys=True)
        then = [Put(epoch, str(incarnation + 1)), Put(key, record, self.lease), Put(replica, "")]
        won = False
        # the copy the owner named last, or (an owner that never named one: a stand-in that did
        # not get to choose its replica, a peer whose writes were never replicated) any
        for named in self._names(holder, holder_address):
            if await self.authority.transact([Same(key, None), Same(epoch, str(incarnation)), Same(replica, named)],
                                             then):
                won = True
                break
        self.counters["claims_won" if won else "claims_lost"] += 1
        return won


def _named(replica: str, address: str) -> str:
    """A replica as the authority names it: its id and address (`id@address`), or its id alone."""
    return f"{replica}@{address}" if address else replica
