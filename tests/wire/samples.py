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
    m.Ack("id", 3), m.Admin("token"), m.Publisher("token"), m.AdoptAnnex("p", ZONE, ZONE), m.AnnexAsk(("n1",)), m.Attach("id", "t", 2),
    m.Auth("p", "proof"), m.Commit(("http://ex/g",)), m.Deliver((m.Delivery("http://ex/g", 1, 9, (
        ["http://s", "http://p", "http://o"],)),)), m.Ended("id", "lease-expired", "gone"), m.EventGet("http://ex/g"),
    m.Hello("c"), m.JoinCommit("p"), m.JoinRequest("p", "h:2"), m.Leases((("id", 5),)), m.LoadAsk(),
    m.MailboxAck("id", 1, 2), m.MailboxAttach("id", "t", "h:1", 1), m.MailboxDeliver("id", 1, (
        m.Notification("id", "http://ex/g", "signal", 9),)), m.MailboxEnd("id"),
    m.MailboxOpen("id", {"sparql": RECORD.sparql}), m.MulticastEach(ZONE.bounds, "clock", (
        m.MulticastItem(0, ZONE.bounds, {}),)), m.NextChunk("p", 0), m.Notifies((m.Notify("id", "http://ex/g", 2, 9),)),
    m.Probe("p", "h:1"), m.Renew("id", "t", 30.0), m.ReplicaOf("p", 1), m.ReplicaState("p", 1, {"id": "p"}),
    m.ReplicaSync("p", 1, {"id": "p"}, ([["commit", "http://ex/g"]],), reset=True, done=True),
    m.Replicate("p", 1, ([["commit", "http://ex/g"]],)), m.Resolve(("k",)),
    m.SchemaNewer(1), m.SparqlLocal(("ASK {}",)), m.GraphClaim("http://ex/g", "d1"), m.Notified(("id",)), m.StepAside(ZONE.bounds, 100), m.SubscribeMany((
        m.Subscribe("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }"),)), m.SubscriptionId("id"),
]
