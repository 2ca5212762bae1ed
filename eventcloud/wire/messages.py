"""Every message body, typed: one frozen class per request, reply and push (docs/protocol.md).

The classes live in `client_messages` (what clients send and get) and `peer_messages` (what
peers say to each other); this module gathers them and maps each op to its request body type
(`REQUESTS`) and reply type (`REPLIES`), so a dispatcher decodes once, by op.
"""

from __future__ import annotations

from eventcloud.wire.client_messages import *  # noqa: F401,F403 - one place to import every body from
from eventcloud.wire.client_messages import (
    Ack, Admin, Publisher, Attach, Attached, Auth, Challenge, Counted, CursorNext, Delete, Deleted, Empty, Ended, Find, Hello, Left,
    Notification, OverlayInfo, Page, Pong, SchemaInfo, SchemaLoad, Publish, Published, Quads, Renew, Renewed, Sparql, SparqlResult, Status,
    Subscribe, SubscribeMany, Subscribed, SubscribedMany, SubscriptionId, SubscriptionList, Unsubscribe,
)
from eventcloud.wire.fields import *  # noqa: F401,F403
from eventcloud.wire.ops import Op
from eventcloud.wire.peer_messages import *  # noqa: F401,F403
from eventcloud.wire.peer_messages import (
    Announce, ChainMember, Commit, CsmaStep, Deliver, Delivered, Delivery, EventGet, Handover, JoinCommit, JoinRequest, Leases, Load, LoadAsk, MailboxAck,
    MailboxAttach, MailboxDeliver, MailboxEnd, MailboxOpen, Multicast, MulticastEach, NextChunk, Notifies, Notify, PeerId, Probe, ProbeResult,
    ReplicaOf, ReplicaState, ReplicaStatus, ReplicaSync, Replicate, Resolve, GraphClaim, Notified, Route, Routed, StoreSubscription,
    SchemaNewer, SchemaOffer, SparqlLocal, StepAside, Table, TakeOver, AnnexAsk, AnnexOffer, AdoptAnnex,
)
from eventcloud.wire.schema import Body

#: Request body type of each operation a connection may carry or a route may run.
REQUESTS: dict[Op, type[Body]] = {
    Op.PING: Empty, Op.HELLO: Hello, Op.AUTH: Auth, Op.ADMIN: Admin, Op.PUBLISHER: Publisher, Op.OVERLAY_INFO: Empty, Op.PUBLISH: Publish, Op.FIND: Find, Op.COUNT: Find,
    Op.SPARQL: Sparql, Op.DELETE: Delete, Op.STATUS: Empty, Op.SUBSCRIBE: Subscribe, Op.SUBSCRIBE_MANY: SubscribeMany,
    Op.UNSUBSCRIBE: Unsubscribe, Op.LEAVE: Empty, Op.ATTACH: Attach, Op.ACK: Ack, Op.RENEW: Renew,
    Op.SUBSCRIPTIONS: Empty, Op.MAILBOX_DELIVER: MailboxDeliver,
    Op.MAILBOX_OPEN: MailboxOpen, Op.MAILBOX_ATTACH: MailboxAttach, Op.MAILBOX_ACK: MailboxAck,
    Op.MAILBOX_NOTIFY: Notify, Op.MAILBOX_END: MailboxEnd, Op.LEASE_SUB: Leases, Op.SUBS_LOCAL: Empty,
    Op.ENDED: Ended, Op.SCHEMA: Empty, Op.SCHEMA_LOAD: SchemaLoad, Op.SCHEMA_FETCH: SchemaNewer,
    Op.SCHEMA_SET: SchemaLoad, Op.SCHEMA_LOCAL: Empty, Op.SPARQL_LOCAL: SparqlLocal,
    Op.CURSOR_NEXT: CursorNext, Op.CURSOR_CLOSE: CursorNext,
    Op.ROUTE: Route, Op.DELIVER: Deliver, Op.COMMIT: Commit, Op.NOTIFY: Notifies, Op.JOIN_COMMIT: JoinCommit,
    Op.NEIGHBOURS: Announce, Op.TAKE_OVER: TakeOver, Op.STEP_ASIDE: StepAside, Op.ANNEX_OFFER: AnnexAsk, Op.ANNEX_ADOPT: AdoptAnnex, Op.TABLE: Empty, Op.PROBE: Probe, Op.REPLICATE: Replicate,
    Op.REPLICA_SYNC: ReplicaSync, Op.REPLICA_STATE: ReplicaState, Op.REPLICA_DROP: ReplicaOf,
    Op.REPLICA_STATUS: ReplicaOf, Op.EVENT_GET: EventGet,
    Op.MCAST: Multicast, Op.MCAST_EACH: MulticastEach, Op.JOIN_SPLIT: JoinRequest, Op.LOAD: LoadAsk, Op.LOAD_LOCAL: Empty, Op.JOIN_DATA: NextChunk, Op.LEAVE_DATA: NextChunk, Op.DELIVER_LOCAL: Delivery, Op.FIND_LOCAL: Find,
    Op.COUNT_LOCAL: Find, Op.DELETE_LOCAL: Delete, Op.STATUS_LOCAL: Empty, Op.CLOCK: Empty,
    Op.STORE_SUB: StoreSubscription, Op.REMOVE_SUB: SubscriptionId, Op.CSMA_SUB: CsmaStep, Op.RESOLVE: Resolve, Op.CLAIM_GRAPH: GraphClaim, Op.RELEASE_GRAPH: GraphClaim,
    Op.NOTIFICATION: Notification,
}

#: Reply body type of each client and peer operation (routed operations reply with plain values).
REPLIES: dict[Op, type[Body]] = {
    Op.PING: Pong, Op.HELLO: Challenge, Op.AUTH: PeerId, Op.ADMIN: Empty, Op.PUBLISHER: Empty, Op.OVERLAY_INFO: OverlayInfo, Op.PUBLISH: Published, Op.FIND: Quads, Op.COUNT: Counted,
    Op.SPARQL: SparqlResult, Op.DELETE: Deleted, Op.STATUS: Status, Op.SUBSCRIBE: Subscribed,
    Op.SUBSCRIBE_MANY: SubscribedMany,
    Op.UNSUBSCRIBE: SubscriptionId, Op.LEAVE: Left, Op.ATTACH: Attached, Op.ACK: Empty, Op.RENEW: Renewed,
    Op.SUBSCRIPTIONS: SubscriptionList, Op.MAILBOX_DELIVER: Empty, Op.SCHEMA: SchemaInfo,
    Op.SCHEMA_LOAD: SchemaInfo, Op.SCHEMA_FETCH: SchemaOffer, Op.CURSOR_NEXT: Page, Op.CURSOR_CLOSE: Empty,
    Op.ROUTE: Routed, Op.DELIVER: Delivered, Op.COMMIT: Empty, Op.NOTIFY: Notified, Op.JOIN_COMMIT: Empty, Op.NEIGHBOURS: PeerId,
    Op.TAKE_OVER: PeerId, Op.STEP_ASIDE: PeerId, Op.ANNEX_OFFER: AnnexOffer, Op.ANNEX_ADOPT: PeerId, Op.TABLE: Table, Op.PROBE: ProbeResult, Op.REPLICATE: Empty, Op.REPLICA_SYNC: Empty,
    Op.REPLICA_STATE: Empty, Op.REPLICA_DROP: Empty, Op.REPLICA_STATUS: ReplicaStatus, Op.LOAD: Load, Op.JOIN_DATA: Handover, Op.LEAVE_DATA: Handover,
    Op.EVENT_GET: Quads,
}
