"""What the gateway sends about subscriptions, as JSON: notifications (the same object over SSE
and WebSocket), and the SEPA-like WebSocket protocol's requests and replies.

A notification:

    {"subscription": "3f…", "sequence": 7, "event": "http://…/graph", "kind": "bindings",
     "published": 1763…,                                   # publication time (ms)
     "head": {"vars": ["s", "v"]},                         # bindings: SPARQL 1.1 JSON results,
     "results": {"bindings": [{"s": {"type": "uri", "value": "…"}, …}]},
     "quads": ["<s> <p> <o> <g> ."],                       # event: every quad (N-Quads)
     "error": "…", "truncated": true, "gap": [8, 12]}      # only when they apply

WebSocket, client to gateway (one JSON object per text message):

    {"subscribe": {"sparql": "SELECT …", "alias": "mine", "kind": "bindings", "durable": false}}
    {"resume": {"spuid": "3f…", "ticket": "…", "after": 7, "alias": "mine"}}
    {"unsubscribe": {"spuid": "3f…"}}
    {"ack": {"spuid": "3f…", "sequence": 7}}

gateway to client:

    {"subscribed": {"spuid": "3f…", "alias": "mine", "kind": "bindings", "ticket": "…", "after": 0}}
    {"notification": {"spuid": "3f…", "alias": "mine", "sequence": 7, "addedResults": {head, results},
                      … every field of a notification above}}
    {"unsubscribed": {"spuid": "3f…", "alias": "mine"}}
    {"error": {"status_code": 400, "error": "bad-subscription", "error_description": "…", "alias": "mine"}}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from eventcloud.rdf.model import IRI, XSD_STRING, Literal, Term
from eventcloud.wire.hlc import unpack
from eventcloud.wire.messages import Notification

__all__ = ["term_json", "notification_json", "WsRequest", "parse_ws", "ws_notification", "ws_error", "WsError",
           "KINDS"]

KINDS = ("signal", "bindings", "event")


def term_json(term: Term) -> dict[str, str]:
    """A term in SPARQL 1.1 Query Results JSON form."""
    if isinstance(term, IRI):
        return {"type": "uri", "value": term.value}
    if isinstance(term, Literal):
        if term.language is not None:
            return {"type": "literal", "value": term.lexical, "xml:lang": term.language}
        if term.datatype == XSD_STRING:
            return {"type": "literal", "value": term.lexical}
        return {"type": "literal", "value": term.lexical, "datatype": term.datatype}
    return {"type": "bnode", "value": str(term)}


def notification_json(note: Notification) -> dict[str, Any]:
    """A notification as the gateway sends it (an SSE event's data, a WebSocket notification)."""
    head: dict[str, Any] = {"subscription": note.subscription, "sequence": note.seq, "event": note.event,
                            "kind": note.kind, "published": unpack(note.published)[0] if note.published else 0}
    return {**head, **note.json_fields(_sparql_results)}


def _sparql_results(solutions: tuple[dict[str, Term], ...]) -> dict[str, Any]:
    """Solutions in SPARQL 1.1 Query Results JSON form: `head` (every variable, first seen
    first) and `results`."""
    names: dict[str, None] = {}
    for solution in solutions:
        names.update(dict.fromkeys(solution))
    return {"head": {"vars": list(names)},
            "results": {"bindings": [{k: term_json(v) for k, v in s.items()} for s in solutions]}}


class WsError(Exception):
    """A WebSocket message the gateway cannot act on (answered with an `error` message)."""

    def __init__(self, message: str, alias: Any = None, status: int = 400, code: str = "bad-request") -> None:
        super().__init__(message)
        self.message, self.alias, self.status, self.code = message, alias, status, code


@dataclass(frozen=True)
class WsRequest:
    action: str                 # subscribe | resume | unsubscribe | ack
    sparql: str = ""
    alias: Any = None
    kind: str = "bindings"
    durable: bool = False
    spuid: str = ""
    ticket: str = ""
    after: int | None = None
    sequence: int = 0
    authorization: str | None = None


def _field(body: dict[str, Any], name: str, kind: type, alias: Any, default: Any = None) -> Any:
    value = body.get(name, default)
    if value is default:
        return value
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise WsError(f"`{name}` must be an integer, got {json.dumps(value)[:40]}", alias)
    if kind is not int and not isinstance(value, kind):
        what = {str: "string", bool: "boolean (true or false)"}.get(kind, kind.__name__)
        raise WsError(f"`{name}` must be a {what}, got {json.dumps(value)[:40]}", alias)
    return value


def parse_ws(text: str | bytes) -> WsRequest:
    """One client message; WsError naming what is wrong."""
    try:
        message = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WsError(f"not JSON: {exc}") from None
    actions = ("subscribe", "resume", "unsubscribe", "ack")
    if not isinstance(message, dict) or len(message) != 1 or next(iter(message)) not in actions:
        raise WsError(f"expected one object with one key of {', '.join(actions)}")
    action, body = next(iter(message.items()))
    if not isinstance(body, dict):
        raise WsError(f"`{action}` must hold an object")
    alias = body.get("alias")
    auth = _field(body, "authorization", str, alias)
    if action == "subscribe":
        sparql = _field(body, "sparql", str, alias)
        if not sparql or not sparql.strip():
            raise WsError("subscribe needs `sparql`, the subscription's SELECT query", alias)
        kind = _field(body, "kind", str, alias, "bindings")
        if kind not in KINDS:
            raise WsError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}", alias)
        durable = _field(body, "durable", bool, alias, False)
        return WsRequest("subscribe", sparql=sparql, alias=alias, kind=kind, durable=durable, authorization=auth)
    spuid = _field(body, "spuid", str, alias)
    if not spuid:
        raise WsError(f"{action} needs `spuid`, the subscription id", alias)
    if action == "resume":
        ticket = _field(body, "ticket", str, alias)
        if not ticket:
            raise WsError("resume needs the subscription's `ticket`", alias)
        after = _field(body, "after", int, alias)
        return WsRequest("resume", alias=alias, spuid=spuid, ticket=ticket, after=after, durable=True,
                         authorization=auth)
    if action == "ack":
        return WsRequest("ack", alias=alias, spuid=spuid, sequence=_field(body, "sequence", int, alias, 0))
    return WsRequest("unsubscribe", alias=alias, spuid=spuid, authorization=auth)


def ws_notification(note: Notification, alias: Any) -> str:
    body = notification_json(note)
    body["spuid"] = note.subscription
    body["alias"] = alias
    if note.kind == "bindings":
        body["addedResults"] = {"head": body.pop("head"), "results": body.pop("results")}
        body["removedResults"] = {"head": body["addedResults"]["head"], "results": {"bindings": []}}
    return json.dumps({"notification": body}, ensure_ascii=False)


def ws_error(status: int, code: str, message: str, alias: Any = None) -> str:
    return json.dumps({"error": {"status_code": status, "error": code, "error_description": message,
                                 "alias": alias}}, ensure_ascii=False)
