"""Residual predicates: FILTER conjuncts of subscriptions that call registered operators.

A subscription whose FILTERs call an operator leaves, after the shared index's joins, a
*residual*: every conjunct of its FILTERs (the top-level `&&` operands; a FILTER holds iff each
of them holds, errors counting as false). Each conjunct is a `Template`: the expression with its
variables renamed ?v0, ?v1, … in order of first appearance, so the same conjunct in two
subscriptions under other variable names is one template. A *predicate* is a template with
the values its variables take in one solution: (template, values). Predicates are what seed
001 shares and orders: the same predicate is evaluated once per event whichever subscriptions
contain it, built-in conjuncts (`?v > 3`, `STRLEN(?t) < 40`) included, so a cheap conjunct shared
by many subscriptions can rule out an expensive call.

`Template.text` (the renamed expression as SPARQL) is the stable name statistics are kept under,
across peers and runs (eventcloud.matching.statistics, the Spark statistics job).
"""

from __future__ import annotations

from typing import Any

from eventcloud.matching.constraints import conjuncts
from eventcloud.sparql.filters.compiler import CompiledFilter, render
from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet
from eventcloud.sparql.subscription import Subscription

__all__ = ["Template", "Templates", "Occurrence", "BUILTIN_COST"]

#: Estimated microseconds of a conjunct with no operator call (a closure over SPARQL values).
BUILTIN_COST = 0.5


def _rename(expr: Any, names: dict[str, str]) -> Any:
    """The expression with variables renamed to ?v0, ?v1, … in order of first appearance."""
    kind = expr[0]
    if kind in ("var", "bound"):
        name = names.setdefault(expr[1], f"v{len(names)}")
        return (kind, name)
    if kind == "const":
        return expr
    return tuple(_rename(part, names) if _is_expr(part) else
                 (tuple(_rename(e, names) for e in part) if _is_exprs(part) else part)
                 for part in expr)


def _is_expr(part: Any) -> bool:
    return isinstance(part, tuple) and bool(part) and isinstance(part[0], str)


def _is_exprs(part: Any) -> bool:
    return isinstance(part, tuple) and all(_is_expr(e) for e in part) and bool(part)


class Template:
    """One conjunct up to variable names: compiled once, shared by every subscription having it."""

    __slots__ = ("key", "text", "slots", "calls", "check", "hint", "users")

    def __init__(self, key: tuple, expr: Any, base: str | None, operators: OperatorSet, slots: int) -> None:
        self.key = key
        self.text = render(expr)
        self.slots = tuple(f"v{i}" for i in range(slots))
        self.check = CompiledFilter(expr, base, None, operators)
        self.calls = tuple(sorted(self.check.calls))
        hints = [operators[iri].selectivity for iri in self.calls if operators[iri].selectivity is not None]
        self.hint = min(hints) if hints else None
        self.users = 0

    def holds(self, values: tuple) -> bool:
        """The conjunct as a FILTER on one solution's values (None: unbound); may raise NeedCall."""
        return self.check({slot: v for slot, v in zip(self.slots, values) if v is not None})

    def __repr__(self) -> str:
        return f"Template({self.text!r})"


#: One conjunct of one subscription: its template and the subscription's variable for each slot.
Occurrence = tuple[Template, tuple[str, ...]]


class Templates:
    """The interned templates of one index (by renamed expression and base IRI)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple, Template] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def residual(self, sub: Subscription) -> tuple[Occurrence, ...]:
        """The conjuncts of a subscription that calls operators (empty for one that calls none)."""
        if not sub.uses_operators:
            return ()
        found: list[Occurrence] = []
        for compiled in sub.filters:
            operators = compiled.operators if compiled.calls else next(
                (f.operators for f in sub.filters if f.calls), NO_OPERATORS)
            for conjunct in conjuncts(compiled.expr):
                names: dict[str, str] = {}
                renamed = _rename(conjunct, names)
                key = (renamed, compiled.base)
                template = self._by_key.get(key)
                if template is None:
                    template = self._by_key[key] = Template(key, renamed, compiled.base, operators, len(names))
                template.users += 1
                found.append((template, tuple(names)))
        return tuple(found)

    def release(self, occurrences: tuple[Occurrence, ...]) -> None:
        for template, _ in occurrences:
            template.users -= 1
            if template.users == 0:
                del self._by_key[template.key]
