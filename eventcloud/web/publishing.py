"""Publishing over HTTP, as translation: a request body in an RDF syntax becomes compound events,
and what the overlay stored becomes the JSON answer.

    POST /events                      Content-Type: application/n-quads | application/trig |
                                      text/turtle | application/n-triples | text/n3 |
                                      application/rdf+xml
    POST /events?graph=IRI            the default graph's triples form one event named IRI

Each named graph is one event; the default graph's triples are one more event, named by
`graph` or generated (`source` parameter + the time). Nothing is published unless the whole
body parses (400 naming the line otherwise). Publishing the same graph IRI again is a retry:
it never produces a second notification.
"""

from __future__ import annotations

from typing import Any

from eventcloud.errors import ModelError
from eventcloud.rdf.files import RDFInputError, RDFTooLarge, parse_events
from eventcloud.rdf.model import IRI, CompoundEvent
from eventcloud.web.http import HttpError, Request

__all__ = ["events_of", "published_json", "RDF_TYPES"]

#: Content-Type -> the reader's format name
RDF_TYPES = {
    "application/n-quads": "nquads", "application/trig": "trig", "text/turtle": "turtle",
    "application/x-turtle": "turtle", "application/n-triples": "ntriples", "text/n3": "n3",
    "application/rdf+xml": "rdfxml", "application/xml": "rdfxml", "text/xml": "rdfxml",
    "application/rss+xml": "rdfxml",
}
_SOURCE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def events_of(request: Request, timestamp_ms: int, sequence: int) -> list[CompoundEvent]:
    """The events a publishing request carries; HttpError 400/415 naming the problem."""
    kind = request.content_type
    fmt = RDF_TYPES.get(kind) or request.param("format")
    if fmt is None:
        raise HttpError(415, f"cannot publish {kind or 'a body without Content-Type'}: send "
                             f"{', '.join(sorted(set(RDF_TYPES) - {'application/xml', 'text/xml'}))}")
    graph = request.param("graph")
    default_graph = None
    if graph is not None:
        try:
            default_graph = IRI(graph.strip("<>"))
        except ModelError as exc:
            raise HttpError(400, f"graph parameter: {exc.message}") from None
    source = request.param("source", "http")
    if not source or not set(source) <= _SOURCE_CHARS:
        raise HttpError(400, "source must be letters, digits, '.', '_' or '-'")
    if not request.body.strip():
        raise HttpError(400, "the body is empty: nothing to publish")
    try:
        events = parse_events(request.body, fmt, name="body", source=source, timestamp_ms=timestamp_ms,
                              sequence=sequence, default_graph=default_graph)
    except RDFTooLarge as exc:
        raise HttpError(413, f"{exc} (nothing was published)", code="bad-rdf") from None
    except RDFInputError as exc:
        raise HttpError(400, f"{exc} (nothing was published)", code="bad-rdf") from None
    if not events:
        raise HttpError(400, "the body holds no triples or quads: nothing to publish")
    return events


def published_json(events: list[CompoundEvent], receipts: list[Any]) -> dict[str, Any]:
    return {"events": len(events), "quads": sum(len(e) for e in events),
            "graphs": [e.graph.value for e in events]}
