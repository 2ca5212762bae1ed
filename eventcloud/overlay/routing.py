"""Greedy CAN routing and box multicast, as pure decisions.

The peer runtime asks these functions *what* to do (which neighbour gets a message, which
neighbours a multicast continues to) and does the sending itself.
"""

from __future__ import annotations

from typing import Collection, Mapping, Sequence, TypeVar

from eventcloud.errors import GeometryError
from eventcloud.overlay.coordinates import DIMENSIONS, Box, Point
from eventcloud.overlay.zones import Zone

__all__ = ["next_hop", "multicast_root", "multicast_children", "neighbours_of", "covering", "lowest_corner",
           "intersection", "tiles", "partition_check", "hull", "subtree_reach"]

K = TypeVar("K")

_NDIM = len(DIMENSIONS)


def next_hop(
    zone: Zone, neighbours: Mapping[K, Zone], point: Point, exclude: Collection[K] = ()
) -> K | None:
    """Greedy CAN routing: None if `zone` owns `point`, else the neighbour closest to it.

    Ties go to the smallest key. In a partition the best neighbour is always strictly
    closer than `zone` (the owner of the cell just past the face toward the point is a
    neighbour), so routes are loop-free and at most distance-long.
    """
    if zone.contains(point):
        return None
    best: tuple[int, K] | None = None
    for key, other in neighbours.items():
        if key in exclude:
            continue
        candidate = (other.distance(point), key)
        if best is None or candidate < best:  # type: ignore[operator]
            best = candidate
    if best is None:
        raise GeometryError(f"no route toward the point: all {len(neighbours)} neighbour(s) excluded")
    return best[1]


def multicast_root(box: Box) -> Point:
    """The box's lowest corner: a multicast is first routed to its owner."""
    if len(box) != _NDIM or any(lo >= hi for lo, hi in box):
        raise GeometryError(f"a multicast box needs {_NDIM} non-empty intervals, got {box!r}")
    return tuple(lo for lo, _ in box)  # type: ignore[return-value]


def multicast_children(zone: Zone, neighbours: Mapping[K, Zone], box: Box) -> list[K]:
    """The neighbours a peer owning `zone` forwards a multicast over `box` to (sorted keys).

    Each zone W meeting the box has one parent: with c the lower corner of W ∩ box and i
    the first dimension where c_i > box.lo_i, the parent is the owner of c - e_i, i.e. the
    zone whose upper face in i is W's lower face and which contains c in the other
    dimensions. (No such i: W owns the box's lowest corner and is the root.) Lower corners
    strictly decrease toward the root, so parents form a tree spanning exactly the zones
    meeting the box: started at the root, every such peer is reached exactly once.
    """
    children = []
    for key, other in neighbours.items():
        corner = _lower_corner(other, box)
        if corner is None:
            continue
        i = next((d for d in range(_NDIM) if corner[d] > box[d][0]), None)
        if i is None or zone.bounds[i][1] != corner[i]:
            continue
        if all(zone.bounds[j][0] <= corner[j] < zone.bounds[j][1] for j in range(_NDIM) if j != i):
            children.append(key)
    return sorted(children)  # type: ignore[type-var]


def hull(boxes: Sequence[Box]) -> Box:
    """The smallest box holding every one of `boxes` (a multicast of many items runs over it)."""
    if not boxes:
        raise GeometryError("the hull of no box")
    return tuple((min(b[d][0] for b in boxes), max(b[d][1] for b in boxes))
                 for d in range(_NDIM))  # type: ignore[return-value]


def subtree_reach(child: Zone, box: Box) -> Box:
    """What of `box` the multicast subtree rooted at `child` can reach: [c, box.hi) with c
    the lower corner of child ∩ box.

    A zone's parent contains c - e_i, so the parent's own corner is ≤ c in every dimension:
    corners never decrease from the root down, and every zone under `child` has its corner,
    hence its part of the box, at or above c. A multicast of many items sends a child only
    the items whose box meets this (sound: nothing a subtree needs is left out).
    """
    return tuple((max(z[0], b[0]), b[1]) for z, b in zip(child.bounds, box))  # type: ignore[return-value]


def neighbours_of(zone: Zone, candidates: Mapping[K, Zone]) -> dict[K, Zone]:
    """The candidates whose zone shares a face with `zone`."""
    return {key: other for key, other in candidates.items() if zone.is_neighbour(other)}


def covering(zones: Mapping[K, Zone], box: Box) -> list[K]:
    """Sorted keys of the zones meeting `box` (who a multicast over it must reach)."""
    return sorted(key for key, zone in zones.items() if zone.intersects(box))  # type: ignore[type-var]


def _lower_corner(zone: Zone, box: Box) -> Point | None:
    corner = []
    for (lo, hi), (blo, bhi) in zip(zone.bounds, box):
        start = max(lo, blo)
        if start >= min(hi, bhi):
            return None
        corner.append(start)
    return tuple(corner)  # type: ignore[return-value]


def lowest_corner(zone: Zone, box: Box) -> Point:
    """The lowest corner of zone ∩ box: a point the zone owns (where a multicast child is sent)."""
    return tuple(max(z[0], b[0]) for z, b in zip(zone.bounds, box))  # type: ignore[return-value]


def intersection(zone: Zone, box: Box) -> Box | None:
    """zone ∩ box, or None if they share no point."""
    bounds = tuple((max(lo, blo), min(hi, bhi)) for (lo, hi), (blo, bhi) in zip(zone.bounds, box))
    return None if any(lo >= hi for lo, hi in bounds) else bounds  # type: ignore[return-value]


def tiles(box: Box, pieces: Sequence[Box]) -> bool:
    """Whether `pieces` (what each peer a multicast reached covered of `box`) fill the box
    exactly: inside it, pairwise disjoint, volumes adding up to its volume.

    Each peer reports zone ∩ box as it was when it answered. A multicast that crossed a
    membership change (a split, a takeover) can miss a zone or reach one twice; in a stable
    overlay the pieces are the zones meeting the box and always tile it.
    """
    return sum(_volume(piece) for piece in pieces) == _volume(box) and disjoint(box, pieces)


def disjoint(box: Box, pieces: Sequence[Box]) -> bool:
    """Whether `pieces` lie inside `box` and no two overlap: what a multicast that could not
    reach some peers (a partial one, such as status) still guarantees of those that answered,
    so that nothing is counted twice."""
    for piece in pieces:
        if any(not (blo <= lo < hi <= bhi) for (lo, hi), (blo, bhi) in zip(piece, box)):
            return False
    ordered = sorted(pieces)
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            if b[0][0] >= a[0][1]:
                break  # sorted by the lower graph bound: no later piece can meet `a`
            if all(max(alo, blo) < min(ahi, bhi) for (alo, ahi), (blo, bhi) in zip(a, b)):
                return False
    return True


def partition_check(box: Box, pieces: Sequence[Box]) -> tuple[bool, int]:
    """Whether `pieces` partition `box` exactly (they tile it), and how many pairs of them
    overlap: what `status` reports of the peers' zones over the whole space (the CLI's line,
    the gateway's `partition` flag), so that a broken partition says how broken it is."""
    overlaps = sum(1 for i, a in enumerate(pieces) for b in pieces[i + 1:]
                   if all(max(alo, blo) < min(ahi, bhi) for (alo, ahi), (blo, bhi) in zip(a, b)))
    return overlaps == 0 and tiles(box, pieces), overlaps


def _volume(box: Box) -> int:
    volume = 1
    for lo, hi in box:
        volume *= hi - lo
    return volume
