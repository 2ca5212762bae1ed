"""Membership as pure plans: what a split, a merge or an announcement does to zones and tables.

The membership service (peers/membership/membership.py) does the talking; these functions decide. Each
takes the current zone and neighbour table of one peer and returns the new ones (and whom to
tell), so every rule of CAN membership is tested here without a network:

* `split_for_join`: the owner cuts its zone in two (at the median of its data when it holds
  some, `overlay.balance.median_split`; else at the midpoint), keeps the lower part and grants
  the upper one (an annex may take the lower one); both tables are cut from the owner's table, each keeping the zones that abut
  its part.
* `merge_for_leave`: a neighbour whose zone merges with the leaving zone into a box takes it;
  its new table is the union of both tables, cut to what abuts the merged zone.
* `heirs`: the neighbours a leaving peer may hand its zone to, the sibling of its last split first.
* `room_faces`: where a peer that cannot leave may ask neighbours to step aside, so that it can.
* `announced`: a table updated from announced zones (and departed peers).
* `verified`: a table updated from zones each peer reported for itself (stabilisation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from eventcloud.overlay.coordinates import Box
from eventcloud.overlay.routing import neighbours_of
from eventcloud.overlay.zones import Zone

__all__ = ["Neighbour", "SplitPlan", "MergePlan", "RoomFace", "split_for_join", "merge_for_leave", "heirs",
           "room_faces", "is_guillotine", "announced", "verified"]

Table = dict[str, "Neighbour"]


@dataclass(frozen=True, slots=True)
class Neighbour:
    """Another peer as a neighbour table holds it: where to reach it and the zone it owns.

    `incarnation` counts takeovers of that peer's zone: a replica that takes a crashed peer's
    zone over serves it under the same id with the next incarnation, and a record with a lower
    incarnation than the one a table holds is stale (it never replaces the newer one)."""

    address: str
    zone: Zone
    incarnation: int = 0


@dataclass(frozen=True)
class SplitPlan:
    kept: Zone                  # what the owner keeps (the lower part, but for an annex: overlay/annexes.py)
    granted: Zone               # what the newcomer gets
    owner_table: Table          # the owner's table afterwards (the newcomer included)
    newcomer_table: Table       # the newcomer's table (the owner, with the part it keeps, included)
    announce_to: tuple[str, ...]  # addresses of the owner's old neighbours, told once the join commits


@dataclass(frozen=True)
class MergePlan:
    merged: Zone
    table: Table
    announce_to: tuple[str, ...]


def split_for_join(owner_id: str, owner_address: str, zone: Zone, table: Mapping[str, Neighbour],
                   newcomer_id: str, newcomer_address: str, owner_incarnation: int = 0,
                   cut: tuple[int, int] | None = None, newcomer_lower: bool = False) -> SplitPlan:
    """Split `zone` for a newcomer: along dimension `cut[0]` at `cut[1]`, or at the midpoint of
    the next dimension in turn when `cut` is None (GeometryError if it cannot be split). The
    newcomer gets the upper part, or the lower one with `newcomer_lower` (an annex taking the
    empty side of a crowded zone, which may be either)."""
    lower, upper = zone.split() if cut is None else zone.split_at(*cut)
    kept, granted = (upper, lower) if newcomer_lower else (lower, upper)
    zones = {k: n.zone for k, n in table.items()}
    owner_table: Table = {k: table[k] for k in neighbours_of(kept, zones)}
    owner_table[newcomer_id] = Neighbour(newcomer_address, granted)
    candidates = dict(zones)
    candidates[owner_id] = kept
    newcomer_table: Table = {}
    for k in neighbours_of(granted, candidates):
        newcomer_table[k] = Neighbour(owner_address, kept, owner_incarnation) if k == owner_id else table[k]
    return SplitPlan(kept, granted, owner_table, newcomer_table, tuple(n.address for n in table.values()))


def heirs(zone: Zone, table: Mapping[str, Neighbour], within: Box | None = None, *,
          tree_only: bool = False) -> list[str]:
    """Neighbours whose zone merges with `zone` into a box: the sibling of the last split first.
    With `within`, only those whose zone lies inside that box. With `tree_only`, a zone that
    knows its place in the split tree merges with its sibling only (the rebalancer's moves: a
    union of cousins can leave zones no plane cuts in two, where some peer can never leave);
    zones that do not know it merge with any neighbour that makes a box, as without `tree_only`."""
    inside = Zone(within) if within is not None else None
    able = [(k, n) for k, n in table.items()
            if n.zone.merge(zone) is not None and (inside is None or inside.covers(n.zone))
            and not (tree_only and zone.placed and n.zone.placed and not zone.sibling_of(n.zone))]
    able.sort(key=lambda kn: (not zone.sibling_of(kn[1].zone), kn[1].zone.splits != zone.splits, kn[0]))
    return [k for k, _ in able]


@dataclass(frozen=True, slots=True)
class RoomFace:
    """One face of a zone that its neighbours across it tile within the zone's own extent."""

    dim: int
    tube: Box                   # the zone's extent along the other axes, from that face to the edge of the space
    neighbours: tuple[str, ...]  # the neighbours across the face


