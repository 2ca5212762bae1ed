"""Bodies of the client operations and pushes: what a client in any language sends and gets.

Fields are encoded by the codecs of `eventcloud.wire.fields`; a body that does not fit its
class is refused with a BadRequest naming the class and field (docs/protocol.md).
"""

from __future__ import annotations

from typing import Any, Callable

from eventcloud.errors import BadRequest
from eventcloud.overlay.coordinates import CoordinateSpace
from eventcloud.overlay.zones import Zone
from eventcloud.rdf.model import CompoundEvent, Quad, Term
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.fields import (
    ALL, EVENT, IRI_, NOTIFICATION_KINDS, PATTERN, QUAD, SOLUTIONS, SPACE, TAXONOMY, ZONE,
)
from eventcloud.wire.schema import BOOL, FLOAT, INT, LIST, MAP, NESTED, OPT, RAW, STR, Body, field, message

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
    replica: str = field(STR, default="")   # the peer holding this peer's zone copy now ("": none or not said)
    clock: int | None = field(OPT(INT), default=None)   # its wall clock (Unix ms) as it answered: peers compare


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
class Publisher(Body):
    """A publish token: the graph IRI namespaces this connection may publish under, where the
    overlay has a publish policy."""

    token: str = field(STR)


@message
class OverlayInfo(Body):
    id: str = field(STR)
    address: str = field(STR)
    space: CoordinateSpace = field(SPACE)
    algorithm: str = field(STR)
    overlay: str = field(STR, default="")      # the overlay's own id, fixed by its first peer
    replicas: int = field(INT, default=1)      # copies of every zone (R)
    peers: tuple[str, ...] = field(LIST(STR), default=())   # addresses of its neighbours (more entry points)
    operators: tuple[str, ...] = field(LIST(STR), default=())   # IRIs of the operators its FILTERs may call
    authority: str = field(STR, default="")    # its ownership authority, for peers joining without one named


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
    estimate: bool = field(BOOL, default=False)  # peers only (a count): every stored match, a planner's guess
    page: bool = field(BOOL, default=False)      # answer in pages: the first, and a cursor for the rest


@message
class Quads(Body):
    quads: tuple[Quad, ...] = field(LIST(QUAD))
    cursor: str = field(STR, default="")   # paged: more quads follow, pulled with cursor_next


@message
class Counted(Body):
    count: int = field(INT)


@message
class Sparql(Body):
    query: str = field(STR)
    page: bool = field(BOOL, default=False)   # SELECT answers in pages: the first, and a cursor for the rest


@message
class SparqlResult(Body):
    """`form`: solutions or boolean (`text` is SPARQL 1.1 JSON results), graph (`text` is N-Triples)."""

    form: str = field(STR)
    text: str = field(STR)
    candidates: int = field(INT, default=0)
    seconds: float = field(FLOAT, default=0.0)
    # paged solutions: `text` is empty; the variables, the first rows (SPARQL JSON term maps), and
    # the cursor of the rest ("" when these were all)
    variables: tuple[str, ...] = field(LIST(STR), default=())
    rows: tuple[Any, ...] = field(LIST(RAW), default=())
    cursor: str = field(STR, default="")


@message
class CursorNext(Body):
    """`cursor_next`, `cursor_close`: the next page of a paged answer, or no more of it. `seq`
    numbers the pages asked for (1, 2, …; the reply that opened the cursor was page 0): asked
    again, the last page is sent again (a retried request never skips one); 0: not checked."""

    id: str = field(STR)
    seq: int = field(INT, default=0)


@message
class Page(Body):
    """A page of a paged answer: quads (as `find` encodes them) or rows; `more`: pull again."""

    rows: tuple[Any, ...] = field(LIST(RAW))
    more: bool = field(BOOL)


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
    quads: int = field(INT)                        # stored here, those of events not yet committed here included
    events: int = field(INT)                       # of which it holds quads (likewise)
    subscriptions: int = field(INT)
    neighbours: dict[str, str] = field(MAP)        # id -> address
    counters: dict[str, int] = field(MAP)
    down: bool = field(BOOL, default=False)        # did not answer (the other fields are its last known)
    pending: int = field(INT, default=0)           # of `quads`, those of events not known committed here yet
    # counted at one peer each, so that sums over peers are totals (an event's quads and a
    # subscription are held by several): graph IRIs claimed here, subscriptions whose box's
    # lowest corner is in this zone
    events_claimed: int = field(INT, default=0)
    subscriptions_homed: int = field(INT, default=0)


@message
class Status(Body):
    peers: tuple[PeerStatus, ...] = field(LIST(NESTED(PeerStatus)))
    space: CoordinateSpace = field(SPACE)
    algorithm: str = field(STR)


@message
class Subscribe(Body):
    sparql: str = field(STR)
    kind: str = field(STR, default="bindings")   # signal | bindings | event
    durable: bool = field(BOOL, default=False)   # kept, numbered and replayed across connections
    lease: float = field(FLOAT, default=0.0)     # seconds of validity (durable; 0: the peer's default)

    def __post_init__(self) -> None:
        if self.kind not in NOTIFICATION_KINDS:
            raise BadRequest(f"unknown notification kind {self.kind!r}: use one of {', '.join(NOTIFICATION_KINDS)}")
        if not 0 <= self.lease <= 10 * 365 * 86400:
            raise BadRequest(f"lease must be a number of seconds between 0 and ten years, got {self.lease!r}")


@message
class Subscribed(Body):
    id: str = field(STR)
    t: int = field(INT)            # the subscription's indexation time (hybrid clock)
    patterns: int = field(INT)
    durable: bool = field(BOOL, default=False)
    ticket: str = field(STR, default="")       # durable: the secret that authorises attach, renew, cancel
    expires: int = field(INT, default=0)       # durable: end of the lease (Unix time, ms)


