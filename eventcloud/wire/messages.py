"""Every message body, typed: one frozen class per request, reply and push (docs/protocol.md).

Fields are encoded by the codecs of `eventcloud.wire.codec`; a body that does not fit its
class is refused with a BadRequest naming the class and field. `REQUESTS` maps each op to
its request body type (`REPLIES` to its reply), so a dispatcher decodes once, by op.
"""

from __future__ import annotations

from typing import Any

from eventcloud.errors import BadRequest
from eventcloud.matching.csma import PartialMatch
from eventcloud.overlay.coordinates import Box, CoordinateSpace, Point
from eventcloud.overlay.plans import Neighbour
from eventcloud.overlay.zones import Zone
from eventcloud.rdf.model import IRI, CompoundEvent, Quad, Term
from eventcloud.wire import codec as c
from eventcloud.wire.ops import Op
from eventcloud.wire.schema import BOOL, FLOAT, INT, LIST, MAP, NESTED, OPT, RAW, STR, Body, Codec, field, message

# --- codecs of domain values ------------------------------------------------------------------

TERM = Codec("an RDF term", c.term_to_wire, c.term_from_wire)
IRI_ = Codec("an IRI", lambda v: v.value, lambda d, t: c.iri_from_wire(d, "value", t))
QUAD = Codec("a quad", c.quad_to_wire, c.quad_from_wire)
EVENT = Codec("a compound event", c.event_to_wire, c.event_from_wire)
PATTERN = Codec("a quad pattern", c.pattern_to_wire, lambda d, t: c.pattern_from_wire(d))
POINT = Codec("a point", c.point_to_wire, lambda d, t: c.point_from_wire(d))
BOX = Codec("a box", c.box_to_wire, lambda d, t: c.box_from_wire(d))
ZONE = Codec("a zone", c.zone_to_wire, lambda d, t: c.zone_from_wire(d))
SPACE = Codec("a coordinate space", c.space_to_wire, lambda d, t: c.space_from_wire(d))
PARTIAL = Codec("a partial match", c.partial_to_wire, lambda d, t: c.partial_from_wire(d))
SOLUTIONS = Codec("solutions", c.solutions_to_wire, c.solutions_from_wire)


def _neighbours_decode(data: Any, trusted: bool) -> dict[str, Neighbour]:
    if not isinstance(data, list):
        raise BadRequest("expected a list of neighbour records")
    return dict(c.neighbour_from_wire(item) for item in data)


NEIGHBOURS = Codec("neighbour records", lambda table: [c.neighbour_to_wire(k, n) for k, n in table.items()],
                   _neighbours_decode)
NEIGHBOUR = Codec("a neighbour record", lambda kn: c.neighbour_to_wire(*kn), lambda d, t: c.neighbour_from_wire(d))

ALL: tuple[None, None, None, None] = (None, None, None, None)
NOTIFICATION_KINDS = ("signal", "bindings", "event")


# --- generic ----------------------------------------------------------------------------------

@message
class Empty(Body):
    """No fields (requests such as ping, status, table; most acknowledgements)."""


@message
class ErrorBody(Body):
    """The body of an error reply: what went wrong, for programs (code) and people (message)."""

    code: str = field(STR)
    message: str = field(STR, default="")


# --- client operations ------------------------------------------------------------------------

@message
class Pong(Body):
    id: str = field(STR)
    address: str = field(STR)


@message
class Hello(Body):
    """The first step of a peer's proof of the cluster secret: its challenge to the other side."""

    challenge: str = field(STR)


@message
class Challenge(Body):
    """The other side's challenge, and its proof of the secret over both challenges."""

    challenge: str = field(STR)
    proof: str = field(STR)


@message
class Auth(Body):
    """The connecting peer's proof of the secret over both challenges."""

    id: str = field(STR)
    proof: str = field(STR)


@message
class Admin(Body):
    """The overlay's admin token, for `leave` and `delete` on this connection."""

    token: str = field(STR)


@message
class OverlayInfo(Body):
    id: str = field(STR)
    address: str = field(STR)
    space: CoordinateSpace = field(SPACE)
    algorithm: str = field(STR)
    overlay: str = field(STR, default="")      # the overlay's own id, fixed by its first peer
    replicas: int = field(INT, default=1)      # copies of every zone (R)


@message
class Publish(Body):
    """Events to store; each stays atomic and idempotent on its own (a batch only shares messages)."""

    events: tuple[CompoundEvent, ...] = field(LIST(EVENT))


@message
class Receipt(Body):
    graph: str = field(STR)
    published: int = field(INT)     # hybrid-clock publication time
    quads: int = field(INT)


