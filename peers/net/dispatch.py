"""The dispatch table: which service serves each operation, with its body decoded once, by type.

The runtime builds one `Dispatcher`, hands it to the router (which runs routed operations
through it) and to the connection server, then registers each service's handlers. A request
body is decoded into its message type (`eventcloud.wire.messages.REQUESTS`) here, so a
malformed body is a `bad-request` naming the field before any service sees it.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Awaitable, Callable, Mapping

import trio

from eventcloud.errors import BadRequest, ErrorCode, EventCloudError, RequestError
from peers.net.auth import PeerAuth
from eventcloud.net.rpc import RpcConnection
from eventcloud.wire.messages import REQUESTS
from eventcloud.wire.ops import PEER_OPS, PEER_PUSH_OPS, ROUTED_OPS, Op, parse_op
from eventcloud.wire.schema import Body

log = logging.getLogger(__name__)

__all__ = ["BatchHandler", "Dispatcher", "RequestHandler", "RoutedHandler"]

#: Served at once, even before the peer serves a zone: liveness, the handshake proving who is
#: calling, and the replicas it holds for others, none of which depend on its zone. A peer
#: rejoining on its old address (moved by the rebalancer) thus tells an owner that still counts
#: on it as its replica "no replica here" at once, and the owner picks another, instead of its
#: writes waiting for this join (and the join's commit, at that owner, for its writes).
SERVED_BEFORE_READY = frozenset({Op.PING, Op.HELLO, Op.AUTH, Op.ADMIN, Op.REPLICATE, Op.REPLICA_SYNC,
                                 Op.REPLICA_STATE, Op.REPLICA_DROP, Op.REPLICA_STATUS, Op.PROBE})
#: What a connection on probation may ask first: a proof of the cluster secret, the admin token or a publish token.
_PROOFS = frozenset({Op.HELLO, Op.AUTH, Op.ADMIN, Op.PUBLISHER})

#: Serves a request from a connection: (connection, decoded body) -> reply body.
RequestHandler = Callable[[RpcConnection, Any], Awaitable[Body | dict[str, Any]]]
#: Runs a routed operation on this peer: decoded body -> a plain result value.
RoutedHandler = Callable[[Any], Awaitable[Any]]
#: Runs many items of one routed operation at once (a multicast_each's items for this peer):
#: decoded bodies -> per body, its result or the EventCloudError it failed with.
BatchHandler = Callable[[list[Any]], Awaitable[list[Any]]]


class Dispatcher:
    def __init__(self, counters: Counter[str], auth: "PeerAuth", *, ready_wait: float = 5.0) -> None:
        self.counters = counters
        self.auth = auth
        #: how long a request waits for the peer to serve its zone before it is refused (a peer
        #: rejoining on its old address must not hold its former callers until it has joined:
        #: an owner whose replica it was would stall its writes, and with them, joins)
        self.ready_wait = ready_wait
        self._requests: dict[Op, RequestHandler] = {}
        self._routed: dict[Op, RoutedHandler] = {}
        self._batches: dict[Op, BatchHandler] = {}
        self._pushes: dict[Op, RequestHandler] = {}
        #: set once the peer owns a zone (after join or restore); requests but ping wait for it
        self.ready = trio.Event()

    def register(self, requests: Mapping[Op, RequestHandler] = {}, routed: Mapping[Op, RoutedHandler] = {},
                 pushes: Mapping[Op, RequestHandler] = {}, batches: Mapping[Op, BatchHandler] = {}) -> None:
        for op in pushes:
            if op in self._pushes or op not in PEER_PUSH_OPS:
                raise ValueError(f"push {op} registered twice or not a peer operation")
        for op in requests:
            if op in self._requests or op in ROUTED_OPS:
                raise ValueError(f"operation {op} registered twice or in the wrong table")
        for op in routed:
            if op in self._routed or op not in ROUTED_OPS:
                raise ValueError(f"routed operation {op} registered twice or not routed")
        for op in batches:
            if op in self._batches or op not in {**self._routed, **routed}:
                raise ValueError(f"batch of {op} registered twice or without its routed handler")
        self._requests.update(requests)
        self._routed.update(routed)
        self._pushes.update(pushes)
        self._batches.update(batches)

    @property
    def peers_proven(self) -> bool:
        """Whether a peer operation surely comes from a peer, so its body is decoded without
        checking again what its sender checked (terms, quads): only with a cluster secret, which
        `PeerAuth.check` demands for every peer operation. In an open cluster anyone may send
        them, and they are validated like a client's."""
        return not self.auth.open

    @property
    def request_ops(self) -> frozenset[Op]:
        """What a request frame may name: routed operations too, to be refused with a reply."""
        return frozenset(self._requests) | frozenset(self._routed)

    async def handle(self, conn: RpcConnection, op: Op, raw: dict[str, Any]) -> Body | dict[str, Any]:
        """Serve one request frame (the RPC layer's request handler)."""
        self.counters[f"in:{op.value}"] += 1
        handler = self._requests.get(op)
        if handler is None:
            if op in self._routed:  # e.g. remove_sub sent by itself: only `route` carries it, between peers
                self.auth.check(conn, Op.ROUTE)
                raise RequestError(f"operation {op.value!r} is not a request: peers send it inside 'route'",
                                   ErrorCode.BAD_REQUEST)
            raise RequestError(f"unknown message type {op.value!r}", ErrorCode.UNKNOWN_OP)
        if conn.probation and conn.role == "client" and op not in _PROOFS:
            conn.end_after_reply = True
            self.counters["refused_on_probation"] += 1
            raise RequestError("this peer serves as many connections without credentials as it takes; the slots "
                               "left are for peers and the admin token: try another peer or later", ErrorCode.BUSY)
        self.auth.check(conn, op)
        body = REQUESTS[op].from_wire(raw, trusted=op in PEER_OPS and self.peers_proven)
        if op not in SERVED_BEFORE_READY:
            await self._until_ready(op)
        return await handler(conn, body)

    async def _until_ready(self, op: Op) -> None:
        if self.ready.is_set():
            return
        with trio.move_on_after(self.ready_wait):
            await self.ready.wait()
        if not self.ready.is_set():
            self.counters["refused_not_ready"] += 1
            raise RequestError(f"{op.value}: this peer does not serve a zone yet (it is joining or restarting); "
                               f"retry, or ask another peer", ErrorCode.NOT_SERVING)

    async def handle_push(self, conn: RpcConnection, op: Op, raw: dict[str, Any]) -> None:
        """Serve one push frame: a peer's message that needs no answer (a commit). Nothing is
        sent back; a refused or failed one is counted and logged (its sender does not wait)."""
        self.counters[f"in:{op.value}"] += 1
        handler = self._pushes.get(op)
        try:
            if handler is None:
                raise RequestError(f"operation {op.value!r} is not accepted as a push", ErrorCode.UNKNOWN_OP)
            self.auth.check(conn, op)
            body = REQUESTS[op].from_wire(raw, trusted=self.peers_proven)
            await self._until_ready(op)
            await handler(conn, body)
        except EventCloudError as exc:
            self.counters["pushes_failed"] += 1
            log.info("push %s on %s not served: %s", op.value, conn.name, exc)

    def batches(self, op_name: str) -> bool:
        """Whether items of this routed operation can run together (`run_routed_each`)."""
        op = parse_op(op_name)
        return op is not None and op in self._batches

    async def run_routed_each(self, op_name: str, raws: list[Any]) -> list[Any]:
        """Run many items of a routed operation that has a batch handler, in one call: per item,
        its result or the EventCloudError it failed with (a malformed body fails alone)."""
        op = parse_op(op_name)
        assert op is not None and op in self._batches
        outcome: list[Any] = [None] * len(raws)
        bodies, where = [], []
        for i, raw in enumerate(raws):
            try:
                if not isinstance(raw, dict):
                    raise BadRequest(f"the body of routed operation {op_name!r} must be a map")
                bodies.append(REQUESTS[op].from_wire(raw, trusted=self.peers_proven))
                where.append(i)
            except EventCloudError as exc:
                outcome[i] = exc
        self.counters[f"run:{op_name}"] += len(raws)
        if bodies:
            for i, result in zip(where, await self._batches[op](bodies)):
                outcome[i] = result
        return outcome

    async def run_routed(self, op_name: str, raw: Any) -> Any:
        """Run a routed operation that reached this peer (named by its wire string)."""
        op = parse_op(op_name)
        handler = self._routed.get(op) if op is not None else None
        if handler is None:
            raise RequestError(f"unknown routed operation {op_name!r}", ErrorCode.UNKNOWN_OP)
        if not isinstance(raw, dict):
            raise BadRequest(f"the body of routed operation {op_name!r} must be a map")
        self.counters[f"run:{op_name}"] += 1
        return await handler(REQUESTS[op].from_wire(raw, trusted=self.peers_proven))
