"""Join groups: subscriptions that share one join program, their members, and a group's solutions
on one event (enumerated lazily, kept up to SOLUTION_CAP, shared by every member)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from eventcloud.matching.joins import Node, enumerate_solutions, exists_from, join_checked
from eventcloud.matching.tables import Tables, lookup as _lookup
from eventcloud.rdf.model import Quad
from eventcloud.sparql.subscription import Subscription, Var

__all__ = ["Group", "Member", "Solutions", "SOLUTION_CAP", "first_checks", "idents", "match_group_tables", "own_join"]

#: Solutions of a group's join kept per event; members not decided by then run their own join.
SOLUTION_CAP = 64


class Group(Tables):
    """Subscriptions with one join program: the same patterns in the same order, up to variable names.

    `steps[k]` = (node, ((position, var id), …) to check, ((position, var id), …) to bind); var ids
    count from 0 in binding order (the graph variable, when there is one, is 0 and bound first).
    """

    __slots__ = ("key", "steps", "graph_var", "trigger", "others", "plain", "filtered", "free", "size")

    def __init__(self, key: tuple, steps: tuple, graph_var: bool) -> None:
        super().__init__()
        self.key = key
        self.steps = steps
        self.graph_var = graph_var
        self.trigger: Node = steps[0][0]
        self.others = tuple(n for n in dict.fromkeys(step[0] for step in steps) if n is not self.trigger)
        self.plain: dict[Member, None] = {}      # no FILTER: any solution will do
        self.filtered: dict[Member, None] = {}   # FILTERs, none tabled
        self.free = 0                            # members not tabled at the trigger
        self.size = 0

    def solutions(self, graph: Any, rows: dict[Node, list[Quad]]) -> Iterator[tuple]:
        values: list[Any] = [graph] if self.graph_var else []
        return enumerate_solutions(self.steps, 0, values, rows)

    def through(self, graph: Any, quad: Quad, rows: dict[Node, list[Quad]]) -> bool:
        """Is there a solution whose first (trigger) step takes `quad`?"""
        for node in self.others:
            if node not in rows:
                return False
        return exists_from(self.steps, quad, [graph] if self.graph_var else [], rows)


class Member:
    """A stored subscription, compiled against its group."""

    __slots__ = ("ident", "seq", "sub", "nodes", "group", "names", "filters", "simple", "level", "reg",
                 "first_reg", "first_binds", "first_checks", "schedule", "residual", "positions", "parent",
                 "children", "aliases", "order")

    def __init__(self, ident: str, seq: int, sub: Subscription) -> None:
        self.ident = ident
        self.seq = seq
        #: where its id comes in results: `seq`, unless the id is that of an alias that took the
        #: place of the first one stored (seq orders the entry in the index's structures)
        self.order = seq
        self.sub = sub
        #: ids (and insertion numbers) of the later-stored subscriptions identical to this one
        #: (same graph term, patterns and FILTERs): they share this entry, so whatever it
        #: matches, they match
        self.aliases: dict[str, int] | None = None
        self.schedule: tuple | None = None
        #: FILTER conjuncts evaluated through the residual plan (subscriptions calling operators)
        self.residual: tuple = ()
        self.positions: tuple = ()           # per residual conjunct, the var ids of its slots
        self.parent: Member | None = None    # a stored subscription containing this one
        self.children: list[Member] = []

    def alias(self, ident: str, order: int) -> None:
        """`ident`, stored `order`-th, is identical to this one and shares this entry."""
        if self.aliases is None:
            self.aliases = {}
        self.aliases[ident] = order

    def unalias(self, ident: str) -> None:
        """`ident` goes (this entry has aliases): if it is the first one stored, the next
        alias takes its place."""
        assert self.aliases
        if self.ident == ident:
            ident = self.ident = next(iter(self.aliases))
            self.order = self.aliases[ident]
        del self.aliases[ident]
        if not self.aliases:
            self.aliases = None

    def accepts(self, solution: tuple) -> bool:
        bindings = dict(zip(self.names, solution))
        for check in self.filters:
            if not check(bindings):
                return False
        return True


def idents(members: Iterable[Member]) -> list[str]:
    """The ids the members (in insertion order) stand for, with their identical subscriptions',
    in insertion order."""
    out: list[str] = []
    shared = False
    for member in members:
        out.append(member.ident)
        if member.aliases or member.order != member.seq:
            shared = True
    if not shared:
        return out
    ordered = []
    for member in members:
        ordered.append((member.order, member.ident))
        if member.aliases:
            ordered.extend((seq, ident) for ident, seq in member.aliases.items())
    ordered.sort()
    return [ident for _, ident in ordered]


class Solutions:
    """A group's solutions on one event, enumerated lazily and kept up to SOLUTION_CAP."""

    __slots__ = ("found", "more", "done")

    def __init__(self, more: Iterator[tuple]) -> None:
        self.found: list[tuple] = []
        self.more = more
        self.done = False

    def at(self, i: int) -> tuple | None:
        found = self.found
        while len(found) <= i:
            if self.done:
                return None
            solution = next(self.more, None)
            if solution is None:
                self.done = True
                return None
            found.append(solution)
        return found[i]

    def any_for(self, entry: Member, graph: Any, rows: dict[Node, list[Quad]]) -> bool:
        for i in range(SOLUTION_CAP):
            solution = self.at(i)
            if solution is None:
                return False
            if entry.accepts(solution):
                return True
        if self.at(SOLUTION_CAP) is None:
            return False
        return own_join(entry, graph, rows)  # many solutions: let the FILTERs prune early


