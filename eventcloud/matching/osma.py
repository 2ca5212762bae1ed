"""OSMA's single-notifier rule: which owner of an event's quads notifies a matching subscription.

Under OSMA every owner of a quad of the event holds the whole event and checks the
subscriptions it stores. Exactly one of them notifies: the owner of the first quad (in event
order) that matches the indexing pattern (patterns[0]) within some solution. Every peer holding
the event computes the same position, so no coordination is needed, provided they all see the
quads in the same order: `in_notifier_order` sorts them (an owner that gathered the event again,
for a retry, got them in whatever order the owners answered; with the published order at some
holders and another at others, no holder was the notifier and the notification was lost).

`decide` answers, for one subscription and one event view, both questions an OSMA peer asks
(who notifies, and with which bindings) with at most one full join.
"""

from __future__ import annotations

from typing import Any

from eventcloud.matching.reference import (
    MAX_SOLUTIONS, Bindings, EventIndex, _candidates, _initial, _join, event_index, project, solutions,
)
from eventcloud.rdf.model import CompoundEvent, Quad
from eventcloud.sparql.subscription import Subscription, Var

__all__ = ["notifier_index", "decide", "in_notifier_order"]


def in_notifier_order(event: CompoundEvent) -> CompoundEvent:
    """The event with its quads in one canonical order, the same at every peer however it got them."""
    ordered = tuple(sorted(event.quads, key=repr))
    if ordered == event.quads:
        return event
    result = object.__new__(CompoundEvent)  # the same quads, already validated
    object.__setattr__(result, "graph", event.graph)
    object.__setattr__(result, "quads", ordered)
    return result


def notifier_index(sub: Subscription, event: CompoundEvent | EventIndex) -> int | None:
    """Index (in event order) of the first quad matching the indexing pattern within some solution.

    Every peer holding the whole event computes the same answer, so exactly one of them (the
    owner of that quad) notifies. None when the subscription has no solution on the event.
    """
    index = event_index(event)
    plan = sub.indexed_plan  # joins patterns[0] first
    bindings = _initial(sub, index.graph)
    if bindings is None or not all(check(bindings) for check in plan.before):
        return None
    steps = _candidates(index, plan)
    if steps is None:
        return None
    fit, rest, checks = plan.extractors[0], steps[1:], plan.checks[1:]
    for position, quad in enumerate(index.quads):
        pairs = fit(quad)
        if pairs is None:
            continue
        trial = dict(bindings)
        if any(trial.setdefault(name, value) != value for name, value in pairs):
            continue
        if not all(check(trial) for check in plan.checks[0]):
            continue
        if not rest or _join(rest, checks, trial, None):
            return position
    return None


def decide(sub: Subscription, event: CompoundEvent | EventIndex, want_solutions: bool,
           limit: int = MAX_SOLUTIONS, memo: dict[Any, Any] | None = None) -> tuple[int | None, list[Bindings]]:
    """(notifier position, projected solutions) of `sub` on the event; (None, []) if no match.
    Solutions are computed up to `limit` (the caller can tell a truncated answer by its size).

    With `want_solutions` the full join runs once and the notifier is read off its solutions
    (the first event position whose quad is pattern 0 under some solution); without, only the
    first-solution search of `notifier_index` runs (signal and event notifications need no
    bindings).

    `memo`, a dict kept for one event, shares that work between identical subscriptions (the
    same pattern and FILTER objects, as a peer's registry keeps them): only the projection is
    done per subscription.
    """
    if memo is None:
        position, found = _decide(sub, event, want_solutions, limit)
    else:
        key = (id(sub.patterns), id(sub.filters), want_solutions, limit)
        hit = memo.get(key)
        if hit is not None and hit[0].patterns is sub.patterns and hit[0].filters is sub.filters \
                and hit[0].graph == sub.graph:
            position, found = hit[1], hit[2]
        else:
            position, found = _decide(sub, event, want_solutions, limit)
            memo[key] = (sub, position, found)
    return position, (project(sub, found) if found and position is not None else [])


def _decide(sub: Subscription, event: CompoundEvent | EventIndex, want_solutions: bool,
            limit: int) -> tuple[int | None, list[Bindings]]:
    """`decide` before the projection: the solutions as found."""
    view = event_index(event)
    if not want_solutions:
        return notifier_index(sub, view), []
    found = solutions(sub, view, limit)
    if len(found) >= limit:  # truncated: the notifier rule must not depend on which solutions were kept
        return notifier_index(sub, view), found
    if not found:
        return None, []
    positions = _positions(view)
    pattern = sub.patterns[0]
    graph = view.graph
    best: int | None = None
    for solution in found:
        quad = Quad(graph, *(solution[t.name] if type(t) is Var else t for t in pattern.terms()))  # type: ignore[arg-type]
        at = positions.get(quad)
        if at is not None and (best is None or at < best):
            best = at
            if best == 0:
                break
    return best, found


def _positions(view: EventIndex) -> dict[Any, int]:
    positions: dict[Any, int] = {}
    for at, quad in enumerate(view.quads):
        positions.setdefault(quad, at)
    return positions
