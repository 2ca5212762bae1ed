"""Reference evaluation of one subscription on one compound event (exact SPARQL semantics).

`solutions` evaluates a subscription exactly as SPARQL would over a dataset whose only named
graph is the event: a backtracking join over the event's quads, in the order the subscription's
join plan fixed at parse time, with every FILTER run as soon as the variables it can see are
bound. `matches` stops at the first solution. Quad equality is RDF term equality.

`EventIndex` is the per-event view every evaluation shares: build it once per event (the
quads grouped by predicate) and pass it to `solutions`, `results`, `matches` and OSMA's
`notifier_index`, so an event is indexed once however many subscriptions look at it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from eventcloud.rdf.model import IRI, CompoundEvent, Quad, Term
from eventcloud.sparql.subscription import JoinPlan, Subscription, Var

Bindings = dict[str, Term]

__all__ = ["Bindings", "EventIndex", "event_index", "solutions", "results", "project", "matches", "match_pattern",
           "MAX_SOLUTIONS", "MAX_SOLUTION_TERMS", "solution_limit"]

#: Solutions one notification carries at most (a subscription whose patterns share no variable
#: has the product of their matches; its notification says it was truncated).
MAX_SOLUTIONS = 10_000
#: Bound terms held for one subscription's solutions at most (solutions x variables): 50
#: unconnected patterns (150 variables) x 10,000 solutions made a 1 GB peer and a notification
#: over the frame limit, whose failure re-ran the match for ever.
MAX_SOLUTION_TERMS = 200_000


def solution_limit(sub: Subscription) -> int:
    """Solutions kept for one notification of `sub`: MAX_SOLUTIONS, fewer for many variables."""
    return max(1, min(MAX_SOLUTIONS, MAX_SOLUTION_TERMS // max(1, len(sub.variables()))))


class EventIndex:
    """An event's quads grouped by predicate; build once per event and share across subscriptions."""

    __slots__ = ("event", "graph", "quads", "_by_predicate")

    def __init__(self, event: CompoundEvent) -> None:
        self.event = event
        self.graph = event.graph
        self.quads = event.quads
        self._by_predicate: dict[str, list[Quad]] | None = None

    def with_predicate(self, predicate: str) -> Iterable[Quad]:
        """Quads whose predicate IRI is `predicate` (keyed by string: str hashes are cached)."""
        groups = self._by_predicate
        if groups is None:
            groups = {}
            for quad in self.quads:
                key = quad.p.value
                if key in groups:
                    groups[key].append(quad)
                else:
                    groups[key] = [quad]
            self._by_predicate = groups
        return groups.get(predicate, ())


def event_index(event: CompoundEvent | EventIndex) -> EventIndex:
    """The event's shared view (the given one if it already is one)."""
    return event if isinstance(event, EventIndex) else EventIndex(event)


def _candidates(index: EventIndex, plan: JoinPlan) -> list[list[Any]] | None:
    """Per plan step, the (variable, term) pairs of every quad that fits the pattern alone.

    The join then only checks variables shared between patterns. None when some pattern has
    no candidate at all, which rejects most non-matching subscriptions without any join.
    """
    steps = []
    small = len(index.quads) <= 4
    for fit, predicate in zip(plan.extractors, plan.predicates):
        pool = index.quads if predicate is None or small else index.with_predicate(predicate)
        chosen = [pairs for pairs in map(fit, pool) if pairs is not None]
        if not chosen:
            return None
        steps.append(chosen)
    return steps


def _initial(sub: Subscription, graph: IRI) -> Bindings | None:
    if isinstance(sub.graph, Var):
        return {sub.graph.name: graph}
    return {} if sub.graph == graph else None


def _join(steps: list[list[Any]], checks: tuple[tuple[Any, ...], ...], bindings: Bindings,
          found: list[Bindings] | None, limit: int | None = None) -> bool:
    """Backtracking join; appends every solution to `found` (up to `limit`), or stops at the first
    when it is None."""
    last = len(steps) - 1

    def extend(depth: int) -> bool:
        step_checks = checks[depth]
        for pairs in steps[depth]:
            added = []
            for name, value in pairs:
                current = bindings.get(name)
                if current is None:
                    bindings[name] = value
                    added.append(name)
                elif current is not value and current != value:
                    break
            else:
                ok = True
                for check in step_checks:
                    if not check(bindings):
                        ok = False
                        break
                if ok:
                    if depth == last:
                        if found is None:
                            return True
                        found.append(dict(bindings))
                        if limit is not None and len(found) >= limit:
                            return True
                    elif extend(depth + 1):
                        return True
            for name in added:
                del bindings[name]
        return False

    return extend(0)


def _search(sub: Subscription, event: CompoundEvent | EventIndex, plan: JoinPlan, first_only: bool,
            limit: int | None = None) -> list[Bindings]:
    index = event_index(event)
    bindings = _initial(sub, index.graph)
    if bindings is None:
        return []
    for check in plan.before:
        if not check(bindings):
            return []
    steps = _candidates(index, plan)
    if steps is None:
        return []
    if first_only:
        return [bindings] if _join(steps, plan.checks, bindings, None) else []
    found: list[Bindings] = []
    _join(steps, plan.checks, bindings, found, limit)
    return found


def solutions(sub: Subscription, event: CompoundEvent | EventIndex, limit: int | None = None) -> list[Bindings]:
    """All solutions over every variable (graph variable and blank-node variables included);
    at most `limit` (a cross product of unconnected patterns can have millions)."""
    return _search(sub, event, sub.plan, first_only=False, limit=limit)


def results(sub: Subscription, event: CompoundEvent | EventIndex, limit: int | None = None) -> list[Bindings]:
    """The notification's bindings: solutions projected on the projection, distinct, in a fixed order
    (from at most `limit` solutions)."""
    return project(sub, solutions(sub, event, limit))


def project(sub: Subscription, found: Iterable[Bindings]) -> list[Bindings]:
    """Solutions projected on the subscription's projection, distinct, in a fixed order."""
    unique: dict[tuple[tuple[str, Term], ...], Bindings] = {}
    for solution in found:
        row = {name: solution[name] for name in sub.projection if name in solution}
        unique.setdefault(tuple(row.items()), row)
    return sorted(unique.values(), key=_row_key) if len(unique) > 1 else list(unique.values())


def _row_key(row: Bindings) -> tuple[tuple[str, str], ...]:
    return tuple((name, term.n3()) for name, term in row.items())


def matches(sub: Subscription, event: CompoundEvent | EventIndex) -> bool:
    """Does the subscription have at least one solution on the event? (stops at the first)"""
    return bool(_search(sub, event, sub.plan, first_only=True))


def match_pattern(sub: Subscription, index: int, quad: Quad, bindings: Mapping[str, Term]) -> Bindings | None:
    """Unify pattern `index` (with the graph term) with `quad` under `bindings`; None if they clash."""
    pattern = sub.patterns[index]
    result = dict(bindings)
    for term, value in ((sub.graph, quad.g), (pattern.subject, quad.s), (pattern.predicate, quad.p),
                        (pattern.object, quad.o)):
        if type(term) is Var:
            current = result.get(term.name)
            if current is None:
                result[term.name] = value
            elif current != value:
                return None
        elif term != value:
            return None
    return result