def first_checks(sub: Subscription) -> tuple:
    """The FILTERs evaluable once patterns[0] (with the graph term) matched: CSMA's first step.
    FILTERs calling operators are left to `csma.advance` (they may need evaluating off the loop)."""
    local = sub.patterns[0].variables() | ({sub.graph.name} if type(sub.graph) is Var else set())
    variables = sub.variables()
    return tuple(f for f in sub.filters if (f.variables & variables) <= local and not f.calls)


def own_join(entry: Member, graph: Any, rows: dict[Node, list[Quad]]) -> bool:
    """A member's own existence join, each FILTER run as soon as its variables are bound."""
    group, names = entry.group, entry.names
    if entry.schedule is None:
        variables = entry.sub.variables()
        pending = list(entry.filters)
        schedule = []
        bound = 1 if group.graph_var else 0
        for step in ((None, (), ()),) + group.steps:
            bound += len(step[2])
            seen = set(names[:bound])
            now = tuple(f for f in pending if (f.variables & variables) <= seen)
            pending = [f for f in pending if f not in now]
            schedule.append((bound, now))
        entry.schedule = tuple(schedule)
    values: list[Any] = [graph] if group.graph_var else []
    width, before = entry.schedule[0]
    if before and not all(check(dict(zip(names, values))) for check in before):
        return False
    return join_checked(group.steps, entry.schedule, names, 0, values, rows)


def match_group_tables(group: Group, state: Solutions, graph: Any, rows: dict[Node, list[Quad]],
                       matched: dict[Member, None], cache: dict[int, Any]) -> None:
    """Members tabled at the group: one lookup per solution and constrained variable."""
    undecided: dict[Member, None] = {}
    for i in range(SOLUTION_CAP):
        solution = state.at(i)
        if solution is None:
            break
        for (var, _), table in group.tables.items():
            if type(var) is tuple:  # an is-a class and a value (IsaPairTable)
                exact, maybe = table.split_pair(solution[var[0]], *_lookup(solution[var[1]], cache))
            else:
                exact, maybe = table.split(*_lookup(solution[var], cache))
            for entry in exact:
                if entry in matched:
                    continue
                if entry.simple or entry.accepts(solution):
                    matched[entry] = None
                    undecided.pop(entry, None)
                else:
                    undecided[entry] = None
            for entry in maybe:
                if entry not in matched and entry.accepts(solution):
                    matched[entry] = None
    else:
        if state.at(SOLUTION_CAP) is not None:  # more solutions than kept: no pruning past them
            for tab in group.tables.values():
                for entry in tab.entries():
                    undecided[entry] = None
    for entry in undecided:
        if entry not in matched and state.any_for(entry, graph, rows):
            matched[entry] = None
