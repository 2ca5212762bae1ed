"""SPARQL 1.1 Update at /update, as translation: the operations that map onto events become
publications and deletions; the others are refused, naming why.

Requests (https://www.w3.org/TR/sparql11-protocol/#update-operation):
  POST /update  with application/sparql-update (the update is the body)
  POST /update  with application/x-www-form-urlencoded `update=…`

An event is a named graph, published whole and deleted whole, so:
  INSERT DATA { GRAPH <g> { … } }   publishes the event <g> (the triples every INSERT DATA of the
                                    request gives <g>, as one event: a client that batches its
                                    adds, such as rdflib's SPARQLUpdateStore without autocommit,
                                    publishes each graph once; <g> already holding other content
                                    is a conflict, 409, as on POST /events)
  DROP GRAPH <g>, CLEAR GRAPH <g>   deletes the event <g> (the admin token's right, as DELETE /events)
  CREATE GRAPH <g>                  does nothing (an IRI names an empty graph until an event is
                                    published under it; rdflib's Dataset sends it before adding)
Refused with 400: triples outside a GRAPH (an event needs its IRI), DELETE DATA (an event's
quads are never removed one by one: DROP GRAPH), and every operation over patterns or many
graphs (DELETE/INSERT … WHERE, LOAD, DROP ALL, COPY, MOVE, ADD). The operations run
in order; one that fails stops the rest (those before it stay done: the answer says which).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eventcloud.web.http import HttpError, Request

__all__ = ["update_of", "plan_update", "Step"]

_REFUSED = {
    "DeleteData": "DELETE DATA removes quads one by one, and an event is deleted whole: DROP GRAPH <iri>",
    "DeleteWhere": "DELETE WHERE changes the quads a pattern matches, and events are published and deleted whole",
    "Modify": "DELETE/INSERT … WHERE changes the quads a pattern matches, and events are published and deleted "
              "whole: INSERT DATA { GRAPH <iri> { … } } publishes one",
    "Load": "LOAD fetches a document from the web: publish its content with POST /events",
    "Add": "ADD copies a graph's triples into another, and an event's content never changes",
    "Move": "MOVE renames a graph's triples, and an event's content never changes",
    "Copy": "COPY copies a graph's triples into another, and an event's content never changes",
}


@dataclass
class Step:
    """One thing to do: publish `trig` (one event per graph), or delete the event `graph`."""

    kind: str                       # "publish" | "delete"
    graph: str = ""
    trig: str = ""
    graphs: list[str] = field(default_factory=list)   # publish: the events it holds


def update_of(request: Request) -> str:
    """The update text of a protocol request; HttpError 400/405/415 naming what is wrong."""
    if request.method != "POST":
        raise HttpError(405, "an update is sent with POST /update", [("allow", "POST, OPTIONS")])
    kind = request.content_type
    if kind == "application/sparql-update":
        try:
            text = request.body.decode("utf-8")
        except UnicodeDecodeError:
            raise HttpError(400, "the update is not UTF-8 text") from None
    elif kind == "application/x-www-form-urlencoded":
        updates = request.form().get("update", [])
        if len(updates) != 1:
            raise HttpError(400, "give the update once, as the `update` field")
        text = updates[0]
    else:
        raise HttpError(415, f"an update is sent as application/sparql-update or application/x-www-form-urlencoded, "
                             f"not {kind or 'a body without Content-Type'}")
    for name in ("using-graph-uri", "using-named-graph-uri"):
        if request.query.get(name):
            raise HttpError(400, f"{name} is not supported: updates name the graph of each event")
    if not text.strip():
        raise HttpError(400, "the update is empty")
    return text


def plan_update(text: str) -> list[Step]:
    """The steps an update maps onto, in order; HttpError 400 naming the first operation refused."""
    from rdflib.plugins.sparql.algebra import translateUpdate
    from rdflib.plugins.sparql.parser import parseUpdate

    try:
        operations = translateUpdate(parseUpdate(text)).algebra
    except Exception as exc:  # rdflib raises pyparsing's and several other error types
        raise HttpError(400, f"invalid SPARQL Update: {exc}", code="bad-query") from None
    steps: list[Step] = []
    inserts: dict[Any, list[Any]] = {}   # graph -> triples, until a deletion of one of them

    def flush() -> None:
        if inserts:
            trig = "".join(f"{graph.n3()} {{\n" + "".join(f"  {s.n3()} {p.n3()} {o.n3()} .\n" for s, p, o in triples)
                           + "}\n" for graph, triples in inserts.items())
            steps.append(Step("publish", trig=trig, graphs=[str(g) for g in inserts]))
            inserts.clear()

    for at, operation in enumerate(operations, 1):
        name = operation.name
        if name == "InsertData":
            if operation.get("triples"):
                raise HttpError(400, f"operation {at} (INSERT DATA) puts triples in the default graph: put them in "
                                     f"GRAPH <iri> {{ … }}, each graph is one event", code="bad-query")
            for graph, triples in operation.quads.items():
                inserts.setdefault(graph, []).extend(triples)
        elif name == "Create":
            continue   # an empty graph, which every IRI names until an event is published under it
        elif name in ("Drop", "Clear"):
            target = operation.get("graphiri")
            if not isinstance(target, str) or target in ("ALL", "NAMED", "DEFAULT") or not hasattr(target, "n3"):
                raise HttpError(400, f"operation {at} ({name.upper()} {target}) removes many events at once: "
                                     f"{name.upper()} GRAPH <iri> deletes one", code="bad-query")
            flush()
            steps.append(Step("delete", graph=str(target)))
        else:
            word = _REFUSED.get(name, f"{name} does not map onto events")
            raise HttpError(400, f"operation {at} is refused: {word}", code="bad-query")
    flush()
    return steps
