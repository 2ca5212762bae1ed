"""EventCloud's FILTER functions in one-time queries: what pyoxigraph calls for `ec:ftcontains`
and the is-a tests (`ec:descendantOf`, `ec:ancestorOf`, `ec:childOf`), with the meaning the
subscription matcher gives them (eventcloud.sparql.filters.extensions).

pyoxigraph evaluates one-time queries (at each peer for a pushed-down query, at the entry peer or
in its child process for a gathered one) and knows none of these functions: without them a query
using one failed ("the query's evaluation failed"). `custom_functions(text, taxonomy)` gives the
callables a query needs (none when it names no extension). As in a subscription's FILTER, a
malformed full-text expression or a value that is not a string is an error (the FILTER is false),
and the is-a tests read the overlay's class taxonomy (each peer holds it).
"""

from __future__ import annotations

from typing import Any, Callable

import pyoxigraph as ox

from eventcloud.sparql.filters.extensions import EXT, FTCONTAINS, ISA_FUNCTIONS
from eventcloud.sparql.filters.fulltext import FtQuery, FtSyntaxError, parse_fulltext
from eventcloud.sparql.taxonomy import Taxonomy

__all__ = ["custom_functions", "names_extensions"]

_STRING = "http://www.w3.org/2001/XMLSchema#string"
_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
_TRUE, _FALSE = ox.Literal("true", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#boolean")), \
    ox.Literal("false", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#boolean"))


def names_extensions(text: str) -> bool:
    """Whether a query's text may call an extension (cheap: its namespace or `ftcontains`)."""
    return EXT in text or "ftcontains" in text


def custom_functions(text: str, taxonomy: Taxonomy | None) -> dict[ox.NamedNode, Callable[..., Any]] | None:
    """The callables pyoxigraph needs for the extensions `text` may call (None: it calls none)."""
    if not names_extensions(text):
        return None
    parsed: dict[str, FtQuery | None] = {}

    def ftcontains(value: Any, expression: Any = None) -> Any:
        if not _is_string(value) or not _is_string(expression):
            return None   # an error: the FILTER is false
        source = expression.value
        if source not in parsed:
            try:
                parsed[source] = parse_fulltext(source)
            except FtSyntaxError:
                parsed[source] = None
        query = parsed[source]
        if query is None:
            return None
        return _TRUE if query.on_text(value.value) else _FALSE

    functions: dict[ox.NamedNode, Callable[..., Any]] = {ox.NamedNode(FTCONTAINS): ftcontains}
    closure = taxonomy or Taxonomy([], 0)
    for iri, method in ISA_FUNCTIONS.items():
        functions[ox.NamedNode(iri)] = _isa(getattr(closure, method))
    return functions


def _isa(test: Callable[[str, str], bool]) -> Callable[..., Any]:
    def call(cls: Any, of: Any = None) -> Any:
        if type(cls) is not ox.NamedNode or type(of) is not ox.NamedNode:
            return None   # arguments that are not IRIs: an error, the FILTER is false
        return _TRUE if test(cls.value, of.value) else _FALSE
    return call


def _is_string(term: Any) -> bool:
    return type(term) is ox.Literal and term.datatype.value in (_STRING, _LANG_STRING)
