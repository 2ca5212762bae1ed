"""One-time SPARQL queries evaluated where the data is (pure: plans and merges, no I/O).

A query over one triple pattern (with FILTERs, in a `GRAPH` or not) has solutions that each
come from one quad, and a quad lives on one peer: the owner of its point. So each peer of the
pattern's box can run the query on its own quads and the entry peer only merges:

* `SELECT` (with `DISTINCT`, `REDUCED`, `LIMIT`, `OFFSET`, and `ORDER BY` of projected
  variables): the union of the peers' rows, streamed, deduplicated for `DISTINCT`; with
  `LIMIT n OFFSET m` each peer sends its first n + m rows (in the query's order, chosen in
  Python: `top_rows`), and the entry merges, sorts, skips m and keeps n;
* `ASK`: true if any peer says true;
* aggregates `COUNT`, `SUM`, `MIN`, `MAX`, `AVG` (not `DISTINCT`) with or without `GROUP BY`
  variables, no `HAVING`: each peer aggregates its rows per group and the entry combines
  partial results (counts and sums add up, minima and maxima compare, an average is the sum
  of the sums over the sum of the counts: peers run the query once more with `AVG` read as
  `SUM` and once as `COUNT`); `ORDER BY`, `OFFSET` and `LIMIT` apply to the merged groups;
* `COUNT(DISTINCT ?x)` alone: each peer sends its distinct values of ?x, the entry counts them
  once each.

Anything else (joins of several patterns, ordering by an expression, `CONSTRUCT`, property paths,
sub-queries, …) gets `None`: the entry peer gathers the candidate quads and evaluates the query
itself (`peers.queries.operations`).
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from functools import cmp_to_key
from typing import Any, Iterable

from rdflib import Variable
from rdflib.paths import Path as RPath
from rdflib.plugins.sparql.parserutils import CompValue

__all__ = ["Pushdown", "plan_pushdown", "merge_select", "merge_aggregates", "SelectMerge", "MERGEABLE",
           "select_star_order", "selects_star", "finish", "count_distinct", "distinct_values", "top_rows"]

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

    form: str                                    # "select" | "ask" | "aggregate" | "count_distinct"
    variables: tuple[str, ...]                   # the result's variables, in order
    limit: int | None = None                     # rows of the answer at most (after `offset`)
    distinct: bool = False
    group: tuple[str, ...] = ()                  # aggregate: the GROUP BY variables (count_distinct: the counted one)
    aggregates: tuple[tuple[str, str], ...] = ()  # aggregate: (variable, count|sum|min|max|avg)
    texts: tuple[str, ...] = ()                  # the queries each peer runs (avg: as SUM, then as COUNT)
    offset: int = 0                              # rows of the merged answer skipped first
    order: tuple[tuple[str, bool], ...] = ()     # ORDER BY (variable, descending), applied at the entry
    peer_limit: int | None = None                # rows each peer sends at most

    @property
    def streams(self) -> bool:
        """Whether merged rows can be passed on as they come (no order to restore)."""
        return self.form == "select" and not self.order


# --- the query's text, read past IRIs, strings and comments ------------------------------------

_IRI = r"<[^<>\"{}|^`\\\s]*>"
_LONG_STRINGS = [r"'''(?:[^'\\]|\\.|'(?!''))*'''", r'"""(?:[^"\\]|\\.|"(?!""))*"""']
_STRINGS = [r"'(?:[^'\\\n]|\\.)*'", r'"(?:[^"\\\n]|\\.)*"']
_TOKENS = re.compile("|".join([_IRI, *_LONG_STRINGS, *_STRINGS, r"#[^\n]*", r"[{}]", r"[A-Za-z_]+"]))


def _top_level_words(text: str) -> list[tuple[int, str, int]]:
    """(position, token, brace depth before it) of each brace and word outside IRIs, strings
    and comments."""
    out, depth = [], 0
    for match in _TOKENS.finditer(text):
        token = match.group(0)
        if token == "{":
            out.append((match.start(), token, depth))
            depth += 1
        elif token == "}":
            depth -= 1
            out.append((match.start(), token, depth))
        elif token[0].isalpha() or token[0] == "_":
            out.append((match.start(), token.upper(), depth))
    return out


def _without_modifiers(text: str) -> str | None:
    """The query without its ORDER BY, LIMIT and OFFSET (None if it has a trailing VALUES
    block, or is not shaped as expected)."""
    words = _top_level_words(text)
    closes = [at for at, token, depth in words if token == "}" and depth == 0]
    if not closes:
        return None
    after = [(at, token) for at, token, depth in words if depth == 0 and at > closes[0]]
    if any(token == "VALUES" for _, token in after):
        return None
    cut = [at for at, token in after if token in ("ORDER", "LIMIT", "OFFSET")]
    return text[:cut[0]] if cut else text


def _distinct_values_text(text: str, variable: str) -> str | None:
    """`SELECT DISTINCT ?variable WHERE <the query's group>`, with the query's prologue."""
    words = _top_level_words(text)
    select = next((at for at, token, depth in words if token == "SELECT" and depth == 0), None)
    opens = [at for at, token, depth in words if token == "{" and depth == 0]
    closes = [at for at, token, depth in words if token == "}" and depth == 0]
    if select is None or not opens or not closes or opens[0] < select:
        return None
    return f"{text[:select]}SELECT DISTINCT ?{variable} WHERE {text[opens[0]:closes[0] + 1]}"


def _order(node: Any, variables: tuple[str, ...]) -> tuple[tuple[str, bool], ...] | None:
    """ORDER BY of projected variables only, as (variable, descending); None otherwise."""
    order = []
    for condition in node.expr:
        expr = condition.expr if isinstance(condition, CompValue) else condition
        if not isinstance(expr, Variable) or str(expr) not in variables:
            return None
        descending = isinstance(condition, CompValue) and dict.get(condition, "order") == "DESC"
        order.append((str(expr), descending))
    return tuple(order)


_STAR = re.compile(r"\bSELECT\s+(?:(?:DISTINCT|REDUCED)\s+)?\*", re.IGNORECASE)
_VARIABLE = re.compile(r"[?$]([A-Za-z0-9_\u00B7\u00C0-\uFFFF]+)")


def selects_star(text: str) -> bool:
    """Whether the query projects `*` (its columns are then ours to order)."""
    return bool(_STAR.search(text))


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
    node, limit, offset, distinct = algebra.p, None, 0, False
    if node.name == "Slice":
        length, start = dict.get(node, "length"), dict.get(node, "start")   # (CompValue.get differs)
        limit = None if length is None else int(length)
        offset, node = int(start or 0), node.p
    if node.name in ("Distinct", "Reduced"):
        distinct, node = True, node.p
    if node.name != "Project":
        return None
    variables = select_star_order(text, tuple(str(v) for v in node.PV))
    node = node.p
    order: tuple[tuple[str, bool], ...] = ()
    if node.name == "OrderBy":
        found = _order(node, variables)
        if found is None:
            return None
        order, node = found, node.p
    extends: dict[str, Any] = {}
    while node.name == "Extend":
        extends[str(node.var)] = node.expr
        node = node.p
    bare = _without_modifiers(text)
    if bare is None:
        return None
    if node.name != "AggregateJoin":
        if extends or not _single_pattern(node):
            return None
        # each peer sends the first offset + limit rows of its own answer (in the query's order)
        # (an order is never left to the store: pyoxigraph 0.5.13 aborts the process sorting some
        # mixed literals, "comparison function does not correctly implement a total order";
        # peers keep their first rows in Python, `top_rows`, and the entry sorts the merge)
        wanted = None if limit is None else offset + limit
        peer_text = text if not (offset or order) else bare + ("" if order or wanted is None else f" LIMIT {wanted}")
        return Pushdown("select", variables, limit=limit, distinct=distinct, texts=(peer_text,), offset=offset,
                        order=order, peer_limit=wanted)
    group = node.p
    if group.name != "Group" or not _single_pattern(group.p):
        return None
    keys = tuple(str(v) for v in (group.expr or ()))
    if group.expr and not all(isinstance(v, Variable) for v in group.expr):
        return None
    counted = _count_distinct(node, variables, extends, keys, text)
    if counted is not None:
        return replace(counted, limit=limit, offset=offset)
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
    # the peers aggregate every group (an order or a limit applies to the merged groups only)
    if any(k == "avg" for _, k in aggregates):
        texts = (_AVG.sub("SUM(", bare), _AVG.sub("COUNT(", bare))
    else:
        texts = (bare,)
    return Pushdown("aggregate", variables, limit=limit, distinct=distinct, group=keys,
                    aggregates=tuple(aggregates), texts=texts, offset=offset, order=order)


def _count_distinct(node: Any, variables: tuple[str, ...], extends: dict[str, Any], keys: tuple[str, ...],
                    text: str) -> Pushdown | None:
    """`SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE <one pattern>`: each peer sends its distinct
    values of ?x (streamed), the entry counts the values no peer sent before."""
    if keys or len(node.A) != 1 or len(variables) != 1:
        return None
    aggregate = node.A[0]
    if aggregate.name != "Aggregate_Count" or not aggregate.get("distinct") or not isinstance(aggregate.vars, Variable):
        return None
    if extends.get(variables[0]) != aggregate.res:
        return None
    peer_text = _distinct_values_text(text, str(aggregate.vars))
    if peer_text is None:
        return None
    return Pushdown("count_distinct", variables, texts=(peer_text,), group=(str(aggregate.vars),))


# --- merging the peers' answers ------------------------------------------------------------------

class SelectMerge:
    """The union of the peers' SELECT rows as they arrive: deduplicated for `DISTINCT`, the first
    `OFFSET` skipped, and cut at `LIMIT` (then `done`: the peers' rest is not needed). For an
    ordered SELECT, `take` keeps every row and `finish` orders and cuts them."""

    def __init__(self, plan: Pushdown) -> None:
        self.plan = plan
        self.taken = 0
        self.skipped = 0
        self._seen: set[frozenset] = set()
        self._kept: list[Row] = []

    @property
    def done(self) -> bool:
        return not self.plan.order and self.plan.limit is not None and self.taken >= self.plan.limit

    def take(self, rows: list[Row]) -> list[Row]:
        """Those of `rows` that belong to the answer (none yet for an ordered one)."""
        out: list[Row] = []
        for row in rows:
            if self.done:
                break
            if self.plan.distinct:
                key = _row_key(row)
                if key in self._seen:
                    continue
                self._seen.add(key)
            if self.plan.order:
                self._kept.append(row)
            elif self.skipped < self.plan.offset:
                self.skipped += 1
            else:
                out.append(row)
                self.taken += 1
        return out

    def finish(self) -> list[Row]:
        """An ordered SELECT's rows, once every peer's are taken."""
        return finish(self.plan, self._kept)


def _row_key(row: Row) -> frozenset:
    return frozenset((k, tuple(sorted(v.items()))) for k, v in row.items())


def finish(plan: Pushdown, rows: list[Row]) -> list[Row]:
    """Merged rows in the query's ORDER BY (stable, each key in its direction), then OFFSET and LIMIT."""
    for name, descending in reversed(plan.order):
        rows = sorted(rows, key=lambda row: _sort_key(row.get(name)), reverse=descending)
    end = None if plan.limit is None else plan.offset + plan.limit
    return rows[plan.offset:end]


def top_rows(rows: Iterable[Row], order: tuple[tuple[str, bool], ...] | list[Any], count: int) -> list[Row]:
    """The first `count` of `rows` in `order` (each key in its direction), holding `count` rows
    at most: what one peer sends for an ORDER BY … LIMIT."""
    keys = [(name, bool(descending)) for name, descending in order]

    def compare(a: Row, b: Row) -> int:
        for name, descending in keys:
            x, y = _sort_key(a.get(name)), _sort_key(b.get(name))
            if x != y:
                return (1 if x < y else -1) if descending else (-1 if x < y else 1)
        return 0

    return heapq.nsmallest(count, rows, key=cmp_to_key(compare))


def _sort_key(term: dict[str, str] | None) -> tuple:
    """SPARQL's ORDER BY on terms: unbound first, then blank nodes, IRIs, literals (numbers by
    value, then others by lexical form)."""
    if term is None:
        return (0, 0, 0.0, "")
    kind = term.get("type", "")
    if kind == "bnode":
        return (1, 0, 0.0, term.get("value", ""))
    if kind == "uri":
        return (2, 0, 0.0, term.get("value", ""))
    number = _number(term)
    if number is not None:
        return (3, 0, float(number), "")
    return (3, 1, 0.0, term.get("value", ""))


def distinct_values(plan: Pushdown, rows: list[Row]) -> set[tuple]:
    """The values of a COUNT(DISTINCT ?x) in some peer's rows (to gather in one set)."""
    name = plan.group[0]
    return {tuple(sorted(row[name].items())) for row in rows if name in row}


def count_distinct(plan: Pushdown, values: set[tuple]) -> list[Row]:
    """The one row of a COUNT(DISTINCT ?x), from every value the peers sent (counted once each)."""
    return finish(plan, [{plan.variables[0]: _literal(len(values))}])


def merge_select(plan: Pushdown, answers: list[list[Row]]) -> list[Row]:
    merge = SelectMerge(plan)
    rows = [row for answer in answers for row in merge.take(answer)]
    return merge.finish() if plan.order else rows


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
    return finish(plan, rows)
