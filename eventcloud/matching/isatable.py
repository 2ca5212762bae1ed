"""Is-a tables (seed 000, G-ToPSS): entries constrained by a class relation, looked up through the closure.

An entry whose FILTER has the conjunct `ec:descendantOf(?c, C)` (also what `?x rdf:type/
rdfs:subClassOf* C` becomes), `ec:ancestorOf(?c, C)` or `ec:childOf(?c, C)` is stored under its
class C. For a bound class T the entries whose relation holds are read off, without walking the
taxonomy: descendantOf holds when C is among T's ancestors, childOf when C is among T's parents,
ancestorOf when C is among T's descendants (the closure is precomputed per taxonomy). A value
that is not an IRI makes the test an error, so the FILTER false: no entry.

The table reads the taxonomy through `holder.taxonomy` (the index it belongs to), so swapping
the index's taxonomy takes effect at once; the entries, keyed by their constant class, stay.
"""

from __future__ import annotations

from typing import Any

from eventcloud.rdf.model import IRI

__all__ = ["ISA_OPS", "IsaTable"]

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
