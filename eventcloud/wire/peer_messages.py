"""Bodies of the peer operations and routed operations: what peers say to each other."""

from __future__ import annotations

from typing import Any

from eventcloud.matching.csma import PartialMatch
from eventcloud.overlay.coordinates import Box, Point
from eventcloud.overlay.plans import Neighbour
from eventcloud.overlay.zones import Zone
from eventcloud.rdf.model import Quad, Term
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.client_messages import Notification
from eventcloud.wire.fields import (
    BATCH, BOX, LEASE, NEIGHBOUR, NEIGHBOURS, PARTIAL, PEER_ID, POINT, QUAD, SOLUTIONS, TAXONOMY, ZONE,
)
from eventcloud.wire.schema import BOOL, INT, LIST, MAP, NESTED, OPT, RAW, STR, Body, field, message

@message
class Route(Body):
    """Run `op` with `body` on the owner of `point`, hop by hop (`hops` so far)."""

    point: Point = field(POINT)
    op: str = field(STR)
    body: dict[str, Any] = field(MAP)
    hops: int = field(INT, default=0)
    avoid: tuple[str, ...] = field(LIST(STR), default=())     # peers found unreachable on the way
    visited: tuple[str, ...] = field(LIST(STR), default=())   # peers the request passed (never revisited)
    to: str = field(STR, default="")      # the peer meant (another one listening at that address refuses)


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
class MulticastItem(Body):
    """One item of a `mcast_each`: its own body, run on the peers whose zone meets its box."""

    index: int = field(INT)            # its place in the sender's list (results come back by it)
    box: Box = field(BOX)
    body: dict[str, Any] = field(MAP)


@message
class MulticastEach(Body):
    """Run `op` once per item on every peer whose zone meets that item's box: one tree over
    `box` (the items' hull), each peer forwarding a child only the items whose box meets what
    the child's subtree can reach (docs/overlay.md, "Multicast")."""

    box: Box = field(BOX)
    op: str = field(STR)
    items: tuple[MulticastItem, ...] = field(LIST(NESTED(MulticastItem)))


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
    origin: str = field(STR, default="")    # CSMA: the entry peer it was published at (it has it whole)
    passed: tuple[str, ...] = field(LIST(STR), default=())   # the peers (ids) it went through: never back


@message
class Deliver(Body):
    deliveries: tuple[Delivery, ...] = field(LIST(NESTED(Delivery)))


@message
class Delivered(Body):
    """Where the quads went: the addresses of the peers that stored some, and of those among
    them that need the commit at once (a quad they store fits a stored subscription's indexing
    pattern: they may start a chain or notify; the others learn the decision later, in bulk).
    With their zones, the entry delivers the next events for those zones straight to them."""

    owners: tuple[str, ...] = field(LIST(STR), default=())
    backlog: int = field(INT, default=0)   # the longest matching queue among them (admission control)
    prompt: tuple[str, ...] = field(LIST(STR), default=())
    zones: tuple[Zone, ...] = field(LIST(ZONE), default=())   # the zone of each owner, in order (or none)


@message
class Commit(Body):
    """From an entry peer to the owners: these events are decided; make them visible and match them."""

    graphs: tuple[str, ...] = field(LIST(STR))


@message
class EventGet(Body):
    """`event_get`, to the peer an event was published at: its quads, if it still keeps them
    (a CSMA notification's entry needs the whole event; asking here saves a multicast)."""

    graph: str = field(STR)


@message
class GraphClaim(Body):
    """To the owner of a graph IRI's claim point: this event's content (`digest`) is the graph's,
    unless another content claimed it first (`claim_graph` answers the digest that stands);
    `release_graph` forgets the claim once the event is deleted."""

    graph: str = field(STR)
    digest: str = field(STR, default="")


@message
class Resolve(Body):
    """To the peer holding publication attempts' decisions: committed, aborted or still
    unknown? One answer per key, in order (an owner asks for all it holds pending at once)."""

    keys: tuple[str, ...] = field(LIST(STR))
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
    verify: bool = field(BOOL, default=False)    # CSMA: the chain was another's, evaluate on the whole event
    origin: str = field(STR, default="")         # CSMA: the peer the event was published at (`event_get`)


@message
class Notifies(Body):
    """Notifications for subscriptions entered at one peer, merged (`notify`)."""

    items: tuple[Notify, ...] = field(LIST(NESTED(Notify)))


@message
class Notified(Body):
    """The entry's answer: the subscriptions it does not hold (their connection closed, or the
    entry restarted), which the notifying peer drops instead of matching them ever again."""

    unknown: tuple[str, ...] = field(LIST(STR), default=())


@message
class SubscriptionRecord(Body):
    """What every peer of a subscription's box stores about it."""

    id: str = field(STR)
    sparql: str = field(STR)
    kind: str = field(STR)
    entry: str = field(STR)        # address of the entry peer that delivers its notifications
    t: int = field(INT)            # indexation time
    home: Point | None = field(OPT(POINT), default=None)   # durable: its mailbox is at this point's owner
    expires: int = field(INT, default=0)                   # end of its lease (Unix time, ms; 0: none)
    # its parsed form (wire.parsed), so that the peers of its box build it without parsing the
    # text; sent with STORE_SUB and zone hand-overs and persisted, left out of CSMA steps
    parsed: Any = field(OPT(RAW), default=None)


