"""One sample body of every message type, shared by the codec, fuzz and peer tests."""

from __future__ import annotations

from eventcloud.matching.csma import PartialMatch
from eventcloud.overlay import CoordinateSpace, Neighbour, Zone
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, make_quad
from eventcloud.wire import messages as m
from eventcloud.wire.schema import Body

G = IRI("http://ex/g")
EVENT = CompoundEvent(G, (make_quad(G, IRI("http://ex/s"), IRI("http://ex/p"), Literal("5", XSD + "integer")),))
ZONE = Zone(CoordinateSpace().whole_space())
RECORD = m.SubscriptionRecord("id1", "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", "bindings", "h:1", 42)

SAMPLES: list[Body] = [
    m.Empty(), m.Pong("p", "h:1"), m.OverlayInfo("p", "h:1", CoordinateSpace(), "osma"),
    m.Publish((EVENT,)), m.Published((m.Receipt("http://ex/g", 7, 1),)), m.Find((None, G, None, None)),
    m.Quads(EVENT.quads), m.Counted(3), m.Sparql("ASK {}"), m.SparqlResult("boolean", "{}", 2, 0.5),
    m.Delete(G), m.Deleted(4), m.Subscribe("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", "signal"),
    m.Subscribed("id", 5, 1), m.Unsubscribe("id"), m.Left("heir"),
    m.Notification("id", "http://ex/g", "bindings", 9, solutions=({"x": G},), quads=EVENT.quads),
    m.Route((1, 2, 3, 4), "find_local", {"a": 1}, 3), m.Routed([1, 2]),
    m.Multicast(ZONE.bounds, "clock", {}), m.Delivery("http://ex/g", 1, 9, (["http://s", "http://p", "http://o"],),
                                                     take=(0,), whole=True),
    m.Notify("id", "http://ex/g", 2, 9, csma=True), RECORD, m.StoreSubscription(RECORD),
    m.CsmaStep(RECORD, PartialMatch((1,), (("s", G),)), "http://ex/g", 2, 9),
    m.Handover(EVENT.quads, (m.EventMeta("http://ex/g", 1, 9),), (RECORD,)),
    m.JoinGrant(ZONE, {"n1": Neighbour("h:2", ZONE)}, "csma", "o", "h:1", m.Handover()),
    m.Announce({"n1": Neighbour("h:2", ZONE)}, ("gone",)), m.Table(("me", Neighbour("h:1", ZONE)), {}),
    m.TakeOver("x", ZONE, {}, m.Handover()), m.PeerId("p"),
]
