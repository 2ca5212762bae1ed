"""Client operations on stored data: find, count, one-time SPARQL, delete and status.

Each runs as a multicast over the box its pattern covers (the whole space for status), and
each peer answers for the quads of its own zone. One-time SPARQL gathers, for each triple
pattern of the query, the candidate quads of the zones covering the pattern's box, loads
them into an in-memory store and evaluates the query there (pyoxigraph), so every SPARQL 1.1
form is available.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pyoxigraph as ox

from eventcloud.errors import ErrorCode, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.rdf.model import Quad, Term
from eventcloud.rdf.oxigraph import quad_to_ox
from eventcloud.sparql.query_plan import QueryPlanError, candidate_patterns
from eventcloud.wire.codec import quad_from_wire, quad_to_wire
from eventcloud.wire.messages import (
    Counted, Delete, Deleted, Empty, Find, PeerStatus, Quads, Sparql, SparqlResult, Status,
)
from eventcloud.wire.ops import Op
from peers.router import Router
from peers.state import PeerState
from peers.commits import COMMIT, Commits
from peers.store import AsyncStore, Offload, delete
from peers.subscriptions import Subscriptions

__all__ = ["Queries"]

Pattern = tuple[Term | None, Term | None, Term | None, Term | None]


class Queries:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, subscriptions: Subscriptions,
                 commits: Commits, counters: Counter[str], *, offload: Offload) -> None:
        self.state = state
        self.commits = commits
        self.offload = offload
        self.router = router
        self.store = store
        self.subscriptions = subscriptions
        self.counters = counters

    def handlers(self) -> dict[Op, Any]:
        return {Op.FIND: self._on_find, Op.COUNT: self._on_count, Op.SPARQL: self._on_sparql,
                Op.DELETE: self._on_delete, Op.STATUS: self._on_status}

    def routed(self) -> dict[Op, Any]:
        return {Op.FIND_LOCAL: self._local_find, Op.COUNT_LOCAL: self._local_count,
                Op.DELETE_LOCAL: self._local_delete, Op.STATUS_LOCAL: self._local_status}

    # --- finding and counting -----------------------------------------------------------------

    async def find(self, pattern: Pattern) -> list[Quad]:
        """Every stored quad matching the pattern, from every zone its box meets."""
        box = self.state.space.pattern_box(pattern)
        results = await self.router.multicast(box, Op.FIND_LOCAL, Find(pattern))
        return [quad_from_wire(q, trusted=True) for chunk in results for q in chunk]

    async def _on_find(self, conn: RpcConnection, body: Find) -> Quads:
        return Quads(tuple(await self.find(body.pattern)))

    async def _mine(self, pattern: Pattern, pending: bool = False) -> list[Quad]:
        """This zone's quads matching `pattern` that readers may see: those of committed events,
        and of pending events whose attempt is decided commit (asked once per event)."""
        zone, space = self.state.zone, self.state.space
        quads = [q for q in await self.store.find(*pattern) if zone.contains(space.point(q))]
        if pending:
            return quads
        verdict: dict[str, bool] = {}
        for graph in {q.g.value for q in quads}:
            info = self.store.event_info(graph)
            if info is not None and info.committed:
                verdict[graph] = True
            else:
                verdict[graph] = info is not None and await self.commits.resolve(info) == COMMIT
        return [q for q in quads if verdict[q.g.value]]

    async def _local_find(self, body: Find) -> list[Any]:
        return [quad_to_wire(q) for q in await self._mine(body.pattern, body.pending)]

    async def _on_count(self, conn: RpcConnection, body: Find) -> Counted:
        box = self.state.space.pattern_box(body.pattern)
        counts = await self.router.multicast(box, Op.COUNT_LOCAL, Find(body.pattern))
        return Counted(sum(counts))

    async def _local_count(self, body: Find) -> int:
        if body.pattern == (None, None, None, None) and not self.store.sync.pending():
            return self.store.count()  # a counter, kept up to date by every write
        return len(await self._mine(body.pattern))

    # --- one-time SPARQL ----------------------------------------------------------------------

    async def _on_sparql(self, conn: RpcConnection, body: Sparql) -> SparqlResult:
        text = body.query
        try:
            patterns = candidate_patterns(text)
        except QueryPlanError as exc:
            raise RequestError(exc.message, ErrorCode.BAD_QUERY) from None
        started = time.perf_counter()
        gathered: set[Quad] = set()
        if not patterns or any(p == (None, None, None, None) for p in patterns):
            patterns = [(None, None, None, None)]
        for pattern in patterns:
            gathered.update(await self.find(pattern))
        return await self.offload.run(_evaluate, text, gathered, started)

    # --- deleting -----------------------------------------------------------------------------

    async def _on_delete(self, conn: RpcConnection, body: Delete) -> Deleted:
        box = self.state.space.pattern_box((body.graph, None, None, None))
        removed = await self.router.multicast(box, Op.DELETE_LOCAL, body)
        return Deleted(sum(removed))

    async def _local_delete(self, body: Delete) -> int:
        (removed,) = await self.store.write([delete(body.graph.value)])
        return removed

    # --- status -------------------------------------------------------------------------------

    async def _on_status(self, conn: RpcConnection, body: Empty) -> Status:
        """Every peer's status; a peer that does not answer is listed as down (status never waits
        for the whole retry window)."""
        peers, down = await self.router.multicast_partial(self.state.space.whole_space(), Op.STATUS_LOCAL, Empty())
        statuses = [PeerStatus.from_wire(p, trusted=True) for p in peers]
        statuses += [PeerStatus(ident, n.address, n.zone, 0, 0, 0, {}, {}, down=True) for ident, n in down]
        return Status(tuple(sorted(statuses, key=lambda p: p.id)), self.state.space, self.state.algorithm)

    async def _local_status(self, body: Empty) -> dict[str, Any]:
        state = self.state
        return PeerStatus(
            id=state.id, address=state.address, zone=state.zone, quads=self.store.count(),
            events=len(self.store.events()), subscriptions=len(self.subscriptions),
            neighbours={k: n.address for k, n in sorted(state.neighbours.items())},
            counters={**{k: v for k, v in sorted(self.counters.items()) if k != "subscriptions"},
                      "regex_timeouts": self.subscriptions.regex_timeouts()},
        ).to_wire()


def _evaluate(text: str, gathered: set[Quad], started: float) -> SparqlResult:
    """Evaluate a query over the gathered quads (blocking: runs in a worker thread)."""
    store = ox.Store()
    store.extend([quad_to_ox(q) for q in gathered])
    try:
        result = store.query(text, use_default_graph_as_union=True)
        if isinstance(result, ox.QueryTriples):
            form, out = "graph", result.serialize(format=ox.RdfFormat.N_TRIPLES).decode()
        else:
            form = "boolean" if isinstance(result, ox.QueryBoolean) else "solutions"
            out = result.serialize(format=ox.QueryResultsFormat.JSON).decode()
    except (SyntaxError, ValueError, OSError) as exc:
        raise RequestError(f"query failed: {exc}", ErrorCode.BAD_QUERY) from None
    return SparqlResult(form, out, len(gathered), time.perf_counter() - started)
