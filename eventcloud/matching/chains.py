"""Which CSMA chains a peer starts from one quad, and which subscriptions ride along.

At CSMA's first step a peer holds, for one quad, the subscriptions whose first pattern it
matches. Running one chain each repeats work when they overlap (identical and contained
subscriptions, as in RSS filtering on a cluster):

* *identical* ones (same `chain_key`: graph term, patterns in order, FILTERs) rewrite
  identically, so one chain serves them all;
* a *contained* one S2, whose every match is a match of another S1 *from the same first
  quad* (`contains(S1, S2, first_onto_first=True)`), rides S1's chain too: wherever S2 would
  complete from quad q, S1's chain from q completes. S1's chain only proves S1 matched, so
  whoever delivers S2's notification evaluates S2 on the whole event (`verify`).

Grouping is greedy in the candidates' order (older subscriptions first): a subscription joins
the first chain leader that contains it, or leads a chain of its own. Every candidate is in
exactly one plan, so nothing is dropped or doubled. Containment is decided once per pair of
subscriptions and remembered, and so is the grouping of a set of candidates (both bounded);
past `max_groups` distinct chains for one quad only identical ones are merged, so the pairwise
checks stay bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

from eventcloud.matching.containment import contains
from eventcloud.sparql.subscription import Subscription

__all__ = ["ChainPlan", "ChainGrouper"]

T = TypeVar("T")

#: Distinct chains for one quad past which contained subscriptions are not looked for.
MAX_GROUPS = 1024
#: Containment results remembered (pairs of subscription objects), cleared when full.
REMEMBERED = 65536
#: Groupings remembered per set of candidate ids, cleared when full.
LAYOUTS = 4096

#: A chain as positions among the candidates: (leader, identical ones, contained ones).
_Layout = tuple[int, list[int], list[int]]


@dataclass
class ChainPlan(Generic[T]):
    """One chain to start: its leader's, with the identical and the contained riding along."""

    leader: T
    identical: list[T] = field(default_factory=list)
    contained: list[T] = field(default_factory=list)


class ChainGrouper:
    def __init__(self, max_groups: int = MAX_GROUPS, remembered: int = REMEMBERED,
                 remembered_layouts: int = LAYOUTS) -> None:
        self.max_groups = max_groups
        self.remembered = remembered
        self.remembered_layouts = remembered_layouts
        self._pairs: dict[tuple[int, int], tuple[Subscription, Subscription, bool]] = {}
        self._layouts: dict[tuple[str, ...] | None, list[_Layout]] = {}

    def plan(self, candidates: list[T], sub_of: Callable[[T], Subscription],
             key: Callable[[T], str] | None = None) -> list[ChainPlan[T]]:
        """The chains to start for `candidates` (in their order). With `key` (a subscription's
        id: the same id always names the same query), the grouping of a set of candidates seen
        before is reused instead of decided again."""
        if len(candidates) < 2:  # most quads: nothing to group, nothing worth remembering
            return [ChainPlan(candidate) for candidate in candidates]
        shape = tuple(map(key, candidates)) if key is not None else None
        layout = self._layouts.get(shape) if shape is not None else None
        if layout is None:
            layout = self._layout(candidates, sub_of)
            if shape is not None:
                if len(self._layouts) >= self.remembered_layouts:
                    self._layouts.clear()
                self._layouts[shape] = layout
        return [ChainPlan(candidates[lead], [candidates[i] for i in same], [candidates[i] for i in inside])
                for lead, same, inside in layout]

    def _layout(self, candidates: list[T], sub_of: Callable[[T], Subscription]) -> list[_Layout]:
        """The plans as positions in `candidates`: (leader, identical, contained)."""
        groups: dict[tuple, list[int]] = {}
        for at, candidate in enumerate(candidates):
            groups.setdefault(sub_of(candidate).chain_key, []).append(at)
        layout = [(members[0], members[1:], []) for members in groups.values()]
        if len(layout) < 2 or len(layout) > self.max_groups:
            return layout
        leaders: list[_Layout] = []
        for lead, same, inside in layout:
            sub = sub_of(candidates[lead])
            for leader in leaders:
                if self.contains(sub_of(candidates[leader[0]]), sub):
                    leader[2].extend([lead, *same])
                    break
            else:
                leaders.append((lead, same, inside))
        return leaders

    def contains(self, s1: Subscription, s2: Subscription) -> bool:
        """`contains(s1, s2, first_onto_first=True)`, remembered per pair of objects."""
        key = (id(s1), id(s2))
        known = self._pairs.get(key)
        if known is not None and known[0] is s1 and known[1] is s2:
            return known[2]
        if len(self._pairs) >= self.remembered:
            self._pairs.clear()
        result = contains(s1, s2, first_onto_first=True)
        self._pairs[key] = (s1, s2, result)  # the objects are kept: their ids cannot be reused meanwhile
        return result
