"""CAN geometry as pure code: zones, splits and merges, greedy routing and box multicast.

Nothing here does I/O, reads a clock or keeps state: the peer runtime asks these functions
*what* to do (which neighbour gets a message, which neighbours a multicast continues to)
and does the sending itself. The space has no wrap-around (coordinates are lexicographic,
not hashed), so neighbours abut inside the space only.

The term -> coordinate mapping lives in `eventcloud.overlay.coordinates`; its names are
re-exported here so callers need one import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Collection, Mapping, TypeVar

from eventcloud.overlay.coordinates import (
    DIMENSIONS,
    Box,
    CoordinateSpace,
    GeometryError,
    Interval,
    Point,
    local_name,
)

__all__ = [
    "DIMENSIONS",
    "Point",
    "Interval",
    "Box",
    "CoordinateSpace",
    "GeometryError",
    "local_name",
    "Zone",
    "next_hop",
    "multicast_root",
    "multicast_children",
    "neighbours_of",
    "covering",
]

K = TypeVar("K")

_NDIM = len(DIMENSIONS)
_HEX = re.compile(r"[0-9a-fA-F]{1,2048}")
_MAX_SPLITS = 65536


@dataclass(frozen=True)
class Zone:
    """The box a peer owns, and the split history that decides its next split dimension."""

    bounds: Box
    #: The dimension of each split that produced this zone, oldest first.
    splits: tuple[int, ...] = ()

    def contains(self, point: Point) -> bool:
        return all(lo <= p < hi for (lo, hi), p in zip(self.bounds, point))

    def intersects(self, box: Box) -> bool:
        """True if the zone and the box share at least one point (an empty box meets nothing)."""
        return all(max(lo, blo) < min(hi, bhi) for (lo, hi), (blo, bhi) in zip(self.bounds, box))

    def split(self) -> tuple["Zone", "Zone"]:
        """Halve along dimension len(splits) % 4 at the integer midpoint: (lower, upper).

        Dimensions are taken in turn, as in the original system, so zones stay roughly cubic.
        """
        dim = len(self.splits) % _NDIM
        lo, hi = self.bounds[dim]
        if hi - lo < 2:
            raise GeometryError(f"zone too small to split along {DIMENSIONS[dim]}: [{lo}, {hi})")
        mid = (lo + hi) // 2
        splits = self.splits + (dim,)
        lower = _replace(self.bounds, dim, (lo, mid))
        upper = _replace(self.bounds, dim, (mid, hi))
        return Zone(lower, splits), Zone(upper, splits)

    def is_neighbour(self, other: "Zone") -> bool:
        """Abut in exactly one dimension and overlap in the other three (a shared 3-D face)."""
        abutting = 0
        for (lo, hi), (olo, ohi) in zip(self.bounds, other.bounds):
            if hi == olo or ohi == lo:
                abutting += 1
            elif not (lo < ohi and olo < hi):
                return False
        return abutting == 1

    def merge(self, other: "Zone") -> "Zone | None":
        """The union of two zones if it is a box (equal in 3 dims, abutting in the 4th), else None.

        Split history of the result: if the two are siblings of their last split (same
        `splits`, abutting along splits[-1]) the split is undone: splits[:-1]. Otherwise the
        result keeps the shorter of the two histories (the one closer to the root, as the
        union is larger than either part); on equal length, the lower zone's. Only
        len(splits) matters afterwards (it picks the next split dimension), and any choice
        keeps the zones a partition.
        """
        differing = [d for d in range(_NDIM) if self.bounds[d] != other.bounds[d]]
        if len(differing) != 1:
            return None
        dim = differing[0]
        (lo, hi), (olo, ohi) = self.bounds[dim], other.bounds[dim]
        if hi == olo:
            lower, union = self, (lo, ohi)
        elif ohi == lo:
            lower, union = other, (olo, hi)
        else:
            return None
        upper = other if lower is self else self
        if self.splits == other.splits and self.splits and self.splits[-1] == dim:
            splits = self.splits[:-1]
        elif len(upper.splits) < len(lower.splits):
            splits = upper.splits
        else:
            splits = lower.splits
        return Zone(_replace(self.bounds, dim, union), splits)

    def distance(self, point: Point) -> int:
        """L1 gap between the zone and a point: 0 iff the zone contains it."""
        total = 0
        for (lo, hi), p in zip(self.bounds, point):
            if p < lo:
                total += lo - p
            elif p >= hi:
                total += p - hi + 1
        return total

    def to_wire(self) -> list[Any]:
        """msgpack-able form: [[[lo_hex, hi_hex] * 4], [split dims]] (bounds exceed 64 bits)."""
        return [[[format(lo, "x"), format(hi, "x")] for lo, hi in self.bounds], list(self.splits)]

    @classmethod
    def from_wire(cls, data: Any) -> "Zone":
        """Inverse of `to_wire`; any malformed input raises GeometryError."""
        if not isinstance(data, (list, tuple)) or len(data) != 2:
            raise GeometryError(f"a zone on the wire is [bounds, splits], got {_show(data)}")
        raw_bounds, raw_splits = data
        if not isinstance(raw_bounds, (list, tuple)) or len(raw_bounds) != _NDIM:
            raise GeometryError(f"zone bounds must be {_NDIM} [lo, hi] pairs, got {_show(raw_bounds)}")
        bounds = []
        for dim, pair in enumerate(raw_bounds):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise GeometryError(f"zone bound {DIMENSIONS[dim]} must be [lo, hi], got {_show(pair)}")
            lo, hi = (_from_hex(x, DIMENSIONS[dim]) for x in pair)
            if not lo < hi:
                raise GeometryError(f"empty zone interval along {DIMENSIONS[dim]}: [{lo:#x}, {hi:#x})")
            bounds.append((lo, hi))
        if not isinstance(raw_splits, (list, tuple)) or len(raw_splits) > _MAX_SPLITS:
            raise GeometryError(f"zone splits must be a list of dimensions, got {_show(raw_splits)}")
        for d in raw_splits:
            if not isinstance(d, int) or isinstance(d, bool) or not 0 <= d < _NDIM:
                raise GeometryError(f"a split dimension must be an integer in 0..{_NDIM - 1}, got {d!r}")
        return cls(tuple(bounds), tuple(raw_splits))  # type: ignore[arg-type]


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


def _replace(bounds: Box, dim: int, interval: Interval) -> Box:
    return bounds[:dim] + (interval,) + bounds[dim + 1 :]  # type: ignore[return-value]


def _from_hex(value: Any, dimension: str) -> int:
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise GeometryError(f"zone bound along {dimension} must be a hex string, got {_show(value)}")
    return int(value, 16)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
