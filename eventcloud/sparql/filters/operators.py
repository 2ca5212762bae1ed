"""Pluggable operators: Python functions a FILTER calls by IRI, like a SPARQL function.

    PREFIX geo: <http://eventcloud.io/ns/geo#>
    FILTER(geo:withinRadius(?lat, ?long, 56.15, 10.20, 2000))

An `Operator` is a function registered under an IRI with a declared cost (microseconds per call,
what the evaluation order weighs it by) and optionally a selectivity hint (the probability that
a FILTER built on it holds, used until statistics are measured). An `OperatorSet` is what one
peer can call; every peer of an overlay has the same one (checked at join). Subscriptions are
parsed against it: a call of an IRI it does not hold is refused at subscribe time.

Arguments reach the function as plain Python values (int, float, str, bool; IRIs as their
string), and its result (bool, int, float or str) goes back into the expression. A function
that raises, returns something else or exceeds its time budget is an expression error: the
FILTER is false for that event.

**Shared evaluation.** A call is identified by (operator IRI, argument values after binding).
While a `CallTable` is *active* (`active(table)`), every call goes through it: a result known
for the event is reused, so each distinct call is evaluated at most once per table (the peer
keeps one table per event). A call the table does not know raises `NeedCall`: the pure
evaluation stops, the peer evaluates the call where it should (off the event loop, under a
time budget) and runs the step again; pure steps have no side effects, so repeating them is
safe. Cheap operators can be evaluated in place through the table's `run_inline` (the peer's
timed runner). With no table active a call is evaluated directly, which is what evaluating a
subscription alone means (the reference semantics the oracle tests use).
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from eventcloud.errors import ErrorCode, InputError
from eventcloud.rdf.model import IRI, Literal
from eventcloud.sparql.filters.values import Dec, ExprError, F32, LangStr, dec_to_double

__all__ = [
    "Operator", "OperatorSet", "OperatorError", "CallTable", "NeedCall", "FAILED", "active", "current_table",
    "python_args", "to_expression_value", "call_operator", "NO_OPERATORS",
]


class OperatorError(InputError):
    """An operator definition that cannot be registered (bad IRI, cost or arity)."""

    default_code = ErrorCode.BAD_REQUEST


@dataclass(frozen=True, eq=False)
class Operator:
    """One registered function. `cost`: declared microseconds per call; `selectivity`: the
    probability a FILTER on it holds (None: unknown); `arity`: (min, max) arguments."""

    iri: str
    function: Callable[..., Any]
    cost: float = 1.0
    selectivity: float | None = None
    arity: tuple[int, int] = (0, 64)
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.iri, str) or ":" not in self.iri:
            raise OperatorError(f"an operator needs an absolute IRI, got {self.iri!r}")
        if not callable(self.function):
            raise OperatorError(f"operator {self.iri}: {self.function!r} is not callable")
        if not (isinstance(self.cost, (int, float)) and self.cost > 0):
            raise OperatorError(f"operator {self.iri}: the cost must be a positive number, got {self.cost!r}")
        if self.selectivity is not None and not 0 <= self.selectivity <= 1:
            raise OperatorError(f"operator {self.iri}: the selectivity must be in [0, 1], got {self.selectivity!r}")
        low, high = self.arity
        if not 0 <= low <= high:
            raise OperatorError(f"operator {self.iri}: bad arity {self.arity!r}")
        if not self.name:
            object.__setattr__(self, "name", self.iri.rsplit("#", 1)[-1].rsplit("/", 1)[-1])

    @property
    def signature(self) -> tuple[str, float]:
        """What two peers must agree on: the IRI and the declared cost."""
        return (self.iri, float(self.cost))


class OperatorSet(Mapping[str, Operator]):
    """The operators one peer can call, by IRI (immutable). Two sets are equal when they hold the
    same functions under the same IRIs and costs (what parsed subscriptions may be shared for);
    peers of one overlay are compared on `names` only, since their functions are their own."""

    def __init__(self, operators: Iterable[Operator] = ()) -> None:
        found: dict[str, Operator] = {}
        for op in operators:
            if not isinstance(op, Operator):
                raise OperatorError(f"not an Operator: {op!r}")
            if op.iri in found and found[op.iri] is not op:
                raise OperatorError(f"two operators are registered under {op.iri}")
            found[op.iri] = op
        self._ops = dict(sorted(found.items()))
        self._key = tuple((*op.signature, op.function) for op in self._ops.values())

    def __getitem__(self, iri: str) -> Operator:
        return self._ops[iri]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OperatorSet) and self._key == other._key

    def __repr__(self) -> str:
        return f"OperatorSet({', '.join(self._ops)})"

    @property
    def names(self) -> tuple[str, ...]:
        """The IRIs, sorted: what a joining peer is compared on."""
        return tuple(self._ops)

    def merged(self, more: Iterable[Operator]) -> "OperatorSet":
        return OperatorSet([*self._ops.values(), *more])


NO_OPERATORS = OperatorSet()


# --- values in and out ------------------------------------------------------------------------

def python_args(values: tuple) -> tuple:
    """Expression values as the plain Python values an operator function receives."""
    out = []
    for v in values:
        tv = type(v)
        if tv is int or tv is float or tv is str or tv is bool:
            out.append(v)
        elif tv is Dec:
            out.append(dec_to_double(v.v))
        elif tv is F32:
            out.append(v.v)
        elif tv is LangStr:
            out.append(v.value)
        elif tv is IRI:
            out.append(v.value)
        elif tv is Literal:
            out.append(v.lexical)
        else:
            out.append(str(v))
    return tuple(out)


def to_expression_value(result: Any) -> Any:
    """An operator's result as an expression value; ExprError for anything else."""
    tr = type(result)
    if tr is bool or tr is int or tr is str:
        return result
    if tr is float:
        return result
    raise ExprError(f"an operator returned {tr.__name__}, not a bool, number or string")


