"""Pure local matching of subscriptions against compound events (the per-peer hot path).

`solutions` evaluates a subscription exactly as SPARQL would over a dataset whose only named
graph is the event: a backtracking join over the event's quads, in the order the subscription's
join plan fixed at parse time, with every FILTER run as soon as the variables it can see are
bound. `matches` stops at the first solution. Quad equality is RDF term equality.

CSMA's rewriting step is `advance` over an immutable `PartialMatch` (the rewritten subscription's
state: patterns still to match and the bindings so far); OSMA's single-notifier rule is
`notifier_index`, computed from the whole event so that every peer holding it agrees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from eventcloud.rdf.model import IRI, RDF_LANGSTRING, XSD_STRING, CompoundEvent, Literal, ModelError, Quad, Term
from eventcloud.sparql.subscription import JoinPlan, Subscription, Var

Bindings = dict[str, Term]

__all__ = [
    "Bindings", "EventIndex", "PartialMatch", "solutions", "results", "matches", "match_pattern",
    "start", "next_pattern", "advance", "is_complete", "notifier_index",
]


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


def _index(event: CompoundEvent | EventIndex) -> EventIndex:
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
          found: list[Bindings] | None) -> bool:
    """Backtracking join; appends every solution to `found`, or stops at the first when it is None."""
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
                    elif extend(depth + 1):
                        return True
            for name in added:
                del bindings[name]
        return False

    return extend(0)


def _search(sub: Subscription, event: CompoundEvent | EventIndex, plan: JoinPlan, first_only: bool) -> list[Bindings]:
    index = _index(event)
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
    _join(steps, plan.checks, bindings, found)
    return found


def solutions(sub: Subscription, event: CompoundEvent | EventIndex) -> list[Bindings]:
    """All solutions over every variable (graph variable and blank-node variables included)."""
    return _search(sub, event, sub.plan, first_only=False)


def results(sub: Subscription, event: CompoundEvent | EventIndex) -> list[Bindings]:
    """The notification's bindings: solutions projected on the projection, distinct, in a fixed order."""
    unique: dict[tuple[tuple[str, Term], ...], Bindings] = {}
    for solution in solutions(sub, event):
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


# --- OSMA: the single notifier ------------------------------------------------------------

def notifier_index(sub: Subscription, event: CompoundEvent | EventIndex) -> int | None:
    """Index (in event order) of the first quad matching the indexing pattern within some solution.

    Every peer holding the whole event computes the same answer, so exactly one of them (the
    owner of that quad) notifies. None when the subscription has no solution on the event.
    """
    index = _index(event)
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


# --- CSMA: rewriting one pattern at a time ---------------------------------------------------

@dataclass(frozen=True)
class PartialMatch:
    """A rewritten subscription's state: pattern indexes still to match, bindings so far (sorted)."""

    remaining: tuple[int, ...]
    bindings: tuple[tuple[str, Term], ...]

    def as_dict(self) -> Bindings:
        return dict(self.bindings)

    def to_wire(self) -> list:
        return [list(self.remaining), [[name, _term_to_wire(term)] for name, term in self.bindings]]

    @classmethod
    def from_wire(cls, data: Any) -> "PartialMatch":
        if not isinstance(data, (list, tuple)) or len(data) != 2:
            raise ValueError("a partial match is [remaining, bindings]")
        remaining, pairs = data
        if not isinstance(remaining, (list, tuple)) or not all(type(i) is int and i >= 0 for i in remaining):
            raise ValueError("remaining must be a list of pattern indexes")
        if len(set(remaining)) != len(remaining) or list(remaining) != sorted(remaining):
            raise ValueError("remaining must be sorted and without duplicates")
        if not isinstance(pairs, (list, tuple)):
            raise ValueError("bindings must be a list of [name, term] pairs")
        bindings = []
        for pair in pairs:
            if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not isinstance(pair[0], str) or not pair[0]:
                raise ValueError(f"invalid binding {pair!r}")
            bindings.append((pair[0], _term_from_wire(pair[1])))
        names = [name for name, _ in bindings]
        if names != sorted(set(names)):
            raise ValueError("bindings must be sorted by variable name and without duplicates")
        return cls(tuple(remaining), tuple(bindings))


def _term_to_wire(term: Term) -> Any:
    if type(term) is IRI:
        return term.value
    if term.language is not None:
        return [term.lexical, term.datatype, term.language]
    return [term.lexical, term.datatype]


def _term_from_wire(data: Any) -> Term:
    try:
        if isinstance(data, str):
            return IRI(data)
        if isinstance(data, (list, tuple)) and len(data) in (2, 3) and all(isinstance(x, str) for x in data):
            if len(data) == 3:
                if data[1] != RDF_LANGSTRING:
                    raise ValueError("a language-tagged literal has datatype rdf:langString")
                return Literal(data[0], language=data[2])
            if not data[1]:
                raise ValueError("empty datatype")
            return Literal(data[0], data[1] or XSD_STRING)
    except ModelError as exc:
        raise ValueError(f"invalid term on the wire: {exc}") from None
    raise ValueError(f"invalid term on the wire: {data!r}")


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
