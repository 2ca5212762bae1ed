"""Where the index keeps conditional subscriptions: tables keyed by (variable position, operator).

A pattern node's trigger (`Trigger`), its CSMA first-pattern bucket (`Bucket`) and a join group
each hold, per (position or variable slot, operator), one table of the entries whose chosen
constraint is on that variable. `TableKit` makes the right kind of table for an operator:

    = != < <= > >=                      matching.constraints.ConstraintTable (sorted lists)
    ft (ftcontains)                     matching.textindex.TextTable (RTF's word trie)
    isa:descendant / ancestor / child   matching.isatable.IsaTable (the taxonomy's closure)
    (an is-a op, a comparison op)       matching.isatable.IsaPairTable (a group's class and value)

The kit belongs to one index: it holds the taxonomy the is-a tables read and, in the RTFs
layout, the one word trie shared by every text table. Every table answers
`split(value, probed) -> (entries whose constraint holds, entries it cannot decide)`,
`select` (both together), `entries()` and `len`.
"""

from __future__ import annotations

from typing import Any

from eventcloud.matching.constraints import Constraint, ConstraintTable, probe
from eventcloud.matching.isatable import ISA_OPS, IsaPairTable, IsaTable
from eventcloud.matching.textindex import SharedText, TextTable
from eventcloud.sparql.filters.values import to_value
from eventcloud.sparql.taxonomy import Taxonomy

__all__ = ["TableKit", "Tables", "Trigger", "Bucket", "lookup", "TEXT_LAYOUTS"]

#: "rtfm": a word trie per text table (per pattern node and position); "rtfs": one per index.
TEXT_LAYOUTS = ("rtfm", "rtfs")


class TableKit:
    """Makes the tables of one index: the taxonomy is-a tables read, the shared trie of RTFs."""

    __slots__ = ("taxonomy", "shared")

    def __init__(self, taxonomy: Taxonomy, text_layout: str = "rtfm") -> None:
        if text_layout not in TEXT_LAYOUTS:
            raise ValueError(f"text_layout is one of {TEXT_LAYOUTS}, not {text_layout!r}")
        self.taxonomy = taxonomy
        self.shared = SharedText() if text_layout == "rtfs" else None

    def make(self, op: Any) -> Any:
        if type(op) is tuple:
            return IsaPairTable(op, self)
        if op == "ft":
            return TextTable(self.shared)
        if op in ISA_OPS:
            return IsaTable(op, self)
        return ConstraintTable(op)

    def begin(self) -> None:
        """A new event (or quad) is being matched."""
        if self.shared is not None:
            self.shared.begin()


class Tables:
    """Constraint tables keyed by (where the variable is, operator)."""

    __slots__ = ("tables",)

    def __init__(self) -> None:
        self.tables: dict[tuple[int, str], Any] = {}

    def put(self, where: int, constraint: Constraint, item: Any, kit: TableKit) -> None:
        table = self.tables.get((where, constraint.op))
        if table is None:
            table = self.tables[(where, constraint.op)] = kit.make(constraint.op)
        table.add(constraint, item)

    def take(self, where: int, constraint: Constraint, item: Any) -> None:
        table = self.tables.get((where, constraint.op))
        if table is not None:
            table.remove(constraint, item)
            if not len(table):
                del self.tables[(where, constraint.op)]


class Trigger(Tables):
    """Under a node: the groups it triggers, and the entries whose constraint on it is tabled."""

    __slots__ = ("groups",)

    def __init__(self) -> None:
        super().__init__()
        self.groups: dict[Any, None] = {}

    def empty(self) -> bool:
        return not self.groups and not self.tables


class Bucket(Tables):
    """Under a node, for CSMA: entries whose patterns[0] it is (unconditional, or tabled)."""

    __slots__ = ("plain",)

    def __init__(self) -> None:
        super().__init__()
        self.plain: dict[Any, None] = {}

    def empty(self) -> bool:
        return not self.plain and not self.tables


def lookup(term: Any, cache: dict[int, Any]) -> tuple[Any, Any]:
    """A bound term's filter value and probe, once per event (`cache` lives as long as the event)."""
    known = cache.get(id(term))
    if known is None:
        value = to_value(term)
        known = cache[id(term)] = (value, probe(value))
    return known