@message
class Published(Body):
    receipts: tuple[Receipt, ...] = field(LIST(NESTED(Receipt)))


@message
class Find(Body):
    """A quad pattern (null = any) to look up, or count."""

    pattern: tuple[Term | None, Term | None, Term | None, Term | None] = field(PATTERN, default=ALL)
    pending: bool = field(BOOL, default=False)   # peers only: include events not yet committed


@message
class Quads(Body):
    quads: tuple[Quad, ...] = field(LIST(QUAD))


@message
class Counted(Body):
    count: int = field(INT)


@message
class Sparql(Body):
    query: str = field(STR)


@message
class SparqlResult(Body):
    """`form`: solutions or boolean (`text` is SPARQL 1.1 JSON results), graph (`text` is N-Triples)."""

    form: str = field(STR)
    text: str = field(STR)
    candidates: int = field(INT, default=0)
    seconds: float = field(FLOAT, default=0.0)


@message
class Delete(Body):
    graph: IRI = field(IRI_)


@message
class Deleted(Body):
    removed: int = field(INT)


@message
class PeerStatus(Body):
    id: str = field(STR)
    address: str = field(STR)
    zone: Zone = field(ZONE)
    quads: int = field(INT)
    events: int = field(INT)
    subscriptions: int = field(INT)
    neighbours: dict[str, str] = field(MAP)        # id -> address
    counters: dict[str, int] = field(MAP)
    down: bool = field(BOOL, default=False)        # did not answer (the other fields are its last known)


@message
class Status(Body):
    peers: tuple[PeerStatus, ...] = field(LIST(NESTED(PeerStatus)))
    space: CoordinateSpace = field(SPACE)
    algorithm: str = field(STR)


@message
class Subscribe(Body):
    sparql: str = field(STR)
    kind: str = field(STR, default="bindings")   # signal | bindings | event

    def __post_init__(self) -> None:
        if self.kind not in NOTIFICATION_KINDS:
            raise BadRequest(f"unknown notification kind {self.kind!r}: use one of {', '.join(NOTIFICATION_KINDS)}")


@message
class Subscribed(Body):
    id: str = field(STR)
    t: int = field(INT)            # the subscription's indexation time (hybrid clock)
    patterns: int = field(INT)


@message
class Unsubscribe(Body):
    id: str = field(STR)


@message
class SubscriptionId(Body):
    id: str = field(STR)


@message
class Left(Body):
    heir: str = field(STR)


@message
class Notification(Body):
    """Pushed to a subscriber: one matching (subscription, event) pair."""

    subscription: str = field(STR)
    event: str = field(STR)                       # the compound event's graph IRI
    kind: str = field(STR)
    published: int = field(INT, default=0)
    solutions: tuple[dict[str, Term], ...] = field(SOLUTIONS, default=())   # bindings kind: every solution
    quads: tuple[Quad, ...] = field(LIST(QUAD), default=())                  # event kind: every quad
    error: str | None = field(OPT(STR), default=None)                        # when it could not be completed
    truncated: bool = field(BOOL, default=False)   # more solutions than a notification carries (MAX_SOLUTIONS)


# --- peer operations --------------------------------------------------------------------------

@message
class Route(Body):
    """Run `op` with `body` on the owner of `point`, hop by hop (`hops` so far)."""

    point: Point = field(POINT)
    op: str = field(STR)
    body: dict[str, Any] = field(MAP)
    hops: int = field(INT, default=0)
    avoid: tuple[str, ...] = field(LIST(STR), default=())     # peers found unreachable on the way
    visited: tuple[str, ...] = field(LIST(STR), default=())   # peers the request passed (never revisited)


@message
class Routed(Body):
    result: Any = field(RAW, default=None)


@message
class Multicast(Body):
    """Run `op` with `body` on every peer whose zone meets `box` (results gathered up the tree)."""

    box: Box = field(BOX)
    op: str = field(STR)
    body: dict[str, Any] = field(MAP)
    partial: bool = field(BOOL, default=False)   # report unreachable peers as down instead of failing


@message
class Delivery(Body):
    """Quads of one event on their way to their owners.

    `quads` holds triples [s, p, o] of the event `graph`; `take` lists the indexes of those to
    store in the receiving subtree (null: all of them). Under OSMA `quads` is the whole event
    (every owner matches it) and `take` selects; under CSMA `quads` holds only what is routed.
    """

    graph: str = field(STR)
    size: int = field(INT)                  # quads in the whole event
    published: int = field(INT)             # publication time (hybrid clock)
    quads: tuple[Any, ...] = field(LIST(RAW))
    take: tuple[int, ...] | None = field(OPT(LIST(INT)), default=None)
    whole: bool = field(BOOL, default=False)
    tx: tuple[Any, ...] | None = field(OPT(LIST(RAW)), default=None)   # pending until its entry decides