#: The most subscriptions one `subscribe_many` request may register (the SDK splits larger lists).
MAX_SUBSCRIBE_MANY = 1000


@message
class SubscribeMany(Body):
    """Several subscriptions in one request: each is made, or refused, on its own (a batch only
    shares messages: the entry peer stores all of them in one multicast)."""

    items: tuple[Subscribe, ...] = field(LIST(NESTED(Subscribe)))

    def __post_init__(self) -> None:
        if not 1 <= len(self.items) <= MAX_SUBSCRIBE_MANY:
            raise BadRequest(f"subscribe_many takes 1 to {MAX_SUBSCRIBE_MANY} subscriptions, got {len(self.items)}")


@message
class SubscribeOutcome(Body):
    """One item of a `subscribe_many`: made (`subscribed`), or refused (`code`, `message`)."""

    subscribed: Subscribed | None = field(OPT(NESTED(Subscribed)), default=None)
    code: str = field(STR, default="")
    message: str = field(STR, default="")


@message
class SubscribedMany(Body):
    outcomes: tuple[SubscribeOutcome, ...] = field(LIST(NESTED(SubscribeOutcome)))   # in the request's order


@message
class Unsubscribe(Body):
    id: str = field(STR)
    ticket: str = field(STR, default="")       # a durable subscription's ticket (from any connection)


@message
class Attach(Body):
    """Receive a durable subscription's notifications on this connection: those numbered after
    `after` (null: after the last one acknowledged), then new ones."""

    id: str = field(STR)
    ticket: str = field(STR)
    after: int | None = field(OPT(INT), default=None)


@message
class Attached(Body):
    id: str = field(STR)
    sparql: str = field(STR)
    kind: str = field(STR)
    expires: int = field(INT)      # end of the lease (Unix time, ms)
    after: int = field(INT)        # notifications numbered after this one follow
    last: int = field(INT)         # the newest number so far
    acked: int = field(INT)        # the highest number acknowledged


@message
class Ack(Body):
    """The subscriber has every notification of `id` up to number `seq`: they need not be kept."""

    id: str = field(STR)
    seq: int = field(INT)


@message
class Renew(Body):
    id: str = field(STR)
    ticket: str = field(STR)
    lease: float = field(FLOAT, default=0.0)   # seconds from now (0: the peer's default)


@message
class Renewed(Body):
    id: str = field(STR)
    expires: int = field(INT)


@message
class SubscriptionInfo(Body):
    """One subscription as `subscriptions` lists it (never its ticket)."""

    id: str = field(STR)
    sparql: str = field(STR)
    kind: str = field(STR)
    durable: bool = field(BOOL)
    entry: str = field(STR, default="")        # non-durable: the peer its subscriber is connected to
    expires: int = field(INT, default=0)
    peers: int = field(INT, default=0)         # peers storing it
    retained: int = field(INT, default=0)      # durable: notifications kept, not yet acknowledged
    last: int = field(INT, default=0)
    acked: int = field(INT, default=0)
    dropped: int = field(INT, default=0)       # dropped unacknowledged (retention overflow)
    attached: str = field(STR, default="")     # durable: the peer delivering it now ("" if none)


@message
class SubscriptionList(Body):
    subscriptions: tuple[SubscriptionInfo, ...] = field(LIST(NESTED(SubscriptionInfo)))


@message
class Ended(Body):
    """Pushed when a subscription ends for good (expired, cancelled, attached elsewhere)."""

    subscription: str = field(STR)
    code: str = field(STR)
    reason: str = field(STR)


@message
class SubscriptionId(Body):
    id: str = field(STR)


@message
class Left(Body):
    heir: str = field(STR)


@message
class SchemaLoad(Body):
    """A class taxonomy for the whole overlay (its version is chosen by the entry peer)."""

    taxonomy: Taxonomy = field(TAXONOMY)


@message
class PeerSchema(Body):
    """The taxonomy version one peer matches with."""

    id: str = field(STR)
    version: int = field(INT)
    digest: str = field(STR)


@message
class SchemaInfo(Body):
    """The overlay's taxonomy as the entry peer holds it, and each peer's version (`schema`);
    after `schema_load`, the version loaded and the peers that hold it already."""

    taxonomy: Taxonomy = field(TAXONOMY)
    peers: tuple[PeerSchema, ...] = field(LIST(NESTED(PeerSchema)), default=())
    unreachable: tuple[str, ...] = field(LIST(STR), default=())   # peers that will catch up later


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
    seq: int = field(INT, default=0)               # durable: its number in the subscription (1, 2, …)
    gap: tuple[int, ...] | None = field(OPT(LIST(INT)), default=None)  # kind "gap": numbers dropped

    def json_fields(self, solutions: Callable[[tuple[dict[str, Term], ...]], dict[str, Any]]) -> dict[str, Any]:
        """What every JSON form of a notification (the CLI's lines, the gateway's SSE and WebSocket
        messages) says of its content, in the same words: the solutions as `solutions` renders
        them (bindings kind: each form writes terms its own way), the quads as N-Quads lines
        (event kind), and error, truncated and gap only when they apply. The head (ids,
        numbers, times) is each form's own."""
        out: dict[str, Any] = {}
        if self.kind == "bindings":
            out.update(solutions(self.solutions))
        if self.kind == "event":
            out["quads"] = [q.n_quads() for q in self.quads]
        if self.error:
            out["error"] = self.error
        if self.truncated:
            out["truncated"] = True
        if self.gap:
            out["gap"] = list(self.gap)
        return out
