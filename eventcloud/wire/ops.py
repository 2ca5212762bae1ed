"""Every operation name on the wire, and who may use it.

Three families share one namespace:

* client operations, sent by the SDK, the CLI or any client to an entry peer;
* peer operations, sent from peer to peer on the overlay's own connections;
* routed operations, never sent on a connection by themselves: they travel inside a
  `route` (unicast to the owner of a point), a `mcast` (every peer whose zone meets a
  box) or a `mcast_each` (many bodies, each to the peers of its own box) and run on the
  peer(s) they reach.

Plus one push, `notification`, sent by an entry peer to a subscriber's connection.
docs/protocol.md lists each with its fields and replies.
"""

from __future__ import annotations

from enum import StrEnum


class Op(StrEnum):
    # client operations
    PING = "ping"
    HELLO = "hello"
    AUTH = "auth"
    ADMIN = "admin"
    PUBLISHER = "publisher"
    OVERLAY_INFO = "overlay_info"
    PUBLISH = "publish"
    FIND = "find"
    COUNT = "count"
    SPARQL = "sparql"
    DELETE = "delete"
    STATUS = "status"
    SUBSCRIBE = "subscribe"
    SUBSCRIBE_MANY = "subscribe_many"
    UNSUBSCRIBE = "unsubscribe"
    LEAVE = "leave"
    ATTACH = "attach"
    ACK = "ack"
    RENEW = "renew"
    SUBSCRIPTIONS = "subscriptions"
    SCHEMA = "schema"
    SCHEMA_LOAD = "schema_load"
    CURSOR_NEXT = "cursor_next"
    CURSOR_CLOSE = "cursor_close"
    # peer operations
    ROUTE = "route"
    DELIVER = "deliver"
    COMMIT = "commit"
    NOTIFY = "notify"
    JOIN_COMMIT = "join_commit"
    NEIGHBOURS = "neighbours"
    TAKE_OVER = "take_over"
    STEP_ASIDE = "step_aside"
    ANNEX_OFFER = "annex_offer"
    ANNEX_ADOPT = "annex_adopt"
    TABLE = "table"
    PROBE = "probe"
    REPLICATE = "replicate"
    REPLICA_SYNC = "replica_sync"
    REPLICA_STATE = "replica_state"
    REPLICA_DROP = "replica_drop"
    REPLICA_STATUS = "replica_status"
    MAILBOX_DELIVER = "mailbox_deliver"
    SCHEMA_FETCH = "schema_fetch"
    LOAD = "load"
    JOIN_DATA = "join_data"
    LEAVE_DATA = "leave_data"
    EVENT_GET = "event_get"
    # routed operations (inside ROUTE, or run by MCAST on every peer of a box)
    MCAST = "mcast"
    MCAST_EACH = "mcast_each"
    JOIN_SPLIT = "join_split"
    LOAD_LOCAL = "load_local"
    DELIVER_LOCAL = "deliver_local"
    FIND_LOCAL = "find_local"
    COUNT_LOCAL = "count_local"
    DELETE_LOCAL = "delete_local"
    STATUS_LOCAL = "status_local"
    CLOCK = "clock"
    STORE_SUB = "store_sub"
    REMOVE_SUB = "remove_sub"
    CSMA_SUB = "csma_sub"
    RESOLVE = "resolve"
    CLAIM_GRAPH = "claim_graph"
    RELEASE_GRAPH = "release_graph"
    MAILBOX_OPEN = "mailbox_open"
    MAILBOX_ATTACH = "mailbox_attach"
    MAILBOX_ACK = "mailbox_ack"
    MAILBOX_NOTIFY = "mailbox_notify"
    MAILBOX_END = "mailbox_end"
    LEASE_SUB = "lease_sub"
    SUBS_LOCAL = "subs_local"
    SCHEMA_SET = "schema_set"
    SCHEMA_LOCAL = "schema_local"
    SPARQL_LOCAL = "sparql_local"
    # push
    NOTIFICATION = "notification"
    ENDED = "ended"


CLIENT_OPS = frozenset({
    Op.PING, Op.HELLO, Op.AUTH, Op.ADMIN, Op.PUBLISHER, Op.OVERLAY_INFO, Op.PUBLISH, Op.FIND, Op.COUNT, Op.SPARQL, Op.DELETE, Op.STATUS,
    Op.SUBSCRIBE, Op.SUBSCRIBE_MANY, Op.UNSUBSCRIBE, Op.LEAVE, Op.ATTACH, Op.ACK, Op.RENEW, Op.SUBSCRIPTIONS,
    Op.SCHEMA, Op.SCHEMA_LOAD, Op.CURSOR_NEXT, Op.CURSOR_CLOSE,
})
PEER_OPS = frozenset({Op.ROUTE, Op.DELIVER, Op.COMMIT, Op.NOTIFY, Op.JOIN_COMMIT, Op.NEIGHBOURS, Op.TAKE_OVER,
                      Op.STEP_ASIDE, Op.ANNEX_OFFER, Op.ANNEX_ADOPT,
                      Op.TABLE, Op.PROBE, Op.REPLICATE, Op.REPLICA_SYNC, Op.REPLICA_STATE, Op.REPLICA_DROP,
                      Op.REPLICA_STATUS, Op.MAILBOX_DELIVER, Op.SCHEMA_FETCH, Op.LOAD, Op.JOIN_DATA,
                      Op.LEAVE_DATA, Op.EVENT_GET})
ROUTED_OPS = frozenset({
    Op.MCAST, Op.MCAST_EACH, Op.JOIN_SPLIT, Op.LOAD_LOCAL, Op.DELIVER_LOCAL, Op.FIND_LOCAL, Op.COUNT_LOCAL, Op.DELETE_LOCAL,
    Op.STATUS_LOCAL, Op.CLOCK, Op.STORE_SUB, Op.REMOVE_SUB, Op.CSMA_SUB, Op.RESOLVE, Op.CLAIM_GRAPH, Op.RELEASE_GRAPH,
    Op.MAILBOX_OPEN,
    Op.MAILBOX_ATTACH, Op.MAILBOX_ACK, Op.MAILBOX_NOTIFY, Op.MAILBOX_END, Op.LEASE_SUB, Op.SUBS_LOCAL,
    Op.SCHEMA_SET, Op.SCHEMA_LOCAL, Op.SPARQL_LOCAL,
})
PUSH_OPS = frozenset({Op.NOTIFICATION, Op.ENDED})
#: Peer operations sent as pushes (no reply): an owner that misses a commit resolves the event.
PEER_PUSH_OPS = frozenset({Op.COMMIT})
#: What a peer accepts as the `op` of a request frame.
REQUEST_OPS = CLIENT_OPS | PEER_OPS
#: Operations that change or stop the overlay, and so need the admin token when one is set.
ADMIN_OPS = frozenset({Op.LEAVE, Op.DELETE, Op.SUBSCRIPTIONS, Op.SCHEMA_LOAD})
#: What each administrative operation does, in the words a refusal uses (never the op's wire name).
ADMIN_OP_WORDS: dict[Op, str] = {Op.LEAVE: "making a peer leave", Op.DELETE: "deleting an event",
                                 Op.SUBSCRIPTIONS: "listing every subscription",
                                 Op.SCHEMA_LOAD: "loading a class taxonomy"}


def parse_op(name: object) -> Op | None:
    """The Op named `name`, or None for anything else (an unknown name, a non-string)."""
    if type(name) is not str:
        return None
    try:
        return Op(name)
    except ValueError:
        return None
