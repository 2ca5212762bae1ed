"""One event's match, in two stages: the shared index's joins, then the residual predicates.

`SubscriptionIndex.match(event)` returns an `EventMatch`: the subscriptions decided by joins,
constraint tables and plain FILTERs alone, and a `ResidualPlan` (eventcloud.matching.ordering)
over the candidates whose FILTERs call operators. Its clauses are the distinct bindings of the
variables their conjuncts read, over all solutions of their join; a predicate is (template,
values) (eventcloud.matching.predicates), so one shared by several subscriptions, or by several
solutions, is evaluated once.

Driving it is the caller's business (sans-I/O):

    m = index.match(event)
    while (key := m.next()) is not None:
        m.record(key, m.evaluate(key))      # evaluate may raise NeedCall: run the call, retry
    for member in m.direct:                  # too many clauses: evaluate it alone
        m.settle(member, matches(member.sub, event))
    ids = m.result()

`SubscriptionIndex.match_event` does exactly that with operators called in place.
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable

from eventcloud.matching.groups import Member, idents
from eventcloud.matching.joins import Node
from eventcloud.matching.ordering import ResidualPlan
from eventcloud.matching.predicates import BUILTIN_COST, Template
from eventcloud.matching.statistics import Statistics
from eventcloud.rdf.model import Quad

__all__ = ["EventMatch", "CLAUSE_LIMIT", "estimator"]

#: Distinct clauses enumerated per subscription; past it, the subscription is evaluated alone.
CLAUSE_LIMIT = 4096


def estimator(statistics: Statistics):
    """(cost, selectivity) of a predicate key (template, values) from `statistics`."""
    def estimate(key: Hashable) -> tuple[float, float]:
        template: Template = key[0]  # type: ignore[index]
        if template.calls:
            operators = template.check.operators
            cost = sum(statistics.operator_cost(iri, operators[iri].cost) for iri in template.calls)
        else:
            cost = BUILTIN_COST
        return cost, statistics.selectivity(template.text, template.hint)
    return estimate


class _TooMany(Exception):
    pass


def clauses(member: Member, graph: Any, rows: dict[Node, list[Quad]]) -> list[tuple]:
    """The member's distinct clauses: per solution of its join, its conjuncts with bound values."""
    found: dict[tuple, None] = {}
    pairs = tuple(zip((t for t, _ in member.residual), member.positions))
    for solution in member.group.solutions(graph, rows):
        clause = tuple((template, tuple(None if i is None else solution[i] for i in slots))
                       for template, slots in pairs)
        found[clause] = None
        if len(found) > CLAUSE_LIMIT:
            raise _TooMany()
    return list(found)


class EventMatch:
    """The answer of the joins for one event, and the residual predicates still to decide."""

    def __init__(self, decided: Iterable[Member], candidates: list[Member], graph: Any,
                 rows: dict[Node, list[Quad]], order: str, statistics: Statistics) -> None:
        self._decided = list(decided)
        self.statistics = statistics
        self.plan = ResidualPlan(order, estimator(statistics))
        self.direct: list[Member] = []
        self._settled: list[Member] = []
        present = set(candidates)
        for member in sorted(candidates, key=lambda m: m.seq):  # a container is older than what it contains
            parent = member.parent
            if parent is not None and parent not in present:
                present.discard(member)
                continue  # its container did not even pass the joins: neither can it
            try:
                found = clauses(member, graph, rows)
            except _TooMany:
                self.direct.append(member)
                continue
            self.plan.add(member, member.seq, (tuple(c) for c in found),
                          parent=parent if parent is not None and parent not in self.direct else None)

    def next(self) -> Hashable | None:
        return self.plan.next()

    @staticmethod
    def evaluate(key: Hashable) -> bool:
        """A predicate's value (the conjunct as a FILTER on its values); may raise NeedCall."""
        template, values = key  # type: ignore[misc]
        return template.holds(values)

    def record(self, key: Hashable, value: bool) -> None:
        self.plan.record(key, value)
        self.statistics.observe_predicate(key[0].text, value)  # type: ignore[index]

    def settle(self, member: Member, value: bool) -> None:
        """The answer for a member of `direct`, evaluated alone."""
        if value:
            self._settled.append(member)

    @property
    def evaluations(self) -> int:
        return self.plan.evaluations

    def result(self) -> list[str]:
        """Ids of every matching subscription, in insertion order."""
        winners = self._decided + self.plan.matched() + self._settled
        winners.sort(key=lambda m: m.seq)
        return idents(winners)
