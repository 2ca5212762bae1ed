"""Constraint tables: simple FILTER comparisons `?x op constant`, held in sorted per-operator lists.

The idea is the one of RSS filtering on a cluster (Liu et al.: constraint tables): subscriptions
that share a pattern and constrain one of its variables with a constant are kept, per operator,
in a list sorted by the constant, so that one binary search per bound value yields every
subscription whose constraint holds — without evaluating any of them.

SPARQL comparisons are not one total order, so a table is split into *lists* whose keys compare
exactly as SPARQL compares them against a given value (filter_values.equals / compare):

    int and xsd:decimal constants     three lists: scaled integers (exact), and the constants rounded
                                      to xsd:float and to xsd:double (the type promotions of a float or
                                      double value); a value only reads the one its type promotes to
    xsd:float / xsd:double constants  one list each (keyed by the float; NaN is never indexed)
    strings, each language tag        code-point order of the lexical form
    dateTime / date / time            timeline value, with and without timezone in separate lists
    IRIs                              `=` and `!=` only

For a value whose kind matches a list the answer is a slice of the list. For any other pairing
the result of the comparison depends only on the two kinds (a type error, or `=` false), so the
first entry is evaluated once and the whole list is taken or skipped. The one value-dependent
mismatch (dateTimes with and without timezone, ordered within ±14 h) takes the whole list: the
tables only prune, and every FILTER is still evaluated on the candidates they return. Constants
that cannot be indexed exactly (booleans, durations, NaN, unknown datatypes, ordered IRIs) are
not put in tables at all (`indexable` is false): their subscriptions stay unconditional candidates.

Two more kinds of conjuncts are recognised here and tabled elsewhere: `ec:ftcontains(?v, "…")`
(op "ft", value the parsed expression: matching.textindex) and the is-a tests `ec:descendantOf`,
`ec:ancestorOf`, `ec:childOf` with a constant class (ops "isa:…": matching.isatable).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any, Iterable

from eventcloud.sparql.filters.extensions import ANCESTOR_OF, CHILD_OF, DESCENDANT_OF, FTCONTAINS, fulltext_query
from eventcloud.sparql.filters.temporal import SCALE, Temporal
from eventcloud.sparql.filters.values import F32, Dec, ExprError, LangStr, compare, dec_to_double, equals, f32, to_value
from eventcloud.rdf.model import IRI, Literal, Term

__all__ = ["Constraint", "ConstraintTable", "OPS", "Pair", "conjuncts", "holds", "simple_constraints", "probe"]

OPS = ("=", "!=", "<", "<=", ">", ">=")
_FLIP = {"=": "=", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}
_ERRORS = (ExprError, ArithmeticError, ValueError)

#: Preference when a subscription has several simple constraints on one pattern: the most selective.
RANK = {"=": 0, "isa:child": 0, "isa:descendant": 0, "isa:ancestor": 1, "ft": 0, "<": 1, ">": 1, "<=": 1, ">=": 1,
        "!=": 2}
#: Extension ops (tabled by matching.textindex and matching.isatable, never by ConstraintTable).
EXTENSION_OPS = frozenset({"ft", "isa:descendant", "isa:ancestor", "isa:child"})
#: is-a function -> (op with the variable first, op with the variable second)
_ISA = {DESCENDANT_OF: ("isa:descendant", "isa:ancestor"), ANCESTOR_OF: ("isa:ancestor", "isa:descendant"),
        CHILD_OF: ("isa:child", None)}


@dataclass(frozen=True, slots=True)
class Constraint:
    """`?var op value` (the variable on the left; `5 < ?x` is kept as `?x > 5`)."""

    var: str
    op: str
    const: Term
    value: Any  # filter_values value of `const`

    def holds(self, value: Any) -> bool:
        return holds(self.op, value, self.value)

    @property
    def indexable(self) -> bool:
        return self.op in EXTENSION_OPS or _lists_of(self.op, self.value) is not None


@dataclass(frozen=True, slots=True)
class Pair:
    """Two conjuncts tabled together (matching.isatable.IsaPairTable): an is-a test, then a comparison."""

    first: Constraint
    second: Constraint

    @property
    def op(self) -> tuple[str, str]:
        return (self.first.op, self.second.op)


def conjuncts(expr: Any) -> list[Any]:
    """The top-level conjuncts of an expression tree (nested `&&` flattened)."""
    if isinstance(expr, tuple) and expr and expr[0] == "and" and len(expr) == 2 and isinstance(expr[1], tuple):
        return [c for child in expr[1] for c in conjuncts(child)]
    return [expr]


def holds(op: str, a: Any, b: Any) -> bool:
    """The SPARQL comparison `a op b` on filter values, an error meaning false (as in a FILTER)."""
    try:
        if op == "=":
            return equals(a, b)
        if op == "!=":
            return not equals(a, b)
        c = compare(a, b)
    except _ERRORS:
        return False
    if op == "<":
        return c < 0
    if op == ">":
        return c > 0
    if op == "<=":
        return c <= 0
    return c >= 0


def simple_constraints(compiled: Any) -> list[Constraint]:
    """The `?var op constant` conjuncts at the top of a compiled FILTER (each is necessary for it).

    A FILTER `A && B` is true only when both A and B are true (an error in either makes it
    false), so each top-level conjunct of that form is a necessary condition on the variable.
    """
    found: list[Constraint] = []

    def walk(node: Any) -> None:
        if not isinstance(node, tuple) or not node:
            return
        if node[0] == "ext":
            found.extend(_extension(node))
            return
        if node[0] in _FLIP and len(node) == 3:
            left, right = node[1], node[2]
            if _is(left, "var") and _is(right, "const"):
                name, term, op = left[1], right[1], node[0]
            elif _is(left, "const") and _is(right, "var"):
                name, term, op = right[1], left[1], _FLIP[node[0]]
            else:
                return
            if isinstance(name, str) and (type(term) is IRI or type(term) is Literal):
                found.append(Constraint(name, op, term, to_value(term)))

    for conjunct in conjuncts(getattr(compiled, "expr", None)):
        walk(conjunct)
    return found


def _extension(node: tuple) -> list[Constraint]:
    """An ftcontains or is-a conjunct on a variable, as a constraint (or nothing)."""
    iri, args = node[1], node[2]
    if len(args) != 2:
        return []
    left, right = args
    if iri == FTCONTAINS:
        if _is(left, "var") and _is(right, "const"):
            return [Constraint(left[1], "ft", right[1], fulltext_query(args))]
        return []
    ops = _ISA.get(iri)
    if ops is None:
        return []
    if _is(left, "var") and _is(right, "const") and type(right[1]) is IRI:
        return [Constraint(left[1], ops[0], right[1], right[1])]
    if ops[1] is not None and _is(left, "const") and type(left[1]) is IRI and _is(right, "var"):
        return [Constraint(right[1], ops[1], left[1], left[1])]
    return []


def _is(node: Any, kind: str) -> bool:
    return isinstance(node, tuple) and len(node) == 2 and node[0] == kind


# --- kinds and keys ---------------------------------------------------------------------------

# list ids: ("N", "S"|"F"|"D") for int/decimal constants (scaled, as float, as double),
# ("F32",), ("D",), ("str",), ("lang", tag), ("T", class name, has timezone), ("iri",)
_NS, _NF, _ND = ("N", "S"), ("N", "F"), ("N", "D")
_F32, _DBL, _STR, _IRI = ("F32",), ("D",), ("str",), ("iri",)


def _lists_of(op: str, c: Any) -> list[tuple[tuple, Any]] | None:
    """The (list id, key) pairs a constant is stored under, or None when it cannot be indexed."""
    tc = type(c)
    if tc is int:
        d = float(c)
        return [(_NS, c * SCALE), (_NF, f32(d)), (_ND, d)]
    if tc is Dec:
        d = dec_to_double(c.v)
        return [(_NS, c.v), (_NF, f32(d)), (_ND, d)]
    if tc is F32:
        return None if c.v != c.v else [(_F32, c.v)]
    if tc is float:
        return None if c != c else [(_DBL, c)]
    if tc is str:
        return [(_STR, c)]
    if tc is LangStr:
        return [(("lang", c.lang), c.value)]
    if isinstance(c, Temporal):
        return [(("T", tc.__name__, c.tz is not None), c.v)]
    if tc is IRI and op in ("=", "!="):
        return [(_IRI, c.value)]
    return None


def probe(a: Any) -> tuple[tuple, dict[tuple, Any], tuple | None]:
    """For a bound value: the int/decimal list it reads, its key in every list of its own kind,
    and the id prefix of lists it cannot decide (dateTimes across timezone presence)."""
    ta = type(a)
    if ta is int:
        d = float(a)
        return _NS, {_NS: a * SCALE, _F32: f32(d), _DBL: d}, None
    if ta is Dec:
        d = dec_to_double(a.v)
        return _NS, {_NS: a.v, _F32: f32(d), _DBL: d}, None
    if ta is F32:
        if a.v != a.v:
            return _NF, {}, None
        return _NF, {_NF: a.v, _F32: a.v, _DBL: a.v}, None
    if ta is float:
        if a != a:
            return _ND, {}, None
        return _ND, {_ND: a, _F32: a, _DBL: a}, None
    if ta is str:
        return _NS, {_STR: a}, None
    if ta is LangStr:
        return _NS, {("lang", a.lang): a.value}, None
    if isinstance(a, Temporal):
        has_tz = a.tz is not None
        return _NS, {("T", ta.__name__, has_tz): a.v}, ("T", ta.__name__, not has_tz)
    if ta is IRI:
        return _NS, {_IRI: a.value}, None
    return _NS, {}, None


class _Sorted:
    """Parallel sorted lists of keys and entries (entries with equal keys in insertion order)."""

    __slots__ = ("keys", "items", "first")

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.items: list[Any] = []
        # one constraint that is or was in the list: where the outcome depends only on the kinds
        # of the value and of the list's constants, it stands for them all (even once removed)
        self.first: Any = None

    def add(self, key: Any, item: Any) -> None:
        at = bisect_right(self.keys, key)
        self.keys.insert(at, key)
        self.items.insert(at, item)

    def remove(self, key: Any, item: Any) -> bool:
        keys, items = self.keys, self.items
        at, end = bisect_left(keys, key), bisect_right(keys, key)
        while at < end:
            if items[at] is item or items[at] == item:
                del keys[at]
                del items[at]
                return True
            at += 1
        return False

    def select(self, op: str, k: Any) -> Iterable[Any]:
        """Entries whose constant c satisfies `value op c`, the value's key being k."""
        keys, items = self.keys, self.items
        if op == ">":
            return items[:bisect_left(keys, k)]
        if op == "<":
            return items[bisect_right(keys, k):]
        if op == ">=":
            return items[:bisect_right(keys, k)]
        if op == "<=":
            return items[bisect_left(keys, k):]
        lo, hi = bisect_left(keys, k), bisect_right(keys, k)
        if op == "=":
            return items[lo:hi]
        return items[:lo] + items[hi:]


