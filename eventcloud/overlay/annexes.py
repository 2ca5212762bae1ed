"""Annex zones as pure rules: where a crowded zone is cut, and which host takes the empty side.

With one zone per peer, every zone holding data and the zones a guillotine partition, real
data leaves some zones with hundreds of neighbours (CityBench at 10,000 peers: 161–463; issue
11 asks for at most 64). A *host* (one daemon process, which can run several peer runtimes)
may own empty "annex" zones besides its data zone (docs/overlay.md, "Annex zones"):

* `crowd_cut`: a zone with more neighbours than the limit is cut where the side it keeps
  sheds the most neighbours, on a side that holds none of its data (so no data moves); that
  side, the annex, becomes a zone of its own.
* `choose_host`: the annex goes to the host for which it adds the fewest neighbours, among the
  hosts that stay within the cap with it (`HEADROOM` below it, for the cuts to come); none
  such, the zone is not cut.

The membership service (peers/membership/annexes.py) and the design study (experiments/annex_study.py)
both decide with these.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping, Sequence

from eventcloud.overlay.zones import Zone

__all__ = ["AnnexCut", "HostOffer", "HEADROOM", "crowd_cut", "choose_host", "host_neighbours_after", "cut_between", "data_ranges"]

#: A host takes an annex only if it then has at most `cap - HEADROOM` neighbours.
HEADROOM = 4


@dataclass(frozen=True, slots=True)
class AnnexCut:
    """Cut the zone along `dim` at `at`; the side given away is the upper one iff `annex_upper`."""

    dim: int
    at: int
    annex_upper: bool
    kept: int           # neighbours the zone keeps (the annex among them)
    score: tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class HostOffer:
    """What taking an annex costs one host: its distinct neighbours now and with the annex."""

    host: Hashable       # the host's id
    address: str        # where to ask it to adopt the annex
    now: int
    after: int
    zones: int          # zones it owns already


def data_ranges(points: Iterable[Sequence[int]]) -> tuple[tuple[int, int], ...] | None:
    """Per dimension, the lowest and highest coordinate of a zone's quads (None: it holds none)."""
    lows: list[int] | None = None
    highs: list[int] = []
    for point in points:
        if lows is None:
            lows, highs = list(point), list(point)
            continue
        for d, value in enumerate(point):
            if value < lows[d]:
                lows[d] = value
            elif value > highs[d]:
                highs[d] = value
    return None if lows is None else tuple(zip(lows, highs))


def crowd_cut(zone: Zone, neighbours: Mapping[object, Zone], data: Sequence[tuple[int, int]] | None, *,
              through_data: bool = False) -> AnnexCut | None:
    """The cut of `zone` that leaves it the fewest neighbours, with the annex side empty of data.

    `data` is `data_ranges` of the zone's quads. Only cuts at a neighbour's edge are tried (a cut
    elsewhere sheds nothing more), plus the edges of the data. A zone holding no data gives its
    upper side away; with `through_data` (the study's fallback) any cut is allowed. None when no
    cut lowers the zone's count of neighbours."""
    degree = len(neighbours)
    data_sided = data is not None and not through_data
    best: AnnexCut | None = None
    for d in range(len(zone.bounds)):
        lo, hi = zone.bounds[d]
        if hi - lo < 2:
            continue
        on_lower_face = on_upper_face = 0
        starts: list[int] = []
        ends: list[int] = []
        for other in neighbours.values():
            a, b = other.bounds[d]
            if b == lo:
                on_lower_face += 1
            elif a == hi:
                on_upper_face += 1
            else:
                starts.append(a)
                ends.append(b)
        starts.sort()
        ends.sort()
        edges = {v for v in starts if lo < v < hi} | {v for v in ends if lo < v < hi}
        allowed: list[tuple[int, bool | None]]
        if data_sided:
            assert data is not None
            low, high = data[d]
            allowed = [(v, v > high) for v in edges if v <= low or v > high]
            if lo < low:
                allowed.append((low, False))
            if high + 1 < hi:
                allowed.append((high + 1, True))
        else:
            allowed = [(v, None) for v in edges]
        crossing = len(starts)
        for at, annex_upper in allowed:
            below = bisect_left(starts, at)            # neighbours reaching below `at`: touch the lower part
            above = crossing - bisect_right(ends, at)  # neighbours reaching above it: touch the upper part
            lower_degree = on_lower_face + below + 1
            upper_degree = on_upper_face + above + 1
            spanning = below + above - crossing        # neighbours touching both parts
            larger = max(lower_degree, upper_degree)
            kept = upper_degree if annex_upper is False else lower_degree
            # both sides empty: the cut that leaves each side fewest neighbours (the upper one goes)
            worst = larger if annex_upper is None else kept
            if worst >= degree:                        # nothing gained by the zone that stays
                continue
            score = (worst, spanning, larger)
            if best is None or score < best.score:
                best = AnnexCut(d, at, annex_upper is not False, kept, score)
    return best


def host_neighbours_after(current: set, own: set, annex_neighbours: Iterable, annex: object) -> int:
    """A host's distinct neighbours once it owns the annex too: those of its zones (`current`)
    and the annex's, but for its own zones and the annex itself."""
    return len(current.union(annex_neighbours) - own - {annex})


def choose_host(offers: Iterable[HostOffer], cap: int, headroom: int = HEADROOM) -> HostOffer | None:
    """The host an annex adds the fewest neighbours to (then the fewest after, then the fewest
    zones), among those that stay within `cap - headroom` with it; None if there is none."""
    best: HostOffer | None = None
    for offer in offers:
        if offer.after > cap - headroom:
            continue
        key = (offer.after - offer.now, offer.after, offer.zones)
        if best is None or key < (best.after - best.now, best.after, best.zones):
            best = offer
    return best


def cut_between(zone: Zone, part: Zone) -> tuple[int, int, bool] | None:
    """How `zone` splits so that `part` is one side: (dim, at, part is the lower side), or None
    if `part` is not one side of a single cut of `zone`."""
    differing = [d for d in range(len(zone.bounds)) if zone.bounds[d] != part.bounds[d]]
    if len(differing) != 1:
        return None
    d = differing[0]
    (lo, hi), (a, b) = zone.bounds[d], part.bounds[d]
    if a == lo and lo < b < hi:
        return d, b, True
    if b == hi and lo < a < hi:
        return d, a, False
    return None