@message
class StoreSubscription(Body):
    record: SubscriptionRecord = field(NESTED(SubscriptionRecord))


@message
class ChainMember(Body):
    """A subscription riding a CSMA chain: identical to the chain's own (same patterns and
    FILTERs), or contained in it (every event it matches, the chain's matches, from the same
    first quad). The chain runs once for all of them and notifies each when it completes; a
    contained one is then evaluated on the whole event by whoever delivers it."""

    id: str = field(STR)
    entry: str = field(STR)        # its entry peer ('' for a durable one)
    home: Point | None = field(OPT(POINT), default=None)   # durable: its mailbox's point
    contained: bool = field(BOOL, default=False)


@message
class CsmaStep(Body):
    """A rewritten subscription routed to the peers of its next pattern."""

    record: SubscriptionRecord = field(NESTED(SubscriptionRecord))
    partial: PartialMatch = field(PARTIAL)
    graph: str = field(STR)
    size: int = field(INT)
    published: int = field(INT)
    members: tuple[ChainMember, ...] | None = field(OPT(LIST(NESTED(ChainMember))), default=None)  # none: left out
    origin: str = field(STR, default="")   # the peer the event was published at


@message
class MailboxOpen(Body):
    id: str = field(STR)
    record: dict[str, Any] = field(MAP)


@message
class MailboxAttach(Body):
    """An entry peer attaching a subscriber's connection to a mailbox (again every few seconds:
    a home that took the zone over learns the attachment that way)."""

    id: str = field(STR)
    ticket: str = field(STR)
    entry: str = field(STR)
    epoch: int = field(INT)        # when the entry peer attached it (hybrid clock): the latest wins
    after: int | None = field(OPT(INT), default=None)   # null: after the last one acknowledged


@message
class MailboxAck(Body):
    id: str = field(STR)
    epoch: int = field(INT)
    seq: int = field(INT)


@message
class MailboxDeliver(Body):
    """From a mailbox's home to the entry peer its subscriber is attached to."""

    id: str = field(STR)
    epoch: int = field(INT)
    notes: tuple[Notification, ...] = field(LIST(NESTED(Notification)))
    ended: str = field(STR, default="")     # the subscription ended (why): nothing more will come


@message
class MailboxEnd(Body):
    """Renew (lease > 0) or cancel a durable subscription at its home, with its ticket (or as admin)."""

    id: str = field(STR)
    ticket: str = field(STR, default="")
    admin: bool = field(BOOL, default=False)
    lease_ms: int = field(INT, default=0)


@message
class Leases(Body):
    """New lease ends of subscriptions, for every peer storing them: [[id, expires], …]."""

    leases: tuple[tuple[str, int], ...] = field(LIST(LEASE))


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
    mailboxes: tuple[bytes, ...] = field(LIST(RAW), default=())   # packed mailboxes homed in the zone


@message
class JoinRequest(Body):
    """`join_split`: split the zone of the point this reaches for the joiner. An annex names
    the side it takes (`annex`) of the zone it was offered (`of`): refused if that zone changed."""

    id: str = field(STR)
    address: str = field(STR)
    operators: tuple[str, ...] = field(LIST(STR), default=())   # the joiner's operator IRIs (must be the overlay's)
    of: Zone | None = field(OPT(ZONE), default=None)
    annex: Zone | None = field(OPT(ZONE), default=None)


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
    remaining: int = field(INT, default=0)   # quads still to fetch with join_data after `data`'s


@message
class NextChunk(Body):
    """`join_data`, `leave_data`: the next quads of a pending handover, from `offset` on (`id`:
    the peer taking them)."""

    id: str = field(STR)
    offset: int = field(INT)


@message
class LoadAsk(Body):
    """`load`: how busy a peer is; with `cut`, also how many quads a peer joining it would take."""

    cut: bool = field(BOOL, default=False)
    mover: str = field(STR, default="")     # with `cut`: the asking peer's address, when it would move here
    holds: int = field(INT, default=0)      # ... and the quads it holds (what `gains_enough` weighs)


@message
class Load(Body):
    """`load` / `load_local`: how busy a peer is, so a joiner can pick whom to split (docs/overlay.md)."""

    id: str = field(STR)
    address: str = field(STR)
    quads: int = field(INT)
    zone: Zone = field(ZONE)
    neighbours: tuple[str, ...] = field(LIST(STR), default=())   # their addresses, where the climb goes on
    takes: int = field(INT, default=-1)   # asked with `cut`: quads a peer joining here would take (-1: not asked)
    promised: bool = field(BOOL, default=False)   # another mover for whom a move here is worth it asked first
    host_quads: int = field(INT, default=-1)   # the quads of every peer its process runs (-1: an older peer)
    host_busiest: str = field(STR, default="")   # ... and the address of the one holding most


