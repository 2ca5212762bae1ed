"""Planning one-time SPARQL queries over the overlay: which quad patterns to gather.

The entry peer does not evaluate SPARQL itself across peers; it gathers, for each triple
pattern of the query, the quads that could match it (a box in the 4-D space: fixed terms
are points, variables whole axes) and evaluates the query locally over that union. A
pattern with a property path or a term we cannot place widens to everything, which is
always correct, only slower.
"""

from __future__ import annotations

from typing import Any

from rdflib import Literal as RLiteral
from rdflib import URIRef
from rdflib.paths import Path as RPath
from rdflib.plugins.sparql import prepareQuery
from rdflib.plugins.sparql.parserutils import CompValue

from eventcloud.errors import ErrorCode, InputError
from eventcloud.rdf.model import IRI, Literal, ModelError, Term

Pattern = tuple[Term | None, Term | None, Term | None, Term | None]
EVERYTHING: Pattern = (None, None, None, None)


class QueryPlanError(InputError):
    """The query text is not SPARQL we can run."""

    default_code = ErrorCode.BAD_QUERY


def query_term(node: Any) -> Term | None:
    """The term a query names (None: a variable, a blank node, or a term the model refuses)."""
    try:
        if isinstance(node, URIRef):
            return IRI(str(node))
        if isinstance(node, RLiteral):
            if node.language:
                return Literal(str(node), language=node.language)
            return Literal(str(node), str(node.datatype) if node.datatype else Literal("").datatype)
    except ModelError:
        return None
    return None  # variables and blank nodes match anything


def candidate_patterns(text: str) -> list[Pattern]:
    """The distinct quad patterns (g, s, p, o) whose matches the query may read."""
    return analyse(text)[0]


def analyse(text: str) -> tuple[list[Pattern], Any]:
    """The query's candidate patterns (see `candidate_patterns`) and its rdflib algebra."""
    try:
        query = prepareQuery(text)
    except Exception as exc:  # rdflib raises pyparsing and several other error types
        from eventcloud.sparql.hints import hint

        named = hint(text)
        raise QueryPlanError(f"invalid SPARQL: {named}: {exc}" if named else f"invalid SPARQL: {exc}") from None
    patterns: dict[Pattern, None] = {}
    widen = False

    def visit(node: Any, graph: Term | None) -> None:
        nonlocal widen
        if isinstance(node, CompValue):
            if node.name == "Graph":
                term = node.get("term")
                graph = query_term(term) if isinstance(term, URIRef) else None
                inner = node.get("p")
                if isinstance(inner, CompValue) and inner.name == "BGP" and not inner.get("triples"):
                    widen = True   # GRAPH ?g {}: every graph's name
            if node.name == "BGP":
                for s, p, o in node.get("triples", []):
                    if isinstance(p, RPath):
                        widen = True
                        continue
                    patterns.setdefault((graph, query_term(s), query_term(p), query_term(o)))
            if node.name in ("ServiceGraphPattern",):
                raise QueryPlanError("SERVICE is not supported in one-time queries")
            for value in node.values():
                visit(value, graph)
        elif isinstance(node, (list, tuple)):
            for item in node:
                visit(item, graph)

    algebra = query.algebra
    if algebra.name == "DescribeQuery" and algebra.p is None:
        # DESCRIBE <a> <b>: the triples of which they are the subject (blank nodes are skolem
        # IRIs here: rdf/model.py, so a description follows none)
        described = [query_term(term) for term in algebra.PV]
        if all(isinstance(term, IRI) for term in described):
            return [(None, term, None, None) for term in described], algebra
        return [EVERYTHING], algebra
    visit(algebra, None)
    if widen:
        return [EVERYTHING], algebra
    # no triple pattern (ASK {}, VALUES alone): the answer needs no stored quad
    return list(patterns), algebra
