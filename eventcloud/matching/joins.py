"""Distinct triple patterns and the join programs run over their per-event binding tables.

A pattern *node* is one triple pattern with its graph term, up to variable names: its key
holds, per position (g, s, p, o), either the constant term or the variable's slot number,
plus the equalities of a repeated variable. The index keeps one node per distinct key and,
for each event, the quads matching each node (its binding table). A *join program* is a
sequence of steps (node, positions to check against bound variables, positions to bind);
the functions here run one over the binding tables: enumerate its solutions, test that one
exists, or test it with FILTERs applied as soon as their variables are bound.

The runners repeat the same few lines inline (check a quad against the bound variables, then
bind the rest) rather than call a helper: it is the innermost loop of matching, run for every
candidate quad of every step, and a call per quad costs about a third more there.

Pure code; split from `eventcloud.matching.index`, which decides which subscriptions use which nodes
and programs.
"""

from __future__ import annotations

from typing import Any, Iterator

from eventcloud.rdf.model import Quad
from eventcloud.sparql.subscription import Var

POSITIONS = (0, 1, 2, 3)  # g, s, p, o as in model.Quad


class Node:
    """One distinct pattern (with its graph term), shared by every subscription that has it."""

    __slots__ = ("key", "mask", "lookup", "eqs", "users", "trigger", "first")

    def __init__(self, key: tuple, mask: tuple[int, ...], lookup: Any, eqs: tuple[tuple[int, int], ...]) -> None:
        self.key = key          # per position: the constant term, or the variable's slot number
        self.mask = mask        # positions holding constants
        self.lookup = lookup    # the constants, as the mask's dict key
        self.eqs = eqs          # (i, j): two positions of one repeated variable
        self.users = 0          # (subscription, pattern) pairs using this node
        self.trigger: Any = None  # the index's _Trigger registered here, if any
        self.first: Any = None    # the index's _Bucket (CSMA first patterns), if any

    def fits(self, quad: Quad) -> bool:
        for i, j in self.eqs:
            if quad[i] != quad[j]:
                return False
        return True


def canonical_key(graph: Any, pattern: Any) -> tuple[tuple, dict[str, int], tuple[tuple[int, int], ...]]:
    """(key, {variable: first position}, repeated-variable equalities) of a pattern with its graph."""
    key: list[Any] = []
    first: dict[str, int] = {}
    slot_of: dict[str, int] = {}
    eqs: list[tuple[int, int]] = []
    for position, term in zip(POSITIONS, (graph, pattern.subject, pattern.predicate, pattern.object)):
        if type(term) is Var:
            name = term.name
            if name in first:
                eqs.append((first[name], position))
            else:
                first[name] = position
                slot_of[name] = len(slot_of)
            key.append(slot_of[name])
        else:
            key.append(term)
    return tuple(key), first, tuple(eqs)


def selectivity(key: tuple) -> int:
    """How selective a pattern looks: constants in s/o count 2, in p or g 1."""
    return sum((2 if position in (1, 3) else 1) for position, t in enumerate(key) if type(t) is not int)


def join_program(canon: list[tuple], nodes: list[Node], trigger: int, gname: str | None
                 ) -> tuple[list[tuple], list[str], dict[str, int]]:
    """Steps joining a body's patterns (`canon[i]` from canonical_key, `nodes[i]` their nodes), the trigger
    first, then always the pattern with most positions fixed or bound; and the variables in binding order
    (names, and name -> var id; the graph variable, when there is one, is var 0).

    The order depends only on the body's structure (which positions hold constants, which variables
    sit where), not on the constants: subscriptions of one structure (an application's template)
    share one plan, remembered per structure, and only their nodes differ."""
    structure = (trigger, gname, tuple((tuple(type(t) is int for t in key), tuple(first.items()))
                                       for key, first, _ in canon))
    plan = _PLANS.get(structure)
    if plan is None:
        plan = _plan(canon, trigger, gname)
        if len(_PLANS) >= PLANS_KEPT:
            _PLANS.clear()  # structures are few: a full table is unusual, and starting over is safe
        _PLANS[structure] = plan
    order, names, vid = plan
    return [(nodes[index], check, bind) for index, check, bind in order], list(names), dict(vid)


