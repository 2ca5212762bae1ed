"""Load-balanced joins as pure decisions: which peer a newcomer splits, and where that zone is cut.

A join into a zone that holds data cuts it where the data is, not at the geometric midpoint
(random join points and midpoint splits leave 98–99% of 10,000 peers empty on real data,
docs/overlay.md). Two decisions, both made here without I/O:

* **Whom to split** (`climb`): the newcomer probes a few random points (each routed to its
  owner, which reports how many quads it holds) and keeps the busiest owner, then climbs:
  while a neighbour of the current candidate holds more than it, move there. Random points
  alone sample peers by zone *volume*, and the busiest zones are the smallest ones; the
  climb follows the load gradient to a local maximum from the best probe.
* **Where to cut** (`median_split`): at the median of the zone's quads along the dimension
  the zone was split along least often among those where the median cut leaves each half at
  least `min_share` of the quads (ties: the dimensions in turn, as the midpoint rule takes
  them). Only a dimension that cannot cut the data that evenly (its quads share one value
  there, or a few values hold most of them) lets another dimension be cut more often, so a
  zone becomes a slab only where its data leaves no other way; when no dimension reaches
  `min_share`, the most even cut that leaves both halves some quads is taken. A zone whose
  quads all sit on one point cannot be cut by data: None, and the caller falls back to the
  midpoint rule (`Zone.split`).

Invariants (tests/overlay/test_balance.py): the cut is strictly inside the zone and both
halves hold at least one of the given points whenever any two of them differ; among the
dimensions that reach `min_share` the chosen one has the fewest splits in the zone's history.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Mapping, Sequence, TypeVar

from eventcloud.errors import GeometryError
from eventcloud.overlay.coordinates import DIMENSIONS, Point
from eventcloud.overlay.zones import Zone

__all__ = ["SplitChoice", "median_split", "cut_for", "climb", "evenly", "should_move", "joiner_share", "gains_enough",
           "MIN_SHARE", "SAMPLE"]

K = TypeVar("K")

_NDIM = len(DIMENSIONS)

#: Each half of a preferred cut holds at least this share of the zone's quads.
MIN_SHARE = 0.25
#: At most this many of a zone's points decide its cut (an even sample of the rest is as good).
SAMPLE = 2048


@dataclass(frozen=True, slots=True)
class SplitChoice:
    """Cut along `dim` at `at`: [lo, at) stays with the owner, [at, hi) goes to the newcomer.
    `lower` and `upper` count the given points on each side."""

    dim: int
    at: int
    lower: int
    upper: int

    @property
    def share(self) -> float:
        """The smaller half's share of the points."""
        return min(self.lower, self.upper) / (self.lower + self.upper)


def evenly(items: Sequence[K], limit: int = SAMPLE) -> Sequence[K]:
    """At most `limit` of `items`, evenly spaced (deterministic, so a test can predict the cut)."""
    if len(items) <= limit:
        return items
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def median_split(zone: Zone, points: Sequence[Point], *, min_share: float = MIN_SHARE) -> SplitChoice | None:
    """Where to cut `zone` so that its points (the quads it holds, or a sample) split evenly.

    None when fewer than two distinct values exist along every dimension (no cut leaves both
    halves a point). Points outside the zone are ignored.
    """
    (g0, g1), (s0, s1), (p0, p1), (o0, o1) = zone.bounds
    inside = [p for p in points if g0 <= p[0] < g1 and s0 <= p[1] < s1 and p0 <= p[2] < p1 and o0 <= p[3] < o1]
    candidates = [c for dim in range(_NDIM) if (c := _median_cut(dim, inside)) is not None]
    if not candidates:
        return None
    counts = zone.splits_along()
    turn = len(zone.splits) % _NDIM
    preferred = [c for c in candidates if c.share >= min_share]
    if preferred:
        return min(preferred, key=lambda c: (counts[c.dim], (c.dim - turn) % _NDIM))
    return max(candidates, key=lambda c: (c.share, -counts[c.dim], -((c.dim - turn) % _NDIM)))


