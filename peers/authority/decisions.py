"""Joins and leaves decided at the ownership authority, and the zone map they write.

A split granted to a newcomer stands or is undone, and a leaver's zone goes to its heir or
stays, by whichever of two transactions comes first: `commit_split` / `undo_split` (the
splitter's, `join/<newcomer>`), `absorb` (the heir's) / `settle_leave` (the leaver's,
`leave/<leaver>`). The same transactions write the zone map (`zone/<id>`: each zone's box), so
it changes only as ownership is decided. Part of `Ownership` (the peer's standing with the
authority), kept apart from its lease and fence; peers/membership/decisions.py is the side of
the membership services.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from typing import TYPE_CHECKING

from eventcloud.errors import Fenced
from eventcloud.overlay import Zone
from eventcloud.wire.codec import zone_from_wire, zone_to_wire
from peers.authority.base import Authority, Delete, Entry, Put, Same

if TYPE_CHECKING:
    from peers.store import PeerState

log = logging.getLogger(__name__)

__all__ = ["ABSORBED", "COMMITTED", "GRANTED", "LEAVING", "DecidedAtTheAuthority", "zone_map"]

#: How the authority names the copy of a zone an heir took over in a leave: no replica claims it.
ABSORBED = "absorbed:"
#: A leave under way, not yet decided (`leave/<id>` = `leaving:<token>`).
LEAVING = "leaving:"
#: A split granted to a newcomer, not yet decided (`join/<newcomer>` = `granted:<splitter>`).
GRANTED = "granted:"
#: A split that stands (`join/<newcomer>` = `committed:<splitter>`).
COMMITTED = "committed:"


class DecidedAtTheAuthority:
    """The decisions of joins and leaves (mixed into `Ownership`, whose keys and epoch they use)."""

    state: "PeerState"
    authority: Authority | None
    counters: Counter[str]

    def _key(self, kind: str, ident: str) -> str:
        return f"eventcloud/{self.state.overlay}/{kind}/{ident}"

    def _deposed(self, epoch: int) -> None:
        raise NotImplementedError

    async def _read(self, kind: str, ident: str) -> Entry | None:
        raise NotImplementedError

    async def epoch_of(self, ident: str) -> int | None:
        raise NotImplementedError

    # --- leaves, decided at the authority ------------------------------------------------------

    async def begin_leave(self) -> str:
        """A leave of this zone begins: the authority records the attempt (`leave/<id>` =
        `leaving:<token>`) while our epoch is ours; the token goes to the heir. From then one
        transaction decides it: the heir's `absorb` or our `settle_leave`, whichever comes first.
        "" without an authority (the two peers decide alone). `Fenced` if the epoch moved on."""
        if self.authority is None:
            return ""
        token = uuid.uuid4().hex
        epoch = self._key("epoch", self.state.id)
        if await self.authority.transact([Same(epoch, str(self.state.incarnation))],
                                         [Put(self._key("leave", self.state.id), LEAVING + token)]):
            return token
        current = await self.epoch_of(self.state.id)
        if current is not None and current > self.state.incarnation:
            self._deposed(current)
        raise Fenced(f"peer {self.state.id} cannot leave: its zone's epoch is {current}, not {self.state.incarnation}")

    async def absorb(self, leaver: str, incarnation: int, token: str = "", merged: Zone | None = None) -> None:
        """The decision of a leave, on the heir's side: one transaction checks that our epoch is
        still ours, the leaver's the one it leaves at and its leave still undecided (`token`),
        and marks its copy and its leave as absorbed by us (`absorbed:<our id>`). From then its
        replica's claim fails, and the leaver, if it never hears our answer, learns from the
        authority that it left. Returns if we won (now, or in an earlier attempt whose answer
        was lost); `Fenced` if not: the leaver kept its zone, another heir took it, or an epoch
        moved (a deposed heir merges nothing; a leaver taken over has nothing to hand).
        `AuthorityUnreachable`: undecided."""
        if self.authority is None:
            return
        mine, theirs = self._key("epoch", self.state.id), self._key("epoch", leaver)
        leave, ours = self._key("leave", leaver), ABSORBED + self.state.id
        conditions = [Same(mine, str(self.state.incarnation)), Same(theirs, str(incarnation))]
        changes = [Put(self._key("replica", leaver), ours)]
        if token:
            conditions.append(Same(leave, LEAVING + token))
            changes.append(Put(leave, ours))
        if merged is not None:   # the zone map: the merged zone is ours, the leaver's is no more
            changes += [Put(self._key("zone", self.state.id), _box(merged)), Delete(self._key("zone", leaver))]
        if await self.authority.transact(conditions, changes):
            return
        decided = await self.authority.get(leave) if token else None
        if decided is not None and decided.value == ours:
            return
        own, other = await self.epoch_of(self.state.id), await self.epoch_of(leaver)
        if own != self.state.incarnation:
            if own is not None and own > self.state.incarnation:
                self._deposed(own)
            raise Fenced(f"peer {self.state.id} cannot take peer {leaver}'s zone over: its own zone's epoch is "
                         f"{own}, not {self.state.incarnation}")
        if other != incarnation:
            raise Fenced(f"peer {self.state.id} cannot take peer {leaver}'s zone over: that zone's epoch is {other}, "
                         f"not {incarnation} (taken over while it was leaving)")
        raise Fenced(f"peer {self.state.id} cannot take peer {leaver}'s zone over: that leave was decided otherwise "
                     f"({decided.value if decided is not None else 'the leaver kept its zone'})")

    async def settle_leave(self, token: str) -> str | None:
        """The decision of a leave whose heir never answered, on the leaver's side: None if we
        keep our zone (our transaction withdrew the attempt, so no heir can take it now), else
        the id of the heir that took it (its answer was lost; it serves the zone, or will once
        restarted, or its stand-in will). `AuthorityUnreachable`: undecided."""
        if self.authority is None or not token:
            return None
        leave = self._key("leave", self.state.id)
        if await self.authority.transact([Same(leave, LEAVING + token)], [Delete(leave)]):
            return None
        return await self.absorbed_by(self.state.id) or None

    async def withdraw_leave(self) -> str:
        """At a restart, before the zone is served: a leave this peer began and never saw
        decided (it was stopped mid-leave) is withdrawn, so no heir can take the zone from now
        on; unless an heir took it first: then that heir's id ("" if none). Raises
        `AuthorityUnreachable` (the restart waits: serving the zone with a leave undecided would
        let a late heir take it too)."""
        if self.authority is None:
            return ""
        leave = self._key("leave", self.state.id)
        entry = await self.authority.get(leave)
        if entry is not None and entry.value.startswith(LEAVING) and \
                await self.authority.transact([Same(leave, entry.value)], [Delete(leave)]):
            return ""
        return await self.absorbed_by(self.state.id)

    async def absorbed_by(self, ident: str) -> str:
        """The heir that took `ident`'s zone in a leave, as the authority records it ("" if none
        or no authority). `AuthorityUnreachable` when it cannot be read: a leaver that could not
        withdraw its leave must not take "cannot tell" for "kept"."""
        if self.authority is None:
            return ""
        for kind in ("leave", "replica"):
            entry = await self.authority.get(self._key(kind, ident))
            if entry is not None and entry.value.startswith(ABSORBED):
                return entry.value[len(ABSORBED):]
        return ""

    # --- joins, decided at the authority -------------------------------------------------------

    async def begin_split(self, newcomer: str) -> None:
        """A split granted to `newcomer` (before our zone shrinks): the authority records it
        (`join/<newcomer>` = `granted:<our id>`) while our epoch is ours. From then one
        transaction decides it: our `commit_split` (the newcomer asked) or `undo_split` (it
        never did), whichever comes first; a stand-in of ours, or this peer restarted, decides
        the same record. `Fenced` if our epoch moved on."""
        if self.authority is None:
            return
        epoch = self._key("epoch", self.state.id)
        if await self.authority.transact([Same(epoch, str(self.state.incarnation))],
                                         [Put(self._key("join", newcomer), GRANTED + self.state.id)]):
            return
        current = await self.epoch_of(self.state.id)
        if current is not None and current > self.state.incarnation:
            self._deposed(current)
        raise Fenced(f"peer {self.state.id} cannot split its zone: its epoch is {current}, not {self.state.incarnation}")

    async def commit_split(self, newcomer: str, kept: Zone, granted: Zone) -> str:
        """The newcomer committed: "committed" if the split stands (now, or an earlier commit
        whose answer was lost), with both zones in the zone map; "undone" if it was undone
        first. `Fenced` if our epoch moved (deposed: the newcomer asks where our zone is served
        now); `AuthorityUnreachable`: undecided."""
        if self.authority is None:
            return "committed"
        join, ours = self._key("join", newcomer), GRANTED + self.state.id
        if await self.authority.transact(
                [Same(self._key("epoch", self.state.id), str(self.state.incarnation)), Same(join, ours)],
                [Put(join, COMMITTED + self.state.id), Put(self._key("zone", self.state.id), _box(kept)),
                 Put(self._key("zone", newcomer), _box(granted))]):
            return "committed"
        if await self.split_committed(newcomer):
            return "committed"
        entry = await self.authority.get(join)
        if entry is not None and entry.value == ours:   # still ours to decide: our epoch moved
            current = await self.epoch_of(self.state.id)
            if current is not None and current > self.state.incarnation:
                self._deposed(current)
            raise Fenced(f"peer {self.state.id} cannot commit the split for {newcomer}: its zone's epoch is "
                         f"{current}, not {self.state.incarnation}")
        return "undone"

    async def undo_split(self, newcomer: str) -> str | None:
        """The newcomer never committed: "undone" if our transaction withdrew the split (no
        commit can win from then on) or it was withdrawn before; "committed" if its commit won
        first (the split stands). None without an authority (the splitter decides alone).
        `AuthorityUnreachable`: undecided."""
        if self.authority is None:
            return None
        join = self._key("join", newcomer)
        if await self.authority.transact([Same(join, GRANTED + self.state.id)], [Delete(join)]):
            return "undone"
        return "committed" if await self.split_committed(newcomer) else "undone"

    async def split_committed(self, newcomer: str) -> bool:
        """Whether the authority records `newcomer`'s split as committed (False if unknown or no
        authority): a commit asked again is answered from it when the splitter lost its record."""
        if self.authority is None:
            return False
        entry = await self.authority.get(self._key("join", newcomer))
        return entry is not None and entry.value.startswith(COMMITTED)

    async def founded(self, zone: Zone) -> None:
        """The first peer of a new overlay: the whole space is its zone in the zone map."""
        if self.authority is None:
            return
        await self.authority.transact([Same(self._key("epoch", self.state.id), str(self.state.incarnation))],
                                      [Put(self._key("zone", self.state.id), _box(zone))])


async def zone_map(authority: Authority, overlay: str) -> dict[str, Zone]:
    """The zone map as the authority holds it: each zone's id (its owner's, which a stand-in
    keeps) and box, as the last founding, split commit or leave that changed it decided."""
    found: dict[str, Zone] = {}
    for entry in await authority.scan(f"eventcloud/{overlay}/zone/"):
        try:
            found[entry.key.rsplit("/", 1)[1]] = zone_from_wire(json.loads(entry.value))
        except (ValueError, TypeError, KeyError, IndexError):
            log.warning("the authority's zone record %s is not one: %r", entry.key, entry.value[:200])
    return found


def _box(zone: Zone) -> str:
    """A zone as the zone map holds it (the wire form, as JSON)."""
    return json.dumps(zone_to_wire(zone), separators=(",", ":"))