#: Join plans remembered, per body structure (see join_program).
PLANS_KEPT = 4096
_PLANS: dict[tuple, tuple[tuple, tuple[str, ...], dict[str, int]]] = {}


def _plan(canon: list[tuple], trigger: int, gname: str | None
          ) -> tuple[tuple, tuple[str, ...], dict[str, int]]:
    """join_program's work for one structure: steps as (pattern index, check, bind)."""
    names: list[str] = [gname] if gname else []
    vid = {name: i for i, name in enumerate(names)}
    order, remaining = [trigger], [i for i in range(len(canon)) if i != trigger]
    while True:
        for name in sorted(canon[order[-1]][1], key=canon[order[-1]][1].__getitem__):
            if name not in vid:
                vid[name] = len(names)
                names.append(name)
        if not remaining:
            break

        def fixed(i: int) -> tuple[int, int]:
            key, first, _ = canon[i]
            constants = sum(1 for t in key[1:] if type(t) is not int)
            return (constants + sum(1 for n, p in first.items() if n in vid and p != 0), -i)
        choice = max(remaining, key=fixed)
        remaining.remove(choice)
        order.append(choice)
    steps, bound = [], {gname} if gname else set()
    for index in order:
        check, bind = [], []
        for name, position in sorted(canon[index][1].items(), key=lambda item: item[1]):
            if position == 0 and gname is not None:
                continue  # the graph variable: bound to the event graph before the join
            (check if name in bound else bind).append((position, vid[name]))
        bound |= set(canon[index][1])
        steps.append((index, tuple(check), tuple(bind)))
    return tuple(steps), tuple(names), vid


def empty_key(quad: Quad) -> tuple:
    return ()


def enumerate_solutions(steps: tuple, depth: int, values: list[Any], rows: dict[Node, list[Quad]]) -> Iterator[tuple]:
    """Solutions of a join program, as tuples indexed by var id (values holds the bound prefix)."""
    node, check, bind = steps[depth]
    last = depth + 1 == len(steps)
    width = len(values)
    for quad in rows[node]:
        for position, var in check:
            value = quad[position]
            bound = values[var]
            if value is not bound and value != bound:
                break
        else:
            del values[width:]
            for position, var in bind:
                values.append(quad[position])
            if last:
                yield tuple(values)
            else:
                yield from enumerate_solutions(steps, depth + 1, values, rows)


def exists(steps: tuple, depth: int, values: list[Any], rows: dict[Node, list[Quad]]) -> bool:
    """Has the join program a solution? (`_enumerate` stopped at the first)"""
    node, check, bind = steps[depth]
    depth += 1
    last = depth == len(steps)
    width = len(values)
    for quad in rows[node]:
        for position, var in check:
            value = quad[position]
            bound = values[var]
            if value is not bound and value != bound:
                break
        else:
            if last:
                return True
            del values[width:]
            for position, var in bind:
                values.append(quad[position])
            if exists(steps, depth, values, rows):
                return True
    return False


def exists_from(steps: tuple, quad: Quad, values: list[Any], rows: dict[Node, list[Quad]]) -> bool:
    """Has the join program a solution whose first step takes `quad` (a quad of that step's node)?"""
    _, check, bind = steps[0]
    for position, var in check:
        value = quad[position]
        bound = values[var]
        if value is not bound and value != bound:
            return False
    if len(steps) == 1:
        return True
    for position, var in bind:
        values.append(quad[position])
    return exists(steps, 1, values, rows)


def join_checked(steps: tuple, schedule: tuple, names: tuple, depth: int, values: list[Any],
                  rows: dict[Node, list[Quad]]) -> bool:
    node, check, bind = steps[depth]
    _, checks = schedule[depth + 1]
    last = depth + 1 == len(steps)
    width = len(values)
    for quad in rows[node]:
        for position, var in check:
            value = quad[position]
            bound = values[var]
            if value is not bound and value != bound:
                break
        else:
            del values[width:]
            for position, var in bind:
                values.append(quad[position])
            if checks:
                bindings = dict(zip(names, values))
                if not all(f(bindings) for f in checks):
                    continue
            if last or join_checked(steps, schedule, names, depth + 1, values, rows):
                return True
    return False
