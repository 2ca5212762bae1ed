"""The SPARQL 1.1 Protocol's query operation, as translation: the query text out of a request,
and an answer of the overlay rendered in the format the client accepts.

Requests (https://www.w3.org/TR/sparql11-protocol/#query-operation):
  GET  /sparql?query=…
  POST /sparql  with application/x-www-form-urlencoded `query=…`
  POST /sparql  with application/sparql-query (the query is the body)
`default-graph-uri` and `named-graph-uri` are refused with 400: the dataset is always every
stored event (each a named graph, the default graph their union).

Results: SELECT and ASK as SPARQL JSON (the default), XML, CSV or TSV; CONSTRUCT and DESCRIBE
as N-Triples (the default), Turtle, N-Quads, RDF/XML or JSON-LD; chosen by Accept, or by a `format`
parameter (json, xml, csv, tsv, ntriples, turtle, nquads, rdfxml, jsonld) for links and browsers.
"""

from __future__ import annotations

from typing import Any

from eventcloud.rdf.results import graph_bytes, solutions_bytes
from eventcloud.web.http import HttpError, Request, Response, negotiate

__all__ = ["query_of", "render", "content_type", "wanted_type", "SOLUTION_TYPES", "GRAPH_TYPES", "UPDATE_WORDS"]

#: media type -> results format (eventcloud.rdf.results), in order of preference (the first is the default)
SOLUTION_TYPES: dict[str, str] = {
    "application/sparql-results+json": "json", "application/sparql-results+xml": "xml", "text/csv": "csv",
    "text/tab-separated-values": "tsv", "application/json": "json", "application/xml": "xml", "text/xml": "xml",
}
GRAPH_TYPES: dict[str, str] = {
    "application/n-triples": "ntriples", "text/turtle": "turtle", "application/n-quads": "nquads",
    "application/rdf+xml": "rdfxml", "application/ld+json": "jsonld", "text/plain": "ntriples",
    "application/x-turtle": "turtle",
}
_FORMAT_PARAM = {"json": "application/sparql-results+json", "xml": "application/sparql-results+xml",
                 "csv": "text/csv", "tsv": "text/tab-separated-values", "ntriples": "application/n-triples",
                 "nt": "application/n-triples", "turtle": "text/turtle", "ttl": "text/turtle",
                 "nquads": "application/n-quads", "rdfxml": "application/rdf+xml", "jsonld": "application/ld+json"}
_CHARSET = {"application/sparql-results+json", "application/json", "text/csv", "text/tab-separated-values",
            "text/turtle", "application/n-triples", "application/n-quads", "text/plain", "application/x-turtle"}
#: Words that start a SPARQL Update request: refused with a pointer to publishing.
UPDATE_WORDS = ("INSERT", "DELETE", "LOAD", "CLEAR", "CREATE", "DROP", "COPY", "MOVE", "ADD", "WITH")


def query_of(request: Request) -> str:
    """The query text of a protocol request; HttpError 400/415 naming what is wrong."""
    if request.method in ("GET", "HEAD"):
        fields = request.query
    elif request.method == "POST":
        kind = request.content_type
        if kind == "application/x-www-form-urlencoded":
            fields = request.form()
            if "update" in fields:
                raise HttpError(400, "an update is sent to POST /update, not /sparql")
        elif kind == "application/sparql-query":
            try:
                text = request.body.decode("utf-8")
            except UnicodeDecodeError:
                raise HttpError(400, "the query is not UTF-8 text") from None
            fields = {**request.query, "query": [text]}
        elif kind == "application/sparql-update":
            raise HttpError(415, "an update is sent to POST /update, not /sparql")
        else:
            raise HttpError(415, f"a SPARQL query is sent as application/x-www-form-urlencoded or "
                                 f"application/sparql-query, not {kind or 'a body without Content-Type'}")
    else:
        raise HttpError(405, f"{request.method} is not allowed on /sparql: use GET or POST",
                        [("allow", "GET, POST, OPTIONS")])
    for name in ("default-graph-uri", "named-graph-uri", "using-graph-uri", "using-named-graph-uri"):
        if fields.get(name):
            raise HttpError(400, f"{name} is not supported: the dataset is every stored event (each a named "
                                 f"graph; the default graph is their union)")
    queries = fields.get("query", [])
    if not queries:
        raise HttpError(400, "missing the `query` parameter (GET /sparql?query=…, or POST it)")
    if len(queries) > 1:
        raise HttpError(400, "more than one `query` parameter")
    text = queries[0]
    if not text.strip():
        raise HttpError(400, "the query is empty")
    return text


def wanted_type(request: Request, graph: bool) -> str:
    """The media type to answer with (406 when the client accepts none we make)."""
    offered = list(GRAPH_TYPES if graph else SOLUTION_TYPES)
    chosen = request.param("format")
    if chosen:
        mapped = _FORMAT_PARAM.get(chosen.lower(), chosen.lower())
        if mapped not in offered:
            what = "CONSTRUCT/DESCRIBE results" if graph else "SELECT/ASK results"
            raise HttpError(406, f"format {chosen!r} is not available for {what}: use one of "
                                 f"{', '.join(k for k, v in _FORMAT_PARAM.items() if v in offered)}")
        return mapped
    found = negotiate(request.header("accept"), offered)
    if found is None:
        what = "CONSTRUCT/DESCRIBE" if graph else "SELECT/ASK"
        raise HttpError(406, f"none of the accepted types ({request.header('accept')}) is available for a "
                             f"{what} result; available: {', '.join(offered)}")
    return found


def content_type(chosen: str) -> str:
    """The Content-Type header of an answer in media type `chosen`."""
    return f"{chosen}; charset=utf-8" if chosen in _CHARSET else chosen


def render(request: Request, result: Any) -> Response:
    """The overlay's answer (`Client.query`: a dict of SPARQL JSON results, or N-Triples text) as
    the response the client asked for."""
    graph = isinstance(result, str)
    chosen = wanted_type(request, graph)
    body = graph_bytes(result, GRAPH_TYPES[chosen]) if graph else solutions_bytes(result, SOLUTION_TYPES[chosen])
    return Response(200, body, content_type(chosen), [("vary", "Accept")])