def call_operator(op: Operator, values: tuple) -> Any:
    """Evaluate one call directly (no table): the function's result as an expression value."""
    try:
        result = op.function(*python_args(values))
    except ExprError:
        raise
    except Exception as exc:  # an operator's own failure is the FILTER's error, never the caller's
        raise ExprError(f"operator {op.name} failed: {type(exc).__name__}: {exc}") from None
    return to_expression_value(result)


# --- per-event shared evaluation -------------------------------------------------------------

class _Failed:
    __slots__ = ()

    def __repr__(self) -> str:
        return "FAILED"


#: The recorded outcome of a call that raised, returned garbage or ran past its budget.
FAILED: Any = _Failed()
_MISSING = object()


class NeedCall(Exception):
    """A call the active table has no result for: evaluate it (`op`, `values`), put it, retry."""

    def __init__(self, op: Operator, values: tuple) -> None:
        super().__init__(op.iri)
        self.op = op
        self.values = values

    @property
    def key(self) -> tuple:
        return (self.op.iri, self.values)


@dataclass
class CallTable:
    """The operator results of one event on one peer: each distinct call evaluated once.

    `run_inline(op, values)` (optional) evaluates a cheap operator in place and returns its
    outcome (a value or FAILED); `inline(op)` says which operators it takes.
    """

    run_inline: Callable[[Operator, tuple], Any] | None = None
    inline: Callable[[Operator], bool] = lambda op: False
    results: dict[tuple, Any] = field(default_factory=dict)

    def lookup(self, op: Operator, values: tuple) -> Any:
        key = (op.iri, values)
        found = self.results.get(key, _MISSING)
        if found is _MISSING:
            if self.run_inline is None or not self.inline(op):
                raise NeedCall(op, values)
            try:
                found = self.run_inline(op, values)
            except ExprError:
                found = FAILED
            self.results[key] = found
        if found is FAILED:
            raise ExprError(f"operator {op.name} failed for this event")
        return found

    def put(self, key: tuple, outcome: Any) -> None:
        self.results[key] = outcome

    def __len__(self) -> int:
        return len(self.results)


_ACTIVE: contextvars.ContextVar[CallTable | None] = contextvars.ContextVar("eventcloud_call_table", default=None)


def current_table() -> CallTable | None:
    return _ACTIVE.get()


@contextmanager
def active(table: CallTable | None) -> Iterator[CallTable | None]:
    """Route every operator call made inside through `table` (context-local: each task has its own)."""
    token = _ACTIVE.set(table)
    try:
        yield table
    finally:
        _ACTIVE.reset(token)


def compile_call(op: Operator, arguments: list[Callable[[Mapping[str, Any]], Any]]) -> Callable[[Mapping[str, Any]], Any]:
    """The closure a FILTER runs for one operator call (its arguments already compiled)."""
    get = _ACTIVE.get
    lookup_direct = call_operator

    def call(b: Mapping[str, Any]) -> Any:
        values = tuple(a(b) for a in arguments)
        table = get()
        if table is None:
            return lookup_direct(op, values)
        return table.lookup(op, values)
    return call
