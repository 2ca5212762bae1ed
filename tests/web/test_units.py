"""The gateway's pure parts, without sockets: content negotiation, SSE framing and
Last-Event-ID, the WebSocket protocol, notification JSON, delayed acknowledgements, zone labels."""

from __future__ import annotations

import json

import pytest

from eventcloud.overlay.coordinates import CoordinateSpace
from eventcloud.overlay.labels import coordinate_text, interval_text
from eventcloud.rdf.model import IRI, Literal, Quad
from eventcloud.web import sse
from eventcloud.web.http import HttpError, Request, negotiate
from eventcloud.web.live import DelayedAcks
from eventcloud.web.messages import WsError, notification_json, parse_ws, ws_notification
from eventcloud.web.sparql import query_of
from eventcloud.wire.hlc import pack
from eventcloud.wire.messages import Notification

JSON, XML, CSV = "application/sparql-results+json", "application/sparql-results+xml", "text/csv"


@pytest.mark.parametrize("accept, expected", [
    (None, JSON), ("*/*", JSON), ("", JSON), (XML, XML), (f"{XML}, {JSON}", XML), (f"{JSON};q=0.5, {XML}", XML),
    ("text/*", CSV), ("text/*;q=0.9, */*;q=0.1", CSV), ("image/png", None), (f"{JSON};q=0", None),
    (f"{XML};q=0, */*", JSON), ("application/sparql-results+xml;charset=utf-8", XML),
])
def test_negotiation(accept, expected):
    assert negotiate(accept, [JSON, XML, CSV]) == expected


def request(method="GET", query=b"", headers=(), body=b""):
    req = Request.from_scope({"method": method, "path": "/sparql", "query_string": query,
                              "headers": [(k.encode(), v.encode()) for k, v in headers]})
    req.body = body
    return req


def test_query_of_every_protocol_form_and_refusal():
    assert query_of(request(query=b"query=ASK%20%7B%7D")) == "ASK {}"
    assert query_of(request("POST", headers=[("content-type", "application/x-www-form-urlencoded")],
                            body=b"query=ASK+%7B%7D")) == "ASK {}"
    assert query_of(request("POST", headers=[("content-type", "application/sparql-query; charset=utf-8")],
                            body="ASK { <http://é> ?p ?o }".encode())) == "ASK { <http://é> ?p ?o }"
    for req, status, words in ((request(), 400, "missing"), (request(query=b"query=a&query=b"), 400, "more than one"),
                               (request(query=b"query=%20"), 400, "empty"),
                               (request("POST", headers=[("content-type", "text/plain")]), 415, "sparql-query"),
                               (request("PUT"), 405, "GET or POST"),
                               (request(query=b"query=ASK{}&named-graph-uri=http://g"), 400, "named-graph-uri")):
        with pytest.raises(HttpError) as refused:
            query_of(req)
        assert refused.value.status == status and words in refused.value.message


def test_sse_framing_and_last_event_id():
    framed = sse.event({"a": "line\nbreak"}, id=7, name="subscribed", retry_ms=2000).decode()
    assert framed == 'retry: 2000\nevent: subscribed\nid: 7\ndata: {"a": "line\\nbreak"}\n\n'
    assert sse.comment("keep-alive") == b": keep-alive\n\n"
    assert sse.last_event_id(request(headers=[("last-event-id", " 41 ")])) == 41
    assert sse.last_event_id(request(query=b"lastEventId=3")) == 3
    assert sse.last_event_id(request()) is None
    with pytest.raises(HttpError) as refused:
        sse.last_event_id(request(headers=[("last-event-id", "x7")]))
    assert refused.value.status == 400


def test_websocket_messages():
    sub = parse_ws(json.dumps({"subscribe": {"sparql": "SELECT", "alias": 1, "kind": "event", "durable": True}}))
    assert (sub.action, sub.kind, sub.durable, sub.alias) == ("subscribe", "event", True, 1)
    assert parse_ws('{"resume": {"spuid": "x", "ticket": "t", "after": 3}}').after == 3
    assert parse_ws('{"ack": {"spuid": "x", "sequence": 9}}').sequence == 9
    for text, words in (("nope", "not JSON"), ("[]", "one key"), ('{"subscribe": {}}', "needs `sparql`"),
                        ('{"subscribe": {"sparql": "S", "kind": "all"}}', "unknown kind"),
                        ('{"resume": {"spuid": "x"}}', "ticket"), ('{"unsubscribe": {"spuid": 5}}', "string"),
                        ('{"resume": {"spuid": "x", "ticket": "t", "after": "3"}}', "integer")):
        with pytest.raises(WsError) as refused:
            parse_ws(text)
        assert words in refused.value.message, text


def test_notification_json_in_sparql_results_form():
    g = IRI("http://ex/g")
    note = Notification("sub", g.value, "bindings", published=pack(1_700_000_000_123, 5), seq=4,
                        solutions=({"s": IRI("http://ex/s"), "v": Literal("3", "http://www.w3.org/2001/XMLSchema#integer"),
                                    "l": Literal("x", language="en"), "t": Literal("plain")},))
    body = notification_json(note)
    assert body["published"] == 1_700_000_000_123 and body["sequence"] == 4
    assert body["head"] == {"vars": ["s", "v", "l", "t"]}
    assert body["results"]["bindings"][0] == {
        "s": {"type": "uri", "value": "http://ex/s"},
        "v": {"type": "literal", "value": "3", "datatype": "http://www.w3.org/2001/XMLSchema#integer"},
        "l": {"type": "literal", "value": "x", "xml:lang": "en"}, "t": {"type": "literal", "value": "plain"}}
    event = Notification("sub", g.value, "event", quads=(Quad(g, IRI("http://ex/s"), IRI("http://ex/p"), Literal("o")),))
    assert notification_json(event)["quads"] == ['<http://ex/s> <http://ex/p> "o" <http://ex/g> .']
    ws = json.loads(ws_notification(note, "mine"))["notification"]
    assert ws["spuid"] == "sub" and ws["alias"] == "mine" and ws["addedResults"]["head"]["vars"][0] == "s"


def test_delayed_acknowledgements():
    acks = DelayedAcks(30)
    acks.written(1, 0.0)
    acks.written(2, 10.0)
    acks.written(3, 20.0)
    assert acks.due(29.0) is None
    assert acks.due(40.0) == 2
    assert acks.due(40.0) is None
    assert acks.due(100.0) == 3


def test_zone_labels_read_back_the_strings():
    space = CoordinateSpace()
    assert interval_text(space, 0, space.top // 2) == '["", "O")'
    assert interval_text(space, space.top // 2, space.top) == '["O", end)'
    assert coordinate_text(space, space.coordinate(IRI("http://x/hasValue"))) == "hasValue"
    assert coordinate_text(space, space.coordinate(Literal("a-rather-long-literal")), 6) == "a-rath…"
    assert coordinate_text(space, space.top) is None
