"""Distinct triple patterns and the join programs run over their per-event binding tables.

A pattern *node* is one triple pattern with its graph term, up to variable names: its key
holds, per position (g, s, p, o), either the constant term or the variable's slot number,
plus the equalities of a repeated variable. The index keeps one node per distinct key and,
for each event, the quads matching each node (its binding table). A *join program* is a
sequence of steps (node, positions to check against bound variables, positions to bind);
the functions here run one over the binding tables: enumerate its solutions, test that one
exists, or test it with FILTERs applied as soon as their variables are bound.

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