@message
class Deliver(Body):
    deliveries: tuple[Delivery, ...] = field(LIST(NESTED(Delivery)))


@message
class Delivered(Body):
    """Where the quads went: the addresses of the peers that stored some (for the commit)."""

    owners: tuple[str, ...] = field(LIST(STR), default=())


@message
class Commit(Body):
    """From an entry peer to the owners: these events are decided; make them visible and match them."""

    graphs: tuple[str, ...] = field(LIST(STR))


@message
class Resolve(Body):
    """To the peer holding a publication attempt's decision: committed, aborted or still unknown?"""

    key: str = field(STR)
    abort_if_unknown: bool = field(BOOL, default=False)


@message
class Notify(Body):
    """From the notifying peer to the subscription's entry peer."""

    subscription: str = field(STR)
    event: str = field(STR)
    size: int = field(INT)
    published: int = field(INT)
    csma: bool = field(BOOL, default=False)      # bindings/quads to be reconstructed at the entry
    solutions: tuple[dict[str, Term], ...] | None = field(OPT(SOLUTIONS), default=None)
    quads: tuple[Quad, ...] | None = field(OPT(LIST(QUAD)), default=None)
    truncated: bool = field(BOOL, default=False)


@message
class SubscriptionRecord(Body):
    """What every peer of a subscription's box stores about it."""

    id: str = field(STR)
    sparql: str = field(STR)
    kind: str = field(STR)
    entry: str = field(STR)        # address of the entry peer that delivers its notifications
    t: int = field(INT)            # indexation time


@message
class StoreSubscription(Body):
    record: SubscriptionRecord = field(NESTED(SubscriptionRecord))


@message
class CsmaStep(Body):
    """A rewritten subscription routed to the peers of its next pattern."""

    record: SubscriptionRecord = field(NESTED(SubscriptionRecord))
    partial: PartialMatch = field(PARTIAL)
    graph: str = field(STR)
    size: int = field(INT)
    published: int = field(INT)


@message
class EventMeta(Body):
    graph: str = field(STR)
    size: int = field(INT)
    published: int = field(INT)
    committed: bool = field(BOOL, default=True)
    notified: bool = field(BOOL, default=False)
    tx: tuple[Any, ...] | None = field(OPT(LIST(RAW)), default=None)


@message
class Decision(Body):
    """An entry peer's decision on one publication attempt, kept at a point of its zone."""

    key: str = field(STR)
    decision: str = field(STR)
    point: Point = field(POINT)


@message
class Handover(Body):
    """A zone's content changing hands (join split, leave): quads, their events, subscriptions,
    and the publication decisions kept in it."""

    quads: tuple[Quad, ...] = field(LIST(QUAD), default=())
    events: tuple[EventMeta, ...] = field(LIST(NESTED(EventMeta)), default=())
    subscriptions: tuple[SubscriptionRecord, ...] = field(LIST(NESTED(SubscriptionRecord)), default=())
    decisions: tuple[Decision, ...] = field(LIST(NESTED(Decision)), default=())


@message
class JoinRequest(Body):
    id: str = field(STR)
    address: str = field(STR)


@message
class JoinGrant(Body):
    zone: Zone = field(ZONE)
    neighbours: dict[str, Neighbour] = field(NEIGHBOURS)
    algorithm: str = field(STR)
    owner_id: str = field(STR)
    owner_address: str = field(STR)
    data: Handover = field(NESTED(Handover))
    overlay: str = field(STR, default="")
    replicas: int = field(INT, default=1)


@message
class JoinCommit(Body):
    id: str = field(STR)


@message
class Announce(Body):
    """New or changed zones (`peers`) and departed peers (`removed`)."""

    peers: dict[str, Neighbour] = field(NEIGHBOURS, default=None)
    removed: tuple[str, ...] = field(LIST(STR), default=())


@message
class Table(Body):
    me: tuple[str, Neighbour] = field(NEIGHBOUR, key="self")
    neighbours: dict[str, Neighbour] = field(NEIGHBOURS)


@message
class TakeOver(Body):
    id: str = field(STR)
    zone: Zone = field(ZONE)
    neighbours: dict[str, Neighbour] = field(NEIGHBOURS)
    data: Handover = field(NESTED(Handover))


@message
class PeerId(Body):
    id: str = field(STR)


# --- replication and failure detection ----------------------------------------------------------

