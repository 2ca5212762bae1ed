"""One-time SPARQL queries evaluated where the data is (pure: plans and merges, no I/O).

A query over one triple pattern (with FILTERs, in a `GRAPH` or not) has solutions that each
come from one quad, and a quad lives on one peer: the owner of its point. So each peer of the
pattern's box can run the query on its own quads and the entry peer only merges:

* `SELECT` (with `DISTINCT`, `REDUCED`, `LIMIT`; no `ORDER BY`, no `OFFSET`): the union of the
  peers' rows, deduplicated for `DISTINCT`; with `LIMIT n` each peer stops after n rows (if
  one peer has n distinct rows the union has them; if none has, the union is all of them);
* `ASK`: true if any peer says true;
* aggregates `COUNT`, `SUM`, `MIN`, `MAX`, `AVG` (not `DISTINCT`) with or without `GROUP BY`
  variables, no `HAVING`: each peer aggregates its rows per group and the entry combines
  partial results (counts and sums add up, minima and maxima compare, an average is the sum
  of the sums over the sum of the counts: peers run the query once more with `AVG` read as
  `SUM` and once as `COUNT`).

Anything else (joins of several patterns, `ORDER BY`, `OFFSET`, `CONSTRUCT`, property paths,
sub-queries, …) gets `None`: the entry peer gathers the candidate quads and evaluates the query
itself (`peers.queries.operations`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from rdflib import Variable
from rdflib.paths import Path as RPath
from rdflib.plugins.sparql.parserutils import CompValue

__all__ = ["Pushdown", "plan_pushdown", "merge_select", "merge_aggregates", "SelectMerge", "MERGEABLE",
           "select_star_order"]

XSD = "http://www.w3.org/2001/XMLSchema#"
MERGEABLE = {"Aggregate_Count": "count", "Aggregate_Sum": "sum", "Aggregate_Min": "min", "Aggregate_Max": "max",
             "Aggregate_Avg": "avg"}
_INTEGERS = {XSD + t for t in ("integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
                               "negativeInteger", "nonPositiveInteger", "unsignedLong", "unsignedInt",
                               "unsignedShort", "unsignedByte")}
_FLOATS = {XSD + "double", XSD + "float"}
_AVG = re.compile(r"\bAVG\s*\(", re.IGNORECASE)

Row = dict[str, dict[str, str]]   # variable -> SPARQL JSON term


@dataclass(frozen=True)
class Pushdown:
    """How the peers answer a query, and how the entry peer merges their answers."""

    form: str                                    # "select" | "ask" | "aggregate"
    variables: tuple[str, ...]                   # the result's variables, in order
    limit: int | None = None                     # select: rows each peer sends at most
    distinct: bool = False
    group: tuple[str, ...] = ()                  # aggregate: the GROUP BY variables
    aggregates: tuple[tuple[str, str], ...] = ()  # aggregate: (variable, count|sum|min|max|avg)
    texts: tuple[str, ...] = ()                  # the queries each peer runs (avg: as SUM, then as COUNT)


_STAR = re.compile(r"\bSELECT\s+(?:(?:DISTINCT|REDUCED)\s+)?\*", re.IGNORECASE)
_VARIABLE = re.compile(r"[?$]([A-Za-z0-9_\u00B7\u00C0-\uFFFF]+)")


def select_star_order(text: str, variables: tuple[str, ...]) -> tuple[str, ...]:
    """`SELECT *`'s variables in the order the query first names them (rdflib gives them in a
    set's order, which differs from one process to the next); other projections unchanged."""
    if not _STAR.search(text):
        return variables
    first: dict[str, int] = {}
    for at, match in enumerate(_VARIABLE.finditer(text)):
        first.setdefault(match.group(1), at)
    return tuple(sorted(variables, key=lambda v: (first.get(v, len(first)), v)))


def _single_pattern(node: Any) -> bool:
    """FILTER* over (GRAPH over)? one triple pattern without a property path."""
    while isinstance(node, CompValue) and node.name == "Filter":
        node = node.p
    if isinstance(node, CompValue) and node.name == "Graph":
        node = node.p
    if not (isinstance(node, CompValue) and node.name == "BGP"):
        return False
    triples = node.get("triples") or []
    return len(triples) == 1 and not isinstance(triples[0][1], RPath)


def plan_pushdown(text: str, algebra: Any) -> Pushdown | None:
    """The pushdown plan of a parsed query (`prepareQuery(text).algebra`), or None to gather."""
    if algebra.get("datasetClause"):
        return None
    if algebra.name == "AskQuery":
        node = algebra.p
        if node.name == "Project":
            node = node.p
        return Pushdown("ask", (), texts=(text,)) if _single_pattern(node) else None
    if algebra.name != "SelectQuery":
        return None
    node, limit, distinct = algebra.p, None, False
    if node.name == "Slice":
        if node.get("start") or node.get("length") is None:
            return None
        limit, node = int(node.length), node.p
    if node.name in ("Distinct", "Reduced"):
        distinct, node = True, node.p
    if node.name != "Project":
        return None
    variables = select_star_order(text, tuple(str(v) for v in node.PV))
    node = node.p
    extends: dict[str, Any] = {}
    while node.name == "Extend":
        extends[str(node.var)] = node.expr
        node = node.p
    if node.name != "AggregateJoin":
        if extends or not _single_pattern(node):
            return None
        return Pushdown("select", variables, limit=limit, distinct=distinct, texts=(text,))
    group = node.p
    if group.name != "Group" or not _single_pattern(group.p):
        return None
    keys = tuple(str(v) for v in (group.expr or ()))
    if group.expr and not all(isinstance(v, Variable) for v in group.expr):
        return None
    kinds: dict[str, tuple[str, str | None]] = {}   # result variable -> (kind, sampled variable)
    for aggregate in node.A:
        if aggregate.name == "Aggregate_Sample":
            kinds[str(aggregate.res)] = ("sample", str(aggregate.vars))
        elif aggregate.name in MERGEABLE and not aggregate.get("distinct"):
            kinds[str(aggregate.res)] = (MERGEABLE[aggregate.name], None)
        else:
            return None
    aggregates = []
    for name in variables:
        expr = extends.get(name)
        if not isinstance(expr, Variable) or str(expr) not in kinds:
            return None
        kind, sampled = kinds[str(expr)]
        if kind == "sample":
            if sampled != name or name not in keys:
                return None
        else:
            aggregates.append((name, kind))
    if any(k == "avg" for _, k in aggregates):
        texts = (_AVG.sub("SUM(", text), _AVG.sub("COUNT(", text))
    else:
        texts = (text,)
    return Pushdown("aggregate", variables, limit=limit, distinct=distinct, group=keys,
                    aggregates=tuple(aggregates), texts=texts)