class ConstraintTable:
    """All entries constrained with one operator on one variable position of one pattern."""

    __slots__ = ("op", "lists", "size")

    def __init__(self, op: str) -> None:
        self.op = op
        self.lists: dict[tuple, _Sorted] = {}
        self.size = 0

    def add(self, constraint: Constraint, item: Any) -> None:
        placed = _lists_of(self.op, constraint.value)
        if placed is None:
            raise ValueError(f"constraint {constraint} cannot be indexed")
        for list_id, key in placed:
            target = self.lists.get(list_id)
            if target is None:
                target = self.lists[list_id] = _Sorted()
                target.first = constraint
            target.add(key, item)
        self.size += 1

    def remove(self, constraint: Constraint, item: Any) -> bool:
        placed = _lists_of(self.op, constraint.value)
        if placed is None:
            return False
        found = False
        for list_id, key in placed:
            target = self.lists.get(list_id)
            if target is not None and target.remove(key, item):
                found = True
                if not target.keys:
                    del self.lists[list_id]
        if found:
            self.size -= 1
        return found

    def select(self, value: Any, probed: tuple[tuple, dict[tuple, Any], tuple | None] | None = None) -> list[Any]:
        """Every entry whose constraint holds for `value` — plus, where a list cannot decide, all of it."""
        exact, maybe = self.split(value, probed)
        return exact + maybe if maybe else exact

    def split(self, value: Any, probed: tuple[tuple, dict[tuple, Any], tuple | None] | None = None
              ) -> tuple[list[Any], list[Any]]:
        """(entries whose constraint holds for `value`, entries the table cannot decide)."""
        view, keys, undecided = probed if probed is not None else probe(value)
        op = self.op
        exact: list[Any] = []
        maybe: list[Any] = []
        for list_id, entries in self.lists.items():
            if list_id[0] == "N" and list_id != view:
                continue  # the same constants, rounded for another promotion
            key = keys.get(list_id, _MISSING)
            if key is not _MISSING:
                exact.extend(entries.select(op, key))
            elif undecided is not None and list_id == undecided:
                maybe.extend(entries.items)
            elif entries.first.holds(value):  # the outcome depends only on the two kinds
                exact.extend(entries.items)
        return exact, maybe

    def entries(self) -> list[Any]:
        """Every entry of the table (for a caller that stops pruning)."""
        return [item for items in self.lists.values() for item in items.items]

    def __len__(self) -> int:
        return self.size


_MISSING = object()

