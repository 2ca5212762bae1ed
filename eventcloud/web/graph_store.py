"""The SPARQL 1.1 Graph Store HTTP Protocol's read side, as translation: which graph a request
names and how its quads are written as they stream.

    GET /events?graph=IRI    one event's graph (its triples: N-Triples, Turtle; or N-Quads, TriG)
    GET /events?default      every event: the default graph, the union of them all
    GET /events              the same

Each event is a named graph (https://www.w3.org/TR/sparql11-http-rdf-update/#http-get). Formats
that stream are offered: a page of quads at a time is written as lines (N-Quads, N-Triples, and
Turtle written as N-Triples, which is Turtle) or as TriG blocks (a graph named in several blocks
is one graph). Writing is refused: events are published (POST /events) and deleted whole.
"""

from __future__ import annotations

from eventcloud.errors import ModelError
from eventcloud.rdf.model import IRI
from eventcloud.rdf.results import quads_bytes as lines
from eventcloud.web.http import HttpError, Request, negotiate

__all__ = ["graph_of", "wanted_format", "lines", "GRAPH_STORE_TYPES"]

#: media type -> how a page of quads is written, in order of preference for one graph
GRAPH_STORE_TYPES: dict[str, str] = {
    "text/turtle": "triples", "application/n-triples": "triples", "application/n-quads": "quads",
    "application/trig": "trig", "text/plain": "triples",
}
#: ... and for every graph at once (the default graph, their union)
_UNION_ORDER = ["application/n-quads", "application/trig", "text/turtle", "application/n-triples", "text/plain"]


def graph_of(request: Request) -> IRI | None:
    """The graph a request names (None: the default graph); 400 when it is not an IRI or names both."""
    graphs = request.query.get("graph", [])
    if graphs and "default" in request.query:
        raise HttpError(400, "name one graph: `graph=IRI` or `default`, not both")
    if len(graphs) > 1:
        raise HttpError(400, "more than one `graph` parameter")
    if not graphs:
        return None
    try:
        return IRI(graphs[0].strip().removeprefix("<").removesuffix(">"))
    except ModelError as exc:
        raise HttpError(400, f"`graph` is not an IRI: {exc.message}") from None


def wanted_format(request: Request, graph: IRI | None) -> tuple[str, str]:
    """(media type, how it is written); 406 when the client accepts none of them."""
    offered = list(GRAPH_STORE_TYPES) if graph is not None else _UNION_ORDER
    chosen = negotiate(request.header("accept"), offered)
    if chosen is None:
        raise HttpError(406, f"none of the accepted types ({request.header('accept')}) is available for a graph; "
                             f"available: {', '.join(offered)}")
    return chosen, GRAPH_STORE_TYPES[chosen]
