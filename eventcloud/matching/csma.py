"""CSMA's rewriting step: a subscription matched one pattern at a time, hop by hop.

A rewritten subscription travels as an immutable `PartialMatch`: the pattern indexes still to
match and the bindings so far. `start` is the state before any pattern matched, `next_pattern`
says which pattern to route and match next (patterns[0], the indexing pattern, first; then
the most constrained one), `advance` matches one quad against it and runs the FILTERs that
just became evaluable, and `is_complete` says when the subscriber can be notified.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventcloud.matching.reference import match_pattern
from eventcloud.rdf.model import Quad, Term
from eventcloud.sparql.subscription import Subscription, Var

__all__ = ["PartialMatch", "start", "next_pattern", "advance", "is_complete"]


@dataclass(frozen=True)
class PartialMatch:
    """A rewritten subscription's state: pattern indexes still to match, bindings so far (sorted)."""

    remaining: tuple[int, ...]
    bindings: tuple[tuple[str, Term], ...]


def start(sub: Subscription) -> PartialMatch:
    """The state before any pattern matched."""
    return PartialMatch(tuple(range(len(sub.patterns))), ())


def next_pattern(sub: Subscription, partial: PartialMatch) -> int:
    """The pattern to route and match next: patterns[0] first, then the most constrained one."""
    if not partial.remaining:
        raise ValueError("the partial match is complete")
    if len(partial.remaining) == len(sub.patterns):
        return 0
    bound = {name for name, _ in partial.bindings}

    def fixed(i: int) -> int:
        return sum(1 for t in sub.patterns[i].terms() if not isinstance(t, Var) or t.name in bound)

    return max(partial.remaining, key=lambda i: (fixed(i), -i))


def advance(sub: Subscription, partial: PartialMatch, index: int, quad: Quad) -> PartialMatch | None:
    """Rewrite: match pattern `index` with `quad`, run the filters that became evaluable; None if it fails."""
    if index not in partial.remaining:
        raise ValueError(f"pattern {index} is not among the remaining patterns {partial.remaining}")
    before = dict(partial.bindings)
    after = match_pattern(sub, index, quad, before)
    if after is None:
        return None
    first_step = len(partial.remaining) == len(sub.patterns)
    bound_before, bound_after = before.keys(), after.keys()
    for check, needed in zip(sub.filters, sub.filter_needs):
        if needed <= bound_after and (first_step or not needed <= bound_before):
            if not check(after):
                return None
    remaining = tuple(i for i in partial.remaining if i != index)
    return PartialMatch(remaining, tuple(sorted(after.items())))


def is_complete(partial: PartialMatch) -> bool:
    return not partial.remaining
