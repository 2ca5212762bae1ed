"""SPARQL over a peer store's event graphs, its rows as SPARQL 1.1 JSON terms.

The store holds event graphs only (its records are apart: peers/store/records.py), so a query's
default graph is their union; where some pending event is not decided yet, the graphs readers
may see are named instead. Rows come as a list (`query_rows`, bounded) or one at a time
(`iter_rows`, for a cursor: peers/queries/cursors.py). `functions`: what pyoxigraph calls for
EventCloud's FILTER functions (eventcloud.sparql.query_functions).
"""

from __future__ import annotations

from typing import Any, Iterator

import pyoxigraph as ox

from eventcloud.errors import ErrorCode, RequestError

__all__ = ["iter_rows", "query_rows", "term_json"]


_EMPTY = "urn:eventcloud:no-graph"


def term_json(term: Any) -> dict[str, str]:
    """A pyoxigraph term as SPARQL 1.1 JSON results write it."""
    if isinstance(term, ox.NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, ox.BlankNode):
        return {"type": "bnode", "value": term.value}
    out = {"type": "literal", "value": term.value}
    if term.language:
        out["xml:lang"] = term.language
    elif term.datatype.value != "http://www.w3.org/2001/XMLSchema#string":
        out["datatype"] = term.datatype.value
    return out


def _query(store: ox.Store, text: str, visible: list[str] | None, functions: Any) -> Any:
    """The query run over the event graphs `visible`, or every one (None: their union is the
    default graph); RequestError(BAD_QUERY) if pyoxigraph refuses it."""
    try:
        if visible is None:
            return store.query(text, use_default_graph_as_union=True, custom_functions=functions)
        nodes = [ox.NamedNode(g) for g in visible] or [ox.NamedNode(_EMPTY)]
        return store.query(text, default_graph=nodes, named_graphs=nodes, custom_functions=functions)
    except (SyntaxError, ValueError, OSError) as exc:
        raise RequestError(f"query failed: {exc}", ErrorCode.BAD_QUERY) from None


def iter_rows(store: ox.Store, text: str, visible: list[str] | None, limit: int | None,
              functions: Any = None) -> Iterator[dict[str, Any]]:
    """The rows of a SPARQL SELECT over the event graphs `visible` of `store` only, or over all
    of them (None), as `query_rows` reads them, one at a time (at most `limit`). Blocking, and
    bound to the thread that first iterates it (pyoxigraph's solutions are): made, read and
    closed in one thread."""
    result = _query(store, text, visible, functions)
    if isinstance(result, ox.QueryBoolean):
        raise RequestError("an ASK query has no rows to stream", ErrorCode.BAD_QUERY)
    names = [v.value for v in result.variables]
    count = 0
    try:
        for solution in result:
            if limit is not None and count >= limit:
                break
            count += 1
            row = {}
            for name in names:
                term = solution[name]
                if term is not None:
                    row[name] = term_json(term)
            yield row
    except OSError as exc:
        raise RequestError(f"query failed: {exc}", ErrorCode.BAD_QUERY) from None
    finally:
        del result


def query_rows(store: ox.Store, text: str, visible: list[str] | None, limit: int | None,
               max_rows: int, functions: Any = None) -> list[Any] | bool:
    """Run a SPARQL SELECT or ASK over the event graphs `visible` of `store` only, or over all of
    them (None; the store holds event graphs only, its records are apart: peers/store/records.py), the
    default graph being their union: its rows as SPARQL JSON term maps (at most `limit`), or its
    boolean. StoreError past `max_rows` rows (the caller asks for a LIMIT or an aggregate instead).
    Naming the graphs costs oxigraph 0.13–0.2 s per query at 20,000 events: only pending events
    that are not decided make it necessary."""
    result = _query(store, text, visible, functions)
    if isinstance(result, ox.QueryBoolean):
        return bool(result)
    names = [v.value for v in result.variables]
    rows: list[Any] = []
    over = False
    solution = None
    for solution in result:
        if limit is not None and len(rows) >= limit:
            break
        if len(rows) >= max_rows:
            over = True
            break
        row = {}
        for name in names:
            term = solution[name]
            if term is not None:
                row[name] = term_json(term)
        rows.append(row)
    # pyoxigraph's solutions belong to this (worker) thread: an exception raised while they are
    # locals would carry them to the event loop's thread, which dropping them there reports as
    # a RuntimeError traceback ("unsendable, but is being dropped on another thread")
    del result, solution
    if over:
        raise RequestError(f"the query has more than {max_rows:,} results on one peer: add a LIMIT, or "
                         f"aggregate (COUNT, SUM, GROUP BY …)", ErrorCode.BAD_QUERY)
    return rows