def room_faces(zone: Zone, table: Mapping[str, Neighbour], whole: Box) -> list[RoomFace]:
    """Where a peer that cannot leave gracefully can make room to (the rebalancer, docs/overlay.md).

    A zone whose sibling was split further has no neighbour to merge with. On the face it shares
    with that sibling subtree, every neighbour across lies within the zone's extent along the other
    three axes (they tile the face). Each such face is returned with its *tube*: the zone's extent
    along those axes, from the face to the edge of the space. When a neighbour across the face hands
    its zone to a neighbour of its own inside the tube, the tube holds one zone fewer; once a single
    zone is left across the face it spans the whole face and merges with `zone`. Faces with the
    fewest neighbours first (the fewest merges to go); faces on the edge of the space have none.
    A zone that knows its place in the split tree has one such face: the one its sibling subtree
    lies across (the other side of its last split), and that face is always tiled.
    """
    faces = []
    for dim in range(len(zone.bounds)):
        lo, hi = zone.bounds[dim]
        for upper, beyond in ((True, (hi, whole[dim][1])), (False, (whole[dim][0], lo))):
            if zone.splits and zone.placed and (dim != zone.splits[-1] or upper != (zone.sides[-1] == 0)):
                continue
            # the neighbours across this face start where the zone ends (upper) or end where it starts
            across = sorted(k for k, n in table.items() if zone.is_neighbour(n.zone) and
                            n.zone.bounds[dim][0 if upper else 1] == (hi if upper else lo))
            if not across:  # also the edge of the space: nothing beyond
                continue
            tube = tuple(beyond if d == dim else zone.bounds[d] for d in range(len(zone.bounds)))
            if all(Zone(tube).covers(table[k].zone) for k in across):  # type: ignore[arg-type]
                faces.append(RoomFace(dim, tube, tuple(across)))  # type: ignore[arg-type]
    faces.sort(key=lambda f: (len(f.neighbours), f.dim))
    return faces


def is_guillotine(zones: list[Zone]) -> bool:
    """True if one plane cuts the zones in two sets, and so on recursively: the zones a split
    tree can make. Merging only siblings keeps it so; merging cousins may not (a pinwheel)."""
    if len(zones) <= 1:
        return True
    for dim in range(len(zones[0].bounds)):
        for at in sorted({z.bounds[dim][0] for z in zones})[1:]:
            low = [z for z in zones if z.bounds[dim][1] <= at]
            high = [z for z in zones if z.bounds[dim][0] >= at]
            if len(low) + len(high) == len(zones):
                return is_guillotine(low) and is_guillotine(high)
    return False


def merge_for_leave(own_id: str, zone: Zone, table: Mapping[str, Neighbour], leaving_id: str,
                    leaving_zone: Zone, leaving_table: Mapping[str, Neighbour]) -> MergePlan | None:
    """Take over a leaving neighbour's zone; None if the two zones do not merge into a box."""
    merged = zone.merge(leaving_zone)
    if merged is None:
        return None
    pool = {**table, **leaving_table}
    pool.pop(leaving_id, None)
    pool.pop(own_id, None)
    kept = {k: n for k, n in pool.items() if merged.is_neighbour(n.zone)}
    return MergePlan(merged, kept, tuple(n.address for n in pool.values()))


def announced(own_id: str, zone: Zone, table: Mapping[str, Neighbour], records: Iterable[tuple[str, Neighbour]],
              removed: Iterable[str] = ()) -> Table:
    """`table` after an announcement: departed peers dropped, announced zones kept iff they abut ours."""
    result = dict(table)
    for ident in removed:
        result.pop(ident, None)
    _take(zone, result, ((ident, neighbour) for ident, neighbour in records if ident != own_id))
    return result


def verified(zone: Zone, table: Mapping[str, Neighbour], authoritative: Mapping[str, Neighbour]) -> Table:
    """`table` after stabilisation: each peer's own report of its zone replaces what we held."""
    result = dict(table)
    _take(zone, result, authoritative.items())
    return result


def _take(zone: Zone, result: dict[str, Neighbour], records: Iterable[tuple[str, Neighbour]]) -> None:
    """Each record into `result`, kept iff its zone abuts `zone` (dropped otherwise), unless it
    is of an older incarnation than the one held."""
    for ident, neighbour in records:
        if _stale(result.get(ident), neighbour):
            continue
        if zone.is_neighbour(neighbour.zone):
            result[ident] = neighbour
        else:
            result.pop(ident, None)


def _stale(held: "Neighbour | None", offered: "Neighbour") -> bool:
    """A record of an older incarnation than the one held: a peer that was taken over."""
    return held is not None and offered.incarnation < held.incarnation
