"""Event identity: a graph IRI that holds an event belongs to that event's content.

The quads of one event live on many owners, and none of them sees the whole of a second
publication under the same IRI (with other content, its quads may land on other owners
entirely), so no owner can tell a retry from a different event. Each graph IRI therefore has
a *claim*, kept at a point that depends only on the IRI (`key_point`): before its quads are
delivered, the entry claims the IRI for the event's content digest, and the first digest
recorded there stands. The same content again (a retry, through any entry) finds its own
digest and goes on, idempotent as before; other content finds another digest and is refused
with `conflict`, before anything of it is stored. Deleting the event releases the claim.

A claim is a decision record (`decide`, first one stands) under its own key: durable,
replicated with the zone, handed over with the point it is kept at, like the entries'
publication decisions (peers/publish/commits.py).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import partial
from typing import Any

from eventcloud.errors import ErrorCode, EventCloudError, RequestError, Unavailable
from eventcloud.overlay import CoordinateSpace, Point
from eventcloud.rdf.model import CompoundEvent
from eventcloud.wire.codec import point_to_wire
from eventcloud.wire.messages import GraphClaim
from eventcloud.wire.ops import Op
from peers.net import RetryPolicy, Router
from peers.store import CLAIM_PREFIX, AsyncStore, PeerState, ZoneGuard, decide, release
from peers.tasks import gather

__all__ = ["GraphClaims", "claim_point", "digest_of", "conflict"]


def digest_of(event: CompoundEvent) -> str:
    """The event's content, as a digest that does not depend on the order of its quads."""
    lines = sorted(q.n_quads() for q in event.quads)
    return hashlib.blake2b("\n".join(lines).encode("utf-8"), digest_size=16).hexdigest()


def claim_point(space: CoordinateSpace, graph: str) -> Point:
    """Where the claim of `graph` is kept: a point that depends on the IRI alone."""
    return space.key_point("claim " + graph)


def _key(graph: str) -> str:
    """A claim's decision key (the IRI hashed: keys name records, and IRIs may hold any character)."""
    return CLAIM_PREFIX + hashlib.blake2b(graph.encode("utf-8"), digest_size=16).hexdigest()


def conflict(graphs: list[str]) -> RequestError:
    shown = ", ".join(graphs[:3]) + (f" and {len(graphs) - 3} more" if len(graphs) > 3 else "")
    which = "graph IRI" if len(graphs) == 1 else "graph IRIs"
    return RequestError(f"{which} {shown} already {'holds an event' if len(graphs) == 1 else 'hold events'} with "
                        f"other content: an event is published once, whole; nothing of this one was stored. Publish "
                        f"it under a new IRI, or delete the event first (eventcloud delete IRI)", ErrorCode.CONFLICT)


class GraphClaims:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, guard: ZoneGuard, counters: Counter[str],
                 *, retry_window: float) -> None:
        self.state = state
        self.router = router
        self.store = store
        self.guard = guard
        self.counters = counters
        self.retry_window = retry_window

    def routed(self) -> dict[Op, Any]:
        return {Op.CLAIM_GRAPH: self._local_claim, Op.RELEASE_GRAPH: self._local_release}

    def _point(self, graph: str) -> Any:
        return claim_point(self.state.space, graph)

    async def claim(self, events: list[tuple[str, str]]) -> list[bool]:
        """Claim each (graph, digest); whether each is ours (first, or the same content again)."""
        async def one(graph: str, digest: str) -> bool:
            return await self._route(Op.CLAIM_GRAPH, GraphClaim(graph, digest)) == digest
        outcome = await gather([partial(one, graph, digest) for graph, digest in events])
        self.counters["graph_conflicts"] += sum(1 for ours in outcome if not ours)
        return outcome

    async def release(self, graph: str) -> None:
        await self._route(Op.RELEASE_GRAPH, GraphClaim(graph))

    async def _route(self, op: Op, body: GraphClaim) -> Any:
        """To the owner of the claim's point, again while that zone is being handed over (its new
        owner answers once the handover is done), for up to a retry window (a publisher's retry
        covers longer outages, such as a full disk, without holding its request here)."""
        attempts = RetryPolicy(self.retry_window).start()
        while True:
            try:
                return await self.router.route(self._point(body.graph), op, body)
            except EventCloudError as exc:
                if not exc.transient or not await attempts.pause():
                    raise
                self.counters["graph_claims_retried"] += 1

    async def _write_here(self, graph: str, mutation: list[Any]) -> Any:
        """Write a claim's record while this zone surely holds its point (a split waits for it)."""
        if not await self.guard.store_within(self.retry_window):
            raise Unavailable(f"peer {self.state.id} is handing its zone over; retry")
        try:
            if not self.state.zone.contains(self._point(graph)):
                raise Unavailable(f"peer {self.state.id} no longer holds the claim of {graph}; retry")
            (result,) = await self.store.write([mutation])
            return result
        finally:
            self.guard.release_store()

    async def _local_claim(self, body: GraphClaim) -> str:
        if not body.digest:
            raise RequestError("claim_graph needs the event's digest", ErrorCode.BAD_REQUEST)
        point = point_to_wire(self._point(body.graph))
        return await self._write_here(body.graph, decide(_key(body.graph), body.digest, point))

    async def _local_release(self, body: GraphClaim) -> bool:
        return await self._write_here(body.graph, release(_key(body.graph)))