def cut_for(zone: Zone, points: Sequence[Point], *, min_share: float = MIN_SHARE) -> tuple[int, int]:
    """The (dimension, position) a join cuts `zone` at: `median_split` of its points, else the
    midpoint of the next dimension in turn that is at least 2 wide (GeometryError if none is)."""
    choice = median_split(zone, points, min_share=min_share) if points else None
    if choice is not None:
        return choice.dim, choice.at
    turn = len(zone.splits)
    for step in range(_NDIM):
        dim = (turn + step) % _NDIM
        lo, hi = zone.bounds[dim]
        if hi - lo >= 2:
            return dim, (lo + hi) // 2
    raise GeometryError(f"zone too small to split along any dimension: {zone.bounds}")


def _median_cut(dim: int, points: Sequence[Point]) -> SplitChoice | None:
    """The cut along `dim` nearest the median that leaves both sides a point, or None."""
    values = sorted(p[dim] for p in points)
    n = len(values)
    if n < 2 or values[0] == values[-1]:
        return None
    median = values[n // 2]
    options = []
    below = bisect_left(values, median)       # cut at the median value: it goes up
    if below > 0:
        options.append((median, below))
    through = bisect_right(values, median)    # cut just past it: it stays down
    if through < n:
        options.append((values[through], through))
    at, lower = min(options, key=lambda o: abs(2 * o[1] - n))
    return SplitChoice(dim, at, lower, n - lower)


def climb(current: K, load: int, neighbour_loads: Mapping[K, int]) -> K:
    """One step of the climb toward a busy peer: the busiest neighbour if it holds more than
    `current` (ties: the smallest key), else `current` itself (a local maximum)."""
    best, best_load = current, load
    for key in sorted(neighbour_loads):  # type: ignore[type-var]
        if neighbour_loads[key] > best_load:
            best, best_load = key, neighbour_loads[key]
    return best


def should_move(own: int, busiest: int, *, ratio: float, min_quads: int) -> bool:
    """The rebalancer's rule (peers/membership/rebalancer.py): a peer holding `own` quads hands its zone to
    its sibling and rejoins at the busiest peer it found, which holds `busiest`, when that one
    holds at least `min_quads` (smaller loads are not worth moving data for) and at least
    `ratio` times its own (an empty peer counts as holding one). With `ratio` ≥ 2 a move never
    undoes another: the busiest is split at its median, so both halves hold about `busiest`/2,
    still ≥ `own`, and the mover's sibling gains only `own` ≤ `busiest`/`ratio`."""
    if ratio < 2:
        raise ValueError(f"rebalance ratio {ratio} must be at least 2 (a move could undo another)")
    return busiest >= min_quads and busiest >= ratio * max(own, 1)


def joiner_share(zone: Zone, points: Sequence[Point]) -> float:
    """The share of `points` (those inside `zone`: its quads, or a sample) that a peer joining
    there takes: the newcomer's side of `cut_for`'s cut. 0 when nothing can be cut."""
    (g0, g1), (s0, s1), (p0, p1), (o0, o1) = zone.bounds
    inside = [p for p in points if g0 <= p[0] < g1 and s0 <= p[1] < s1 and p0 <= p[2] < p1 and o0 <= p[3] < o1]
    if not inside:
        return 0.0
    try:
        dim, at = cut_for(zone, inside)
    except GeometryError:
        return 0.0
    return sum(1 for p in inside if p[dim] >= at) / len(inside)


def gains_enough(own: int, busiest: int, takes: int) -> bool:
    """The second half of the rebalancer's rule: a peer holding `own` quads moves to the busiest
    zone (`busiest` quads, of which a join there would hand it `takes`) only if both sides of
    that cut hold at least twice its own (an empty peer: 2). `should_move` assumes the cut
    halves the busiest zone; on a line population (most quads on one point, the rest spread)
    the best cut is lopsided: handing the mover no more than it held, the next look moved it
    again, and again; handing it the point, the peer left behind would move back for it
    (docs/overlay.md, "The rebalancer"). With this rule every move at least doubles the mover's
    load and leaves the busiest at least twice the mover's old load."""
    return min(takes, busiest - takes) >= 2 * max(own, 1)