# --- merging the peers' answers ------------------------------------------------------------------

class SelectMerge:
    """The union of the peers' SELECT rows as they arrive: deduplicated for `DISTINCT`, and cut
    at `LIMIT` (then `done`: the peers' rest is not needed)."""

    def __init__(self, plan: Pushdown) -> None:
        self.plan = plan
        self.taken = 0
        self._seen: set[frozenset] = set()

    @property
    def done(self) -> bool:
        return self.plan.limit is not None and self.taken >= self.plan.limit

    def take(self, rows: list[Row]) -> list[Row]:
        """Those of `rows` that belong to the answer."""
        out: list[Row] = []
        for row in rows:
            if self.done:
                break
            if self.plan.distinct:
                key = frozenset((k, tuple(sorted(v.items()))) for k, v in row.items())
                if key in self._seen:
                    continue
                self._seen.add(key)
            out.append(row)
            self.taken += 1
        return out


def merge_select(plan: Pushdown, answers: list[list[Row]]) -> list[Row]:
    merge = SelectMerge(plan)
    return [row for answer in answers for row in merge.take(answer)]


def _number(term: dict[str, str] | None) -> int | Decimal | float | None:
    if term is None or term.get("type") != "literal":
        return None
    datatype, value = term.get("datatype", ""), term.get("value", "")
    try:
        if datatype in _INTEGERS:
            return int(value)
        if datatype == XSD + "decimal":
            return Decimal(value)
        if datatype in _FLOATS:
            return float(value)
    except (ValueError, InvalidOperation):
        return None
    return None


def _literal(value: int | Decimal | float) -> dict[str, str]:
    if isinstance(value, bool) or isinstance(value, int):
        return {"type": "literal", "value": str(value), "datatype": XSD + "integer"}
    if isinstance(value, float):
        return {"type": "literal", "value": repr(value), "datatype": XSD + "double"}
    text = format(value.normalize(), "f") if value == value.to_integral() else format(value, "f")
    return {"type": "literal", "value": text if "." in text else text + ".0", "datatype": XSD + "decimal"}


def _add(a: int | Decimal | float, b: int | Decimal | float) -> int | Decimal | float:
    if isinstance(a, float) or isinstance(b, float):
        return float(a) + float(b)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return Decimal(a) + Decimal(b)
    return a + b


def _order_key(term: dict[str, str]) -> tuple:
    """SPARQL's order on the terms an aggregate compares: numbers by value, then the rest by kind
    (blank node, IRI, literal) and lexical form."""
    number = _number(term)
    if number is not None:
        return (0, float(number), "")
    rank = {"bnode": 1, "uri": 2}.get(term.get("type", ""), 3)
    return (rank, 0.0, term.get("value", ""))


def merge_aggregates(plan: Pushdown, answers: list[list[list[Row]]]) -> list[Row]:
    """`answers[peer][text]` are one peer's rows for each of `plan.texts`; the merged rows."""
    groups: dict[tuple, dict[str, Any]] = {}
    order: list[tuple] = []
    for per_text in answers:
        main = per_text[0]
        counts = per_text[1] if len(per_text) > 1 else [{} for _ in main]
        for row, count_row in zip(main, counts):
            key = tuple(tuple(sorted(row[k].items())) if k in row else None for k in plan.group)
            if key not in groups:
                groups[key] = {"keys": {k: row[k] for k in plan.group if k in row}}
                order.append(key)
            state = groups[key]
            for name, kind in plan.aggregates:
                term = row.get(name)
                if state.get(name, "") is None:
                    continue          # an error in some peer's part: the aggregate is unbound
                if kind == "count" or kind == "sum" or kind == "avg":
                    value = _number(term)
                    if value is None:
                        state[name] = None
                        continue
                    state[name] = _add(state[name], value) if name in state else value
                    if kind == "avg":
                        n = _number(count_row.get(name)) or 0
                        state[name + "\0n"] = state.get(name + "\0n", 0) + n
                elif term is not None:
                    best = state.get(name)
                    if best is None or (_order_key(term) < _order_key(best) if kind == "min"
                                        else _order_key(term) > _order_key(best)):
                        state[name] = term
    rows = []
    for key in order:
        state = groups[key]
        row: Row = dict(state["keys"])
        for name, kind in plan.aggregates:
            value = state.get(name)
            if value is None:
                continue
            if kind in ("min", "max"):
                row[name] = value
            elif kind == "avg":
                n = state.get(name + "\0n", 0)
                row[name] = _literal(Decimal(0) if n == 0 else
                                     (value / n if isinstance(value, float) else Decimal(value) / Decimal(n)))
            else:
                row[name] = _literal(value)
        rows.append(row)
        if plan.limit is not None and len(rows) >= plan.limit:
            break
    return rows