@message
class Replicate(Body):
    """Store mutations an owner applied to its zone, on the replica it chose (acknowledged once durable)."""

    owner: str = field(STR)
    incarnation: int = field(INT)
    batches: tuple[Any, ...] = field(LIST(RAW))


@message
class ReplicaSync(Body):
    """A full copy of an owner's zone, in chunks: the first resets the copy, the last ends it."""

    owner: str = field(STR)
    incarnation: int = field(INT)
    state: dict[str, Any] | None = field(OPT(MAP), default=None)   # the owner's peer state, first chunk
    batches: tuple[Any, ...] = field(LIST(RAW), default=())
    reset: bool = field(BOOL, default=False)
    done: bool = field(BOOL, default=False)


@message
class ReplicaState(Body):
    """The owner's peer state (zone, neighbours), so a takeover starts from it."""

    owner: str = field(STR)
    incarnation: int = field(INT)
    state: dict[str, Any] = field(MAP)


@message
class ReplicaOf(Body):
    owner: str = field(STR)
    incarnation: int = field(INT, default=0)


@message
class ReplicaStatus(Body):
    """What a replica holds of an owner: whether it took its zone over, and at which incarnation."""

    held: bool = field(BOOL)
    taken_over: bool = field(BOOL, default=False)
    incarnation: int = field(INT, default=0)
    address: str | None = field(OPT(STR), default=None)    # the stand-in's, after a takeover


@message
class Probe(Body):
    """Can you reach this peer? (the indirect check before a takeover)"""

    id: str = field(STR)
    address: str = field(STR)


@message
class ProbeResult(Body):
    reachable: bool = field(BOOL)
    departed: bool = field(BOOL, default=False)   # it left the overlay gracefully


#: Request body type of each operation a connection may carry or a route may run.
REQUESTS: dict[Op, type[Body]] = {
    Op.PING: Empty, Op.HELLO: Hello, Op.AUTH: Auth, Op.ADMIN: Admin, Op.OVERLAY_INFO: Empty, Op.PUBLISH: Publish, Op.FIND: Find, Op.COUNT: Find,
    Op.SPARQL: Sparql, Op.DELETE: Delete, Op.STATUS: Empty, Op.SUBSCRIBE: Subscribe,
    Op.UNSUBSCRIBE: Unsubscribe, Op.LEAVE: Empty,
    Op.ROUTE: Route, Op.DELIVER: Deliver, Op.COMMIT: Commit, Op.NOTIFY: Notify, Op.JOIN_COMMIT: JoinCommit,
    Op.NEIGHBOURS: Announce, Op.TAKE_OVER: TakeOver, Op.TABLE: Empty, Op.PROBE: Probe, Op.REPLICATE: Replicate,
    Op.REPLICA_SYNC: ReplicaSync, Op.REPLICA_STATE: ReplicaState, Op.REPLICA_DROP: ReplicaOf,
    Op.REPLICA_STATUS: ReplicaOf,
    Op.MCAST: Multicast, Op.JOIN_SPLIT: JoinRequest, Op.DELIVER_LOCAL: Delivery, Op.FIND_LOCAL: Find,
    Op.COUNT_LOCAL: Find, Op.DELETE_LOCAL: Delete, Op.STATUS_LOCAL: Empty, Op.CLOCK: Empty,
    Op.STORE_SUB: StoreSubscription, Op.REMOVE_SUB: SubscriptionId, Op.CSMA_SUB: CsmaStep, Op.RESOLVE: Resolve,
    Op.NOTIFICATION: Notification,
}

#: Reply body type of each client and peer operation (routed operations reply with plain values).
REPLIES: dict[Op, type[Body]] = {
    Op.PING: Pong, Op.HELLO: Challenge, Op.AUTH: PeerId, Op.ADMIN: Empty, Op.OVERLAY_INFO: OverlayInfo, Op.PUBLISH: Published, Op.FIND: Quads, Op.COUNT: Counted,
    Op.SPARQL: SparqlResult, Op.DELETE: Deleted, Op.STATUS: Status, Op.SUBSCRIBE: Subscribed,
    Op.UNSUBSCRIBE: SubscriptionId, Op.LEAVE: Left,
    Op.ROUTE: Routed, Op.DELIVER: Delivered, Op.COMMIT: Empty, Op.NOTIFY: Empty, Op.JOIN_COMMIT: Empty, Op.NEIGHBOURS: PeerId,
    Op.TAKE_OVER: PeerId, Op.TABLE: Table, Op.PROBE: ProbeResult, Op.REPLICATE: Empty, Op.REPLICA_SYNC: Empty,
    Op.REPLICA_STATE: Empty, Op.REPLICA_DROP: Empty, Op.REPLICA_STATUS: ReplicaStatus,
}