@message
class JoinCommit(Body):
    id: str = field(STR)


@message
class Announce(Body):
    """New or changed zones (`peers`), departed peers (`removed`), and entries to drop from
    tables without taking their peers for departed (`stale`: a zone from before a split)."""

    peers: dict[str, Neighbour] = field(NEIGHBOURS, default=None)
    removed: tuple[str, ...] = field(LIST(STR), default=())
    stale: tuple[str, ...] = field(LIST(STR), default=())


@message
class Table(Body):
    me: tuple[str, Neighbour] = field(NEIGHBOUR, key="self")
    neighbours: dict[str, Neighbour] = field(NEIGHBOURS)


@message
class TakeOver(Body):
    """`take_over`: a leaving peer's zone for the heir; `data` holds its first quads, the heir
    fetches the `remaining` ones from `address` with `leave_data` before the zones merge, once
    the ownership authority agrees the leaver's zone is still at epoch `incarnation` and its
    leave attempt `leave` undecided (peers/membership/merges.py)."""

    id: str = field(STR)
    zone: Zone = field(ZONE)
    neighbours: dict[str, Neighbour] = field(NEIGHBOURS)
    data: Handover = field(NESTED(Handover))
    address: str = field(STR, default="")
    remaining: int = field(INT, default=0)
    incarnation: int | None = field(OPT(INT), default=None)   # the zone's epoch it leaves at (None: older peers)
    leave: str = field(STR, default="")   # the attempt the authority decides ("": no authority)


@message
class StepAside(Body):
    """`step_aside`: a peer that cannot leave asks a neighbour to hand its zone to a neighbour of
    its own inside `within` and to rejoin as a new peer `rejoin_after_ms` later (docs/overlay.md)."""

    within: Box = field(BOX)
    rejoin_after_ms: int = field(INT)


@message
class AnnexAsk(Body):
    """`annex_offer`: what would taking a zone with these neighbours (ids) cost your host?"""

    neighbours: tuple[str, ...] = field(LIST(STR))


@message
class AnnexOffer(Body):
    """A host's answer: its distinct neighbours now and with the annex, and the zones it owns."""

    host: str = field(STR)
    now: int = field(INT)
    after: int = field(INT)
    zones: int = field(INT)


@message
class AdoptAnnex(Body):
    """`annex_adopt`: start a peer in your process that takes side `annex` of zone `of`, owned by
    the peer at `owner`; the reply (`PeerId`) comes once it serves it."""

    owner: str = field(STR)
    of: Zone = field(ZONE)
    annex: Zone = field(ZONE)


@message
class PeerId(Body):
    id: str = field(STR)


# --- replication and failure detection ----------------------------------------------------------

@message
class Replicate(Body):
    """Store mutations an owner applied to its zone, on the replica it chose (acknowledged once durable)."""

    owner: str = field(PEER_ID)
    incarnation: int = field(INT)
    batches: tuple[Any, ...] = field(LIST(BATCH))


@message
class ReplicaSync(Body):
    """A full copy of an owner's zone, in chunks: the first resets the copy, the last ends it."""

    owner: str = field(PEER_ID)
    incarnation: int = field(INT)
    state: dict[str, Any] | None = field(OPT(MAP), default=None)   # the owner's peer state, first chunk
    batches: tuple[Any, ...] = field(LIST(BATCH), default=())
    reset: bool = field(BOOL, default=False)
    done: bool = field(BOOL, default=False)
    to: str = field(STR, default="")   # the peer the owner chose for its copy (another may answer there now)


@message
class ReplicaState(Body):
    """The owner's peer state (zone, neighbours), so a takeover starts from it."""

    owner: str = field(PEER_ID)
    incarnation: int = field(INT)
    state: dict[str, Any] = field(MAP)


@message
class ReplicaOf(Body):
    owner: str = field(PEER_ID)
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

    id: str = field(PEER_ID)
    address: str = field(STR)


@message
class ProbeResult(Body):
    reachable: bool = field(BOOL)
    departed: bool = field(BOOL, default=False)   # it left the overlay gracefully


@message
class SchemaNewer(Body):
    """`schema_fetch`: the asking peer's taxonomy version; the answer holds a newer one, if any."""

    version: int = field(INT)


@message
class SchemaOffer(Body):
    taxonomy: Taxonomy | None = field(OPT(TAXONOMY), default=None)


@message
class SparqlLocal(Body):
    """`sparql_local`: queries over one triple pattern that each peer of its box runs on its own
    quads (eventcloud.sparql.distributed); each answers with rows (SPARQL JSON terms) or a boolean."""

    texts: tuple[str, ...] = field(LIST(STR))
    limit: int | None = field(OPT(INT), default=None)      # rows per query at most
    page: bool = field(BOOL, default=False)   # answer each text in pages: {rows, cursor, at} each
    order: tuple[Any, ...] = field(LIST(RAW), default=())   # [variable, descending]: send the first `limit` in it
