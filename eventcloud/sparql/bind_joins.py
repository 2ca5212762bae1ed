"""Bind joins: which patterns of a gathered query to fetch whole, and which bound to earlier results.

A query that is not pushed down to the peers gathers the candidate quads of each of its triple
patterns at the entry peer and is evaluated there. Fetched whole, a pattern such as
`?ob sao:hasValue ?v` moves every value of every observation (a sixth of CityBench) to answer a
question about one sensor. When the query is one basic graph pattern, every solution matches
every pattern, so a later pattern's quads only matter where its variables take values an
earlier pattern's quads gave them: the later pattern is fetched once per such value, as
small boxes (`?ob` fixed: a line instead of a slab), whenever that moves fewer quads than
fetching it whole. An OPTIONAL group's quads matter only where they are compatible with a
required solution: each group is planned after the required patterns, from what they left
(never from another group's: a group may match where another does not).

The planner is pure: it is told how many quads each pattern matches (a count at the peers,
which moves no quads) and what each fetch found, and says what to fetch next. What it
gathers is a superset of the quads of every solution, so evaluating the query over it gives
the query's answer (`tests/sparql/test_bind_joins.py` compares with an evaluation over
everything).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from rdflib import BNode as RBNode
from rdflib import Variable as RVariable
from rdflib.paths import Path as RPath
from rdflib.plugins.sparql.parserutils import CompValue

from eventcloud.rdf.model import IRI, Quad, Term
from eventcloud.sparql.query_plan import query_term

__all__ = ["Var", "JoinPattern", "JoinShape", "Step", "BindPlanner", "join_shape", "join_patterns", "box_of",
           "LOOKUP_QUADS", "MAX_LOOKUPS"]

#: One bound lookup (a multicast over a small box) costs about as much as moving this many quads
#: to the entry peer and loading them (experiments/query_bench.py measures both).
LOOKUP_QUADS = 64
#: At most this many lookups bind one pattern; more values, and the pattern is fetched whole.
MAX_LOOKUPS = 1024

#: Pattern-level operators under which a pattern's quads may count without joining the others
#: (UNION, MINUS, EXISTS), or whose solutions come from elsewhere (VALUES, sub-queries, SERVICE):
#: a query using any of them is gathered whole, pattern by pattern. (OPTIONAL is read apart.)
_NOT_ONE_BGP = frozenset({"Union", "Minus", "Join", "ToMultiSet", "values", "ServiceGraphPattern",
                          "Builtin_EXISTS", "Builtin_NOTEXISTS", "SubSelect", "DescribeQuery"})
#: Nodes around a query's graph pattern that only filter, order, group or project its solutions.
_AROUND = frozenset({"SelectQuery", "AskQuery", "ConstructQuery", "Project", "Slice", "Distinct", "Reduced",
                     "OrderBy", "Extend", "AggregateJoin", "Group", "Filter"})


@dataclass(frozen=True, slots=True)
class Var:
    """A query variable (a blank node of the query is one too)."""

    name: str


#: (g, s, p, o): a term, a variable, or None for the graph of a pattern outside any GRAPH (any
#: graph, shared with nothing).
Slot = Term | Var | None
JoinPattern = tuple[Slot, Slot, Slot, Slot]
Pattern = tuple[Term | None, Term | None, Term | None, Term | None]


@dataclass(frozen=True, slots=True)
class JoinShape:
    """A basic graph pattern every solution matches, and OPTIONAL groups after it, each a basic
    graph pattern whose solutions extend the required ones where they are compatible."""

    required: tuple[JoinPattern, ...]
    optional: tuple[tuple[JoinPattern, ...], ...] = ()

    def __len__(self) -> int:
        return len(self.required) + sum(len(group) for group in self.optional)

    def patterns(self) -> list[JoinPattern]:
        return [*self.required, *(p for group in self.optional for p in group)]


def join_shape(algebra: Any) -> JoinShape | None:
    """The query's triple patterns with their variables, when its graph pattern is one basic graph
    pattern with FILTERs, OPTIONAL groups of one basic graph pattern each after it, at most one
    GRAPH around it all, and any solution modifiers and aggregates around that; else None."""
    if not _plain(algebra):
        return None
    node, graph = algebra, None
    while isinstance(node, CompValue) and node.name in _AROUND:
        node = node.p
    if isinstance(node, CompValue) and node.name == "Graph":
        graph, node = _slot(node.get("term")), node.p
        while isinstance(node, CompValue) and node.name == "Filter":
            node = node.p
    optional: list[tuple[JoinPattern, ...]] = []
    while isinstance(node, CompValue) and node.name == "LeftJoin":
        group = _bgp(node.p2, graph)
        if group is None:
            return None
        optional.insert(0, group)
        node = node.p1
    required = _bgp(node, graph)
    return JoinShape(required, tuple(optional)) if required else None


def join_patterns(algebra: Any) -> list[JoinPattern] | None:
    """The patterns of a query that is one basic graph pattern (`join_shape` without OPTIONAL)."""
    shape = join_shape(algebra)
    return list(shape.required) if shape is not None and not shape.optional else None


def _plain(algebra: Any) -> bool:
    """No operator of `_NOT_ONE_BGP` anywhere (in FILTER expressions neither), at most one GRAPH."""
    graphs = 0

    def visit(node: Any) -> bool:
        nonlocal graphs
        if isinstance(node, CompValue):
            if node.name in _NOT_ONE_BGP:
                return False
            graphs += node.name == "Graph"
            return all(visit(value) for value in node.values())
        if isinstance(node, (list, tuple)):
            return all(visit(item) for item in node)
        return True

    return visit(algebra) and graphs <= 1


def _bgp(node: Any, graph: Slot) -> tuple[JoinPattern, ...] | None:
    """The patterns of a BGP node, or None (another node, a property path, a term the overlay
    cannot place)."""
    if not (isinstance(node, CompValue) and node.name == "BGP"):
        return None
    patterns: dict[JoinPattern, None] = {}
    for s, p, o in node.get("triples", []):
        if isinstance(p, RPath):
            return None
        slots = (graph, _slot(s), _slot(p), _slot(o))
        if any(slot is None for slot in slots[1:]):
            return None  # a term the overlay cannot place: gathered whole
        patterns.setdefault(slots)
    return tuple(patterns) or None


def _slot(node: Any) -> Slot:
    if isinstance(node, RVariable):
        return Var(str(node))
    if isinstance(node, RBNode):
        return Var(f"_:{node}")
    return query_term(node)


def box_of(pattern: JoinPattern) -> Pattern:
    """The pattern as the overlay looks it up: variables match anything."""
    return tuple(None if isinstance(slot, Var) else slot for slot in pattern)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Step:
    """Fetch pattern `index` whole, or (`whole` False) as these bound patterns: none at all when
    an earlier pattern left its variable no value (the query has no solution)."""

    index: int
    whole: bool = True
    lookups: tuple[Pattern, ...] = ()


class BindPlanner:
    """Orders a basic graph pattern's fetches: the pattern matching fewest quads first, then, while
    patterns remain, the one cheapest to fetch, bound to the values earlier fetches gave its
    variables when `len(values) × LOOKUP_QUADS` is less than the quads it matches."""

    def __init__(self, patterns: Sequence[JoinPattern], counts: Sequence[int], *,
                 lookup_quads: int = LOOKUP_QUADS, max_lookups: int = MAX_LOOKUPS,
                 known: Mapping[Var, set[Term]] | None = None) -> None:
        if len(patterns) != len(counts):
            raise ValueError(f"{len(patterns)} patterns, {len(counts)} counts")
        self.patterns = list(patterns)
        self.counts = list(counts)
        self.lookup_quads = lookup_quads
        self.max_lookups = max_lookups
        self.remaining = set(range(len(patterns)))
        #: what a variable can take in a solution: the values every fetched pattern holding it gave
        #: (`known`: what the required patterns left, for an OPTIONAL group planned after them)
        self.known: dict[Var, set[Term]] = {var: set(values) for var, values in (known or {}).items()}

    def next(self) -> Step | None:
        """What to fetch next; None once every pattern is fetched."""
        if not self.remaining:
            return None
        best: tuple[int, int, Step] | None = None
        for index in sorted(self.remaining):
            whole = self.counts[index]
            choice = self._binding(index)
            cost, step = (whole, Step(index))
            if choice is not None:
                slot, values = choice
                bind_cost = len(values) * self.lookup_quads
                if len(values) <= self.max_lookups and bind_cost < whole:
                    pattern = box_of(self.patterns[index])
                    cost, step = bind_cost, Step(index, False, tuple(
                        pattern[:slot] + (value,) + pattern[slot + 1:] for value in _ordered(values)))
            if best is None or (cost, index) < best[:2]:
                best = (cost, index, step)
        assert best is not None
        return best[2]

    def learn(self, index: int, quads: Iterable[Quad]) -> None:
        """Pattern `index` was fetched and gave `quads`: the values of its variables narrow."""
        self.remaining.discard(index)
        pattern = self.patterns[index]
        found: dict[Var, set[Term]] = {}
        for quad in quads:
            slots = _matches(pattern, quad)
            if slots is None:
                continue
            for var, value in slots:
                found.setdefault(var, set()).add(value)
        for slot in pattern:
            if isinstance(slot, Var):
                values = found.get(slot, set())
                self.known[slot] = self.known[slot] & values if slot in self.known else values

    def _binding(self, index: int) -> tuple[int, set[Term]] | None:
        """The slot of pattern `index` to fix, and its values: the known variable with fewest
        values that can stand there (a graph, subject or predicate is an IRI)."""
        best: tuple[int, set[Term]] | None = None
        for slot, var in enumerate(self.patterns[index]):
            if not isinstance(var, Var) or var not in self.known:
                continue
            values = self.known[var] if slot == 3 else {v for v in self.known[var] if isinstance(v, IRI)}
            if best is None or len(values) < len(best[1]):
                best = (slot, values)
        return best


def _matches(pattern: JoinPattern, quad: Quad) -> list[tuple[Var, Term]] | None:
    """The variables' values if `quad` matches `pattern` (a variable twice takes one value), else None."""
    bound: dict[Var, Term] = {}
    for slot, term in zip(pattern, quad):
        if slot is None:
            continue
        if isinstance(slot, Var):
            if bound.setdefault(slot, term) != term:
                return None
        elif slot != term:
            return None
    return list(bound.items())


def _ordered(values: set[Term]) -> list[Term]:
    """Deterministic order (tests, logs)."""
    return sorted(values, key=lambda t: (type(t).__name__, str(t)))
