"""Zones: the box a peer owns, how it splits in two and how two zones merge back.

The space has no wrap-around (coordinates are lexicographic, not hashed), so neighbours abut
inside the space only. Pure code: no I/O, no clock, no state beyond the values themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventcloud.errors import GeometryError
from eventcloud.overlay.coordinates import DIMENSIONS, Box, Interval, Point

__all__ = ["Zone"]

_NDIM = len(DIMENSIONS)


@dataclass(frozen=True)
class Zone:
    """The box a peer owns, and the split history that decides its next split dimension and
    places the zone in the split tree."""

    bounds: Box
    #: The dimension of each split that produced this zone, oldest first.
    splits: tuple[int, ...] = ()
    #: The side of each of those splits this zone lies on (0 lower, 1 upper), oldest first: the
    #: zone's path in the split tree, which names its sibling. Empty with `splits` not, the zone
    #: came from a peer that did not record it (or from a merge of cousins): its place is unknown.
    sides: tuple[int, ...] = ()

    @property
    def placed(self) -> bool:
        """True if the zone knows its path in the split tree (the whole space does)."""
        return len(self.sides) == len(self.splits)

    def sibling_of(self, other: "Zone") -> bool:
        """The other half of this zone's last split: both placed, the same path but for its last
        side, and the two make a box. Merging only siblings keeps the zones a split tree (a
        guillotine partition), where every zone has either a sibling or a face its sibling
        subtree tiles (docs/overlay.md, "Why some empty peers stay")."""
        return self.splits == other.splits and self._paths_differ_last(other) and self.merge(other) is not None

    def _paths_differ_last(self, other: "Zone") -> bool:
        """Both placed, and their paths are the same but for the last side."""
        return (self.placed and other.placed and bool(self.sides) and self.sides[:-1] == other.sides[:-1]
                and self.sides[-1] != other.sides[-1])

    def contains(self, point: Point) -> bool:
        # unrolled for the four dimensions: asked for every quad at every hop
        (l0, h0), (l1, h1), (l2, h2), (l3, h3) = self.bounds
        p0, p1, p2, p3 = point
        return l0 <= p0 < h0 and l1 <= p1 < h1 and l2 <= p2 < h2 and l3 <= p3 < h3

    def covers(self, other: "Zone") -> bool:
        """True if every point of `other` is in this zone (a zone covers itself)."""
        return all(lo <= olo and ohi <= hi for (lo, hi), (olo, ohi) in zip(self.bounds, other.bounds))

    def intersects(self, box: Box) -> bool:
        """True if the zone and the box share at least one point (an empty box meets nothing)."""
        return all(max(lo, blo) < min(hi, bhi) for (lo, hi), (blo, bhi) in zip(self.bounds, box))

    def split(self) -> tuple["Zone", "Zone"]:
        """Halve along dimension len(splits) % 4 at the integer midpoint: (lower, upper).

        Dimensions are taken in turn, as in the original system, so zones stay roughly cubic.
        This is the rule of a join into a zone that holds no data; a zone with data is split
        where its data is (`overlay.balance.median_split`, then `split_at`).
        """
        dim = len(self.splits) % _NDIM
        lo, hi = self.bounds[dim]
        if hi - lo < 2:
            raise GeometryError(f"zone too small to split along {DIMENSIONS[dim]}: [{lo}, {hi})")
        return self.split_at(dim, (lo + hi) // 2)

    def split_at(self, dim: int, at: int) -> tuple["Zone", "Zone"]:
        """Cut along `dim` at `at`: (lower [lo, at), upper [at, hi)); both halves non-empty."""
        if not 0 <= dim < _NDIM:
            raise GeometryError(f"no dimension {dim!r}: expected 0..{_NDIM - 1}")
        lo, hi = self.bounds[dim]
        if not lo < at < hi:
            raise GeometryError(f"cannot split [{lo}, {hi}) along {DIMENSIONS[dim]} at {at}: "
                                "the cut must leave both halves non-empty")
        splits = self.splits + (dim,)
        lower = _replace(self.bounds, dim, (lo, at))
        upper = _replace(self.bounds, dim, (at, hi))
        if not self.placed:
            return Zone(lower, splits), Zone(upper, splits)
        return Zone(lower, splits, self.sides + (0,)), Zone(upper, splits, self.sides + (1,))

    def splits_along(self) -> tuple[int, ...]:
        """How many times this zone's history split it along each dimension."""
        counts = [0] * _NDIM
        for dim in self.splits:
            counts[dim] += 1
        return tuple(counts)

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
        `splits`, abutting along splits[-1], and the same path but for its last side when both
        know it) the split is undone: splits[:-1], sides[:-1]. Otherwise the result keeps the
        shorter of the two histories (the one closer to the root, as the union is larger than
        either part); on equal length, the lower zone's; and no path: a union of cousins has no
        place in the split tree. Any choice keeps the zones a partition.
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
        bounds = _replace(self.bounds, dim, union)
        if self.splits == other.splits and self.splits and self.splits[-1] == dim:
            # siblings undo their split; cousins with the same split dimensions lose their path
            return Zone(bounds, self.splits[:-1], self.sides[:-1] if self._paths_differ_last(other) else ())
        return Zone(bounds, upper.splits if len(upper.splits) < len(lower.splits) else lower.splits)

    def distance(self, point: Point) -> int:
        """L1 gap between the zone and a point: 0 iff the zone contains it."""
        total = 0
        for (lo, hi), p in zip(self.bounds, point):
            if p < lo:
                total += lo - p
            elif p >= hi:
                total += p - hi + 1
        return total


def _replace(bounds: Box, dim: int, interval: Interval) -> Box:
    return bounds[:dim] + (interval,) + bounds[dim + 1 :]  # type: ignore[return-value]

