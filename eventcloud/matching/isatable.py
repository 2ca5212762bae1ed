"""Is-a tables (G-ToPSS's class-taxonomy constraints): entries constrained by a class relation, looked up
through the closure.

An entry whose FILTER has the conjunct `ec:descendantOf(?c, C)` (also what `?x rdf:type/
rdfs:subClassOf* C` becomes), `ec:ancestorOf(?c, C)` or `ec:childOf(?c, C)` is stored under its
class C. For a bound class T the entries whose relation holds are read off, without walking the
taxonomy: descendantOf holds when C is among T's ancestors, childOf when C is among T's parents,
ancestorOf when C is among T's descendants (the closure is precomputed per taxonomy). A value
that is not an IRI makes the test an error, so the FILTER false: no entry.

An entry whose FILTERs also compare another variable with a constant (`?v > 30`: G-ToPSS's value
constraint next to the class one) goes in an `IsaPairTable` instead: per class, a sorted
ConstraintTable of the comparisons, so one lookup per related class and one binary search
yield exactly the entries whose two conjuncts hold (per solution of the group's join, where
both variables are bound).

The tables read the taxonomy through `holder.taxonomy` (the index it belongs to), so swapping
the index's taxonomy takes effect at once; the entries, keyed by their constant class, stay.
"""

from __future__ import annotations

from typing import Any

from eventcloud.matching.constraints import ConstraintTable
from eventcloud.rdf.model import IRI

__all__ = ["ISA_OPS", "IsaTable", "IsaPairTable"]

#: Constraint op -> the Taxonomy method giving the classes C for which the relation holds on T.
ISA_OPS = {"isa:descendant": "ancestors", "isa:child": "parents", "isa:ancestor": "descendants"}


class IsaTable:
    __slots__ = ("op", "holder", "by_class", "size")

    def __init__(self, op: str, holder: Any) -> None:
        self.op = op
        self.holder = holder  # has `.taxonomy`
        self.by_class: dict[str, list[Any]] = {}
        self.size = 0

    def add(self, constraint: Any, item: Any) -> None:
        self.by_class.setdefault(constraint.const.value, []).append(item)
        self.size += 1

    def remove(self, constraint: Any, item: Any) -> bool:
        items = self.by_class.get(constraint.const.value)
        if not items:
            return False
        for at, stored in enumerate(items):
            if stored is item:
                del items[at]
                if not items:
                    del self.by_class[constraint.const.value]
                self.size -= 1
                return True
        return False

    def split(self, value: Any, probed: Any = None) -> tuple[list[Any], list[Any]]:
        """(entries whose relation holds for the class `value`, []): the closure decides exactly."""
        if type(value) is not IRI:
            return [], []
        classes = getattr(self.holder.taxonomy, ISA_OPS[self.op])(value.value)
        by_class = self.by_class
        found: list[Any] = []
        if len(classes) <= len(by_class):
            for cls in classes:
                items = by_class.get(cls)
                if items:
                    found.extend(items)
        else:
            for cls, items in by_class.items():
                if cls in classes:
                    found.extend(items)
        return found, []

    def select(self, value: Any, probed: Any = None) -> list[Any]:
        return self.split(value, probed)[0]

    def entries(self) -> list[Any]:
        return [item for items in self.by_class.values() for item in items]

    def __len__(self) -> int:
        return self.size


class IsaPairTable:
    """Entries with an is-a conjunct and a comparison: under each class, a ConstraintTable of the comparisons."""

    __slots__ = ("op", "holder", "by_class", "size")

    def __init__(self, op: tuple[str, str], holder: Any) -> None:
        self.op = op
        self.holder = holder
        self.by_class: dict[str, ConstraintTable] = {}
        self.size = 0

    def add(self, pair: Any, item: Any) -> None:
        table = self.by_class.get(pair.first.const.value)
        if table is None:
            table = self.by_class[pair.first.const.value] = ConstraintTable(pair.second.op)
        table.add(pair.second, item)
        self.size += 1

    def remove(self, pair: Any, item: Any) -> bool:
        table = self.by_class.get(pair.first.const.value)
        if table is None or not table.remove(pair.second, item):
            return False
        if not len(table):
            del self.by_class[pair.first.const.value]
        self.size -= 1
        return True

    def split_pair(self, cls: Any, value: Any, probed: Any) -> tuple[list[Any], list[Any]]:
        """(entries whose two conjuncts hold for the class `cls` and the value, entries undecided)."""
        if type(cls) is not IRI:
            return [], []
        classes = getattr(self.holder.taxonomy, ISA_OPS[self.op[0]])(cls.value)
        by_class = self.by_class
        exact: list[Any] = []
        maybe: list[Any] = []
        for key in (classes if len(classes) <= len(by_class) else [k for k in by_class if k in classes]):
            table = by_class.get(key)
            if table is not None:
                found, unsure = table.split(value, probed)
                exact.extend(found)
                maybe.extend(unsure)
        return exact, maybe

    def entries(self) -> list[Any]:
        return [item for table in self.by_class.values() for item in table.entries()]

    def __len__(self) -> int:
        return self.size
