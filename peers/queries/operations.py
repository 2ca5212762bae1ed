"""Client operations on stored data: find, count, one-time SPARQL, delete and status.

Each runs as a multicast over the box its pattern covers (the whole space for status), and
each peer answers for the quads of its own zone. One-time SPARQL over one triple pattern
(SELECT with FILTERs, DISTINCT and LIMIT, ASK, COUNT/SUM/MIN/MAX/AVG with GROUP BY) runs at
the peers of the pattern's box, each over its own quads, and the entry peer merges their
answers (eventcloud.sparql.distributed): no data crosses the network for an aggregate, and a
LIMIT stops each peer early. Any other query gathers, for each triple pattern, the candidate
quads of the zones covering the pattern's box (a join's later patterns bound to what the
earlier ones found, where that moves fewer quads: peers/queries/candidates.py), loads them into
an in-memory store and evaluates the query there (pyoxigraph), so every SPARQL 1.1 form is
available.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import replace
from functools import partial
from typing import Any, Awaitable, Callable, TypeVar

import pyoxigraph as ox
import trio

from eventcloud.errors import ErrorCode, EventCloudError, RequestError
from eventcloud.overlay import Neighbour, lowest_corner
from eventcloud.net.rpc import RpcConnection
from eventcloud.rdf.model import Quad, Term
from eventcloud.rdf.oxigraph import quad_to_ox
from eventcloud.sparql.bind_joins import join_shape
from eventcloud.sparql.distributed import (
    Pushdown, SelectMerge, count_distinct, distinct_values, merge_aggregates, plan_pushdown, select_star_order,
    selects_star, top_rows,
)
from eventcloud.sparql.filters.extensions import rewrite_bare_names
from eventcloud.sparql.query_functions import custom_functions, names_extensions
from eventcloud.sparql.query_plan import QueryPlanError
from eventcloud.sparql.taxonomy import RDFS_SUBCLASSOF, Taxonomy
from eventcloud.wire.codec import quad_from_wire, quad_to_wire, trusted_iri
from eventcloud.wire.messages import (
    Counted, Delete, Deleted, Empty, Find, PeerStatus, Quads, Route, Routed, Sparql, SparqlLocal, SparqlResult,
    Status, Table,
)
from peers.queries.cursors import Cursors, PageSink
from peers.queries.streams import PeerPages, close_answers, open_peer_pages
from eventcloud.wire.ops import Op
from peers.net import Router
from peers.store import AsyncStore, EventInfo, ForeignQuads, Offload, PeerState, delete, iter_rows, query_rows
from peers.publish import COMMIT, Commits, GraphClaims
from peers.queries.candidates import QueryCandidates
from peers.matching import Subscriptions, analyse_locked
from peers.queries.child_process import QueryBudget, evaluate_in_child
from peers.tasks import gather

log = logging.getLogger(__name__)

__all__ = ["Queries"]

Pattern = tuple[Term | None, Term | None, Term | None, Term | None]
T = TypeVar("T")

#: Rows one peer sends for one pushed-down SELECT without LIMIT (more: the query is refused).
MAX_ROWS = 20_000
#: A status asks the peers one by one: at most this many at once, and this many in all.
CRAWL_AT_ONCE = 32
MAX_CRAWLED = 100_000


class Queries:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, subscriptions: Subscriptions,
                 commits: Commits, claims: GraphClaims, counters: Counter[str], cursors: Cursors, *,
                 offload: Offload, budget: QueryBudget | None = None, foreign: ForeignQuads | None = None) -> None:
        self.state = state
        self.cursors = cursors   # answers read page by page, here and at the peers
        self.pages = PeerPages(router.call, cursors, lambda: state.address)
        self.claims = claims   # a deleted event's graph IRI is released for another event
        self.budget = budget               # gathered queries run in a child process under it (None: a thread)
        self.foreign = foreign if foreign is not None else ForeignQuads()  # quads another peer answers for
        self.commits = commits
        self.offload = offload
        self.router = router
        self.store = store
        self.subscriptions = subscriptions
        self.counters = counters
        self.candidates = QueryCandidates(self.find, self.find_each, self.estimate, counters)

    def handlers(self) -> dict[Op, Any]:
        return {Op.FIND: self._on_find, Op.COUNT: self._on_count, Op.SPARQL: self._on_sparql,
                Op.DELETE: self._on_delete, Op.STATUS: self._on_status, **self.cursors.handlers()}

    def routed(self) -> dict[Op, Any]:
        return {Op.FIND_LOCAL: self._local_find, Op.COUNT_LOCAL: self._local_count,
                Op.DELETE_LOCAL: self._local_delete, Op.STATUS_LOCAL: self._local_status,
                Op.SPARQL_LOCAL: self._local_sparql}

    # --- finding and counting -----------------------------------------------------------------

    async def find(self, pattern: Pattern) -> list[Quad]:
        """Every stored quad matching the pattern, from every zone its box meets (read page by
        page: no answer is limited by a frame)."""
        found: list[Quad] = []
        await self._find_pages(pattern, lambda rows: found.extend(quad_from_wire(q, trusted=True) for q in rows))
        return found

    async def _find_pages(self, pattern: Pattern, take: Callable[[list[Any]], Awaitable[None] | None]) -> None:
        """Each page of `find`'s answer (wire quads) to `take`, as the peers send them."""
        box = self.state.space.pattern_box(pattern)
        answers = await self.router.multicast(box, Op.FIND_LOCAL, Find(pattern, page=True), self._close_answers)
        async with open_peer_pages(self.pages, answers) as pages:
            async for rows in pages:
                taken = take(rows)
                if taken is not None:
                    await taken

    async def _close_answers(self, answers: list[Any]) -> None:
        """The cursors paged answers opened, closed (a multicast attempt thrown away)."""
        await close_answers(self.pages, answers)

    async def find_each(self, patterns: list[Pattern]) -> list[list[Quad]]:
        """`find` of each pattern, all in one multicast tree over their hull (`Router.multicast_each`)."""
        space = self.state.space
        outcome = await self.router.multicast_each(Op.FIND_LOCAL, [(space.pattern_box(p), Find(p)) for p in patterns])
        for result in outcome:
            if isinstance(result, EventCloudError):
                raise result
        return [[quad_from_wire(q, trusted=True) for chunk in result for q in chunk] for result in outcome]  # type: ignore[union-attr]

    async def _on_find(self, conn: RpcConnection, body: Find) -> Quads:
        if not body.page:
            return Quads(tuple(await self.find(body.pattern)))

        async def produce(sink: PageSink) -> None:
            await self._find_pages(body.pattern, sink.send)

        rows, cursor = await self.cursors.from_task(produce)
        return Quads(tuple(quad_from_wire(q, trusted=True) for q in rows), cursor)

    async def _mine(self, pattern: Pattern, pending: bool = False) -> list[Quad]:
        """This zone's quads matching `pattern` that readers may see: those of committed events,
        and of pending events whose attempt is decided commit (all asked at once)."""
        zone, space = self.state.zone, self.state.space
        quads = [q for q in await self.store.find(*pattern) if zone.contains(space.point(q))]
        return quads if pending else (await self._visible([quads]))[0]

    async def _visible(self, found: list[list[Quad]]) -> list[list[Quad]]:
        """Each list of quads without those readers may not see yet: quads of pending events not
        decided commit (the decisions of all of them asked at once)."""
        infos = {graph: self.store.event_info(graph) for quads in found for graph in {q.g.value for q in quads}}
        visible = {graph for graph, info in infos.items() if info is not None and info.committed}
        visible.update(await self._decided([(g, i) for g, i in infos.items() if i is not None and not i.committed]))
        return [[q for q in quads if q.g.value in visible] for quads in found]

    async def _decided(self, pending: list[tuple[str, EventInfo]]) -> list[str]:
        """Those of these pending events whose attempt is decided commit (one request per entry)."""
        decisions = await self.commits.resolve_many([info for _, info in pending])
        return [graph for (graph, _), decision in zip(pending, decisions) if decision == COMMIT]

    async def _local_find(self, body: Find) -> Any:
        if not body.page:
            return [quad_to_wire(q) for q in await self._mine(body.pattern, body.pending)]
        # this zone's quads that readers may see, read page by page: those of committed events,
        # and of pending ones decided commit (asked now: one decided later stays unseen here)
        zone, space, sync = self.state.zone, self.state.space, self.store.sync
        pending = sync.pending()
        decided = set(await self._decided(list(pending.items()))) if pending and not body.pending else set()

        def keeper(in_zone_only: bool) -> Callable[[list[Any]], bool]:
            def keep(wire: list[Any]) -> bool:
                if in_zone_only and not zone.contains(space.point(quad_from_wire(wire, trusted=True))):
                    return False    # held for another peer's zone (a split, a take-over under way)
                if body.pending:
                    return True
                info = sync.event_info(wire[0])
                return info is not None and (info.committed or wire[0] in decided)
            return keep

        async def open_cursor(in_zone_only: bool) -> Any:
            rows, cursor = await self.cursors.from_store(
                lambda: self.cursors.paged(sync.iter_wire_quads(body.pattern, keeper(in_zone_only)), _size))
            return {"rows": rows, "cursor": cursor, "at": self.state.address}

        # The store holds this zone's quads only, unless a split or a take-over is under way: its
        # read is one snapshot, taken with the first page; if foreign quads came before that, the
        # cursor is opened again, checking each quad's point.
        epoch = self.foreign.epoch
        if self.foreign.held:
            return await open_cursor(True)
        opened = await open_cursor(False)
        if self.foreign.held or self.foreign.epoch != epoch:
            self.counters["reads_redone_for_foreign_quads"] += 1
            self.cursors.close(opened["cursor"])
            opened = await open_cursor(True)
        return opened

    def routed_batches(self) -> dict[Op, Any]:
        return {Op.FIND_LOCAL: self._local_find_many}

    async def _local_find_many(self, bodies: list[Find]) -> list[Any]:
        """Many finds of one multicast tree (a join's bound lookups) in one pass over the store:
        a thread call and a decision round each cost more than a small lookup."""
        zone, space = self.state.zone, self.state.space

        def read() -> list[list[Quad]]:
            return [[q for q in self.store.sync.find_list(*b.pattern) if zone.contains(space.point(q))] for b in bodies]

        found = await self.store.run(read)
        seen = await self._visible(found)
        return [[quad_to_wire(q) for q in (quads if body.pending else shown)]
                for body, quads, shown in zip(bodies, found, seen)]

    async def count(self, pattern: Pattern, *, estimate: bool = False) -> int:
        """How many stored quads match the pattern (each peer counts its own; no quad moves).
        `estimate`: about how many, counted in the peers' stores without a look at each match
        (pending events and, during a split, quads handed over included)."""
        box = self.state.space.pattern_box(pattern)
        return sum(await self.router.multicast(box, Op.COUNT_LOCAL, Find(pattern, estimate=estimate)))

    async def estimate(self, pattern: Pattern) -> int:
        return await self.count(pattern, estimate=True)

    async def _on_count(self, conn: RpcConnection, body: Find) -> Counted:
        return Counted(await self.count(body.pattern))

    async def _own_only(self, whole: Callable[[], Awaitable[T]], own: Callable[[], Awaitable[T]]) -> T:
        """`whole()`, an answer read from the whole store, if the store held only this zone's
        quads from before it to after it; else `own()`, read from this zone's quads only. A
        take-over's install or a split can begin while `whole` awaits (a decision asked for, a
        query in a worker thread): the store then holds quads another peer answers for too."""
        epoch = self.foreign.epoch
        if not self.foreign.held:
            answer = await whole()
            if not self.foreign.held and self.foreign.epoch == epoch:
                return answer
            self.counters["reads_redone_for_foreign_quads"] += 1
        return await own()

    async def _local_count(self, body: Find) -> int:
        async def from_counters() -> int:
            # a counter kept up to date by every write, plus the pending events decided commit,
            # both read at once: a commit arriving while decisions are asked for moves an event
            # from one to the other (read after the asking, the counter counted it twice)
            committed, pending = self.store.count(), self.store.sync.pending()
            decided = set(await self._decided(list(pending.items()))) if pending else set()
            return committed + sum(pending[g].held for g in decided)

        async def scanned() -> int:
            return len(await self._mine(body.pattern))

        if body.estimate:
            return await self.store.run(self.store.sync.estimate, *body.pattern)
        if body.pattern == (None, None, None, None):
            return await self._own_only(from_counters, scanned)
        return await scanned()

    # --- one-time SPARQL ----------------------------------------------------------------------

    async def _on_sparql(self, conn: RpcConnection, body: Sparql) -> SparqlResult:
        text = rewrite_bare_names(body.query)[0]   # ftcontains(…) as the RTF paper writes it
        started = time.perf_counter()
        try:
            patterns, algebra = await self.offload.run(analyse_locked, text)
        except QueryPlanError as exc:
            raise RequestError(exc.message, ErrorCode.BAD_QUERY) from None
        plan = plan_pushdown(text, algebra) if len(patterns) == 1 else None
        if plan is not None:
            self.counters["sparql_pushed_down"] += 1
            return await self._pushdown(plan, patterns[0], started, body.page)
        self.counters["sparql_gathered"] += 1
        if any(p == (None, None, None, None) for p in patterns):
            patterns = [(None, None, None, None)]
        gathered = await self.candidates.gather(patterns, join_shape(algebra))
        if "subClassOf" in text and self.subscriptions.taxonomy.edges:
            gathered |= _taxonomy_in(gathered, self.subscriptions.taxonomy)
        fetched = time.perf_counter()
        if self.budget is None:
            result = await self.offload.run(_evaluate, text, gathered, started, self._functions(text))
        else:
            try:
                taxonomy = self.subscriptions.taxonomy.to_wire() if names_extensions(text) else None
                form, out = await evaluate_in_child(text, gathered, self.budget, taxonomy)
            except RequestError:
                self.counters["sparql_stopped"] += 1
                raise
            result = SparqlResult(form, out, len(gathered), time.perf_counter() - started)
        if selects_star(text):   # the whole answer parsed again: off the event loop
            result = await self.offload.run(_star_in_order, text, result)
        log.info("peer %s: a gathered query: %d candidate quads fetched in %.3f s, evaluated in %.3f s", self.state.id,
                 len(gathered), fetched - started, time.perf_counter() - fetched)
        if body.page and result.form == "solutions":
            answer = json.loads(result.text)
            return await self._paged_solutions(tuple(answer["head"].get("vars", ())), answer["results"]["bindings"],
                                               started, len(gathered))
        return result

    async def _paged_solutions(self, variables: tuple[str, ...], rows: list[Any], started: float,
                               candidates: int = 0) -> SparqlResult:
        """Solutions already at hand, answered in pages."""
        async def produce(sink: PageSink) -> None:
            for page in self.cursors.paged(rows, _size):
                await sink.send(page)

        first, cursor = await self.cursors.from_task(produce)
        return SparqlResult("solutions", "", candidates, time.perf_counter() - started, variables, tuple(first), cursor)

    async def _pushdown(self, plan: Pushdown, pattern: Pattern, started: float, page: bool) -> SparqlResult:
        box = self.state.space.pattern_box(pattern)
        if plan.form == "ask":
            answers = await self.router.multicast(box, Op.SPARQL_LOCAL, SparqlLocal(plan.texts, plan.limit))
            out: dict[str, Any] = {"head": {}, "boolean": any(a[0] for a in answers)}
            return SparqlResult("boolean", json.dumps(out), 0, time.perf_counter() - started)
        answers = await self.router.multicast(box, Op.SPARQL_LOCAL, SparqlLocal(plan.texts, plan.peer_limit, page=True,
                                                                                 order=tuple(map(list, plan.order))),
                                              self._close_answers)
        if plan.form == "count_distinct":
            values: set[tuple] = set()
            async with open_peer_pages(self.pages, [answer[0] for answer in answers]) as pages:
                async for chunk in pages:
                    values |= distinct_values(plan, chunk)
            return _solutions(plan.variables, count_distinct(plan, values), started)
        if plan.form == "aggregate":
            # each peer's rows of each text whole (an average zips a peer's sums with its counts)
            async def rows_of(opened: Any) -> list[Any]:
                rows: list[Any] = []
                async with open_peer_pages(self.pages, [opened]) as pages:
                    async for chunk in pages:
                        rows.extend(chunk)
                return rows

            per_peer = await gather([partial(gather, [partial(rows_of, one) for one in answer]) for answer in answers])
            rows = merge_aggregates(plan, per_peer)
            if page:
                return await self._paged_solutions(plan.variables, rows, started)
            return _solutions(plan.variables, rows, started)
        merge = SelectMerge(plan)

        async def produce(sink: Any) -> None:
            async with open_peer_pages(self.pages, [answer[0] for answer in answers]) as pages:
                async for chunk in pages:
                    taken = merge.take(chunk)
                    if taken:
                        await sink.send(taken)
                    if merge.done:
                        return   # the LIMIT is met: the peers' cursors are closed

        if not plan.streams:   # ordered: every peer's rows (at most OFFSET + LIMIT each), then sorted
            await produce(_Collected())
            rows = merge.finish()
            if page:
                return await self._paged_solutions(plan.variables, rows, started)
            return _solutions(plan.variables, rows, started)
        if page:
            first, cursor = await self.cursors.from_task(produce)
            return SparqlResult("solutions", "", 0, time.perf_counter() - started, plan.variables, tuple(first), cursor)
        everything = _Collected()
        await produce(everything)
        return _solutions(plan.variables, everything.rows, started)

    async def _local_sparql(self, body: SparqlLocal) -> list[Any]:
        """This peer's answers to pushed-down queries, over its visible quads of its own zone
        (paged: each text's first page and the cursor of its rest)."""
        if not all(isinstance(o, list) and len(o) == 2 and isinstance(o[0], str) and isinstance(o[1], bool)
                   for o in body.order):
            raise RequestError("sparql_local: `order` must be [variable, descending] pairs", ErrorCode.BAD_REQUEST)
        pending = list(self.store.sync.pending().items())
        decided = await self._decided(pending) if pending else []
        visible = None
        if len(decided) < len(pending):
            # Every event graph, unless some pending event is not decided commit: then the
            # visible ones, named (which costs oxigraph time per graph held)
            visible = [g for g, info in self.store.events().items() if info.committed] + decided

        async def own_quads() -> list[Quad]:
            # the store holds quads another peer answers for: queries read a copy of our zone's own
            quads: list[Quad] = []
            for pattern in analyse_locked(body.texts[0])[0]:
                quads += await self._mine(pattern)
            return quads

        functions = self._functions(body.texts[0])
        if not body.page:
            async def in_store() -> list[Any]:
                return [await self.store.run(self.store.sync.query_rows, text, visible, body.limit,
                                             MAX_ROWS if body.limit is None else body.limit, functions)
                        for text in body.texts]

            async def on_a_copy() -> list[Any]:
                quads = await own_quads()
                return [await self.offload.run(_evaluate_rows, text, quads, body.limit, functions)
                        for text in body.texts]

            return await self._own_only(in_store, on_a_copy)
        # A store's query reads one snapshot, taken as its first page is read: a take-over's
        # install that began before that put quads another peer answers for in it; then the
        # cursors opened are closed and a copy of our zone's own quads is read instead.
        epoch = self.foreign.epoch
        own = await own_quads() if self.foreign.held else None
        sync = self.store.sync

        ordered = bool(body.order) and body.limit is not None   # the first `limit` rows in that order

        def rows_of(text: str, quads: list[Quad] | None) -> Any:
            limit = None if ordered else body.limit
            rows = (sync.iter_rows(text, visible, limit, functions) if quads is None else
                    _copy_rows(text, quads, limit, functions))
            return self.cursors.paged(top_rows(rows, body.order, body.limit) if ordered else rows,   # type: ignore[arg-type]
                                      _size)

        async def open_each(quads: list[Quad] | None) -> list[Any]:
            opened = []
            for text in body.texts:
                rows, cursor = await self.cursors.from_store(partial(rows_of, text, quads))
                opened.append({"rows": rows, "cursor": cursor, "at": self.state.address})
            return opened

        opened = await open_each(own)
        if own is None and (self.foreign.held or self.foreign.epoch != epoch):
            self.counters["reads_redone_for_foreign_quads"] += 1
            for one in opened:
                self.cursors.close(one["cursor"])
            opened = await open_each(await own_quads())
        return opened

    def _functions(self, text: str) -> Any:
        """What pyoxigraph calls for EventCloud's FILTER functions in `text` (None: it calls none)."""
        return custom_functions(text, self.subscriptions.taxonomy) if names_extensions(text) else None

    # --- deleting -----------------------------------------------------------------------------

    async def _on_delete(self, conn: RpcConnection, body: Delete) -> Deleted:
        box = self.state.space.pattern_box((body.graph, None, None, None))
        removed = await self.router.multicast(box, Op.DELETE_LOCAL, body)
        await self.claims.release(body.graph.value)   # after the quads: a failed delete keeps the claim
        return Deleted(sum(removed))

    async def _local_delete(self, body: Delete) -> int:
        (removed,) = await self.store.write([delete(body.graph.value)])
        return removed

    # --- status -------------------------------------------------------------------------------

    async def _on_status(self, conn: RpcConnection, body: Empty) -> Status:
        """Every peer's status; a peer that does not answer within `partial_wait` is listed as
        down (a paused or cut-off peer, whose calls would wait for the liveness timeout, costs
        status that second, not more)."""
        self.counters["status_crawled"] += 1
        peers, down = await self._crawl_status()
        statuses = [PeerStatus.from_wire(p, trusted=True) for p in peers]
        statuses += [PeerStatus(ident, n.address, n.zone, 0, 0, 0, {}, {}, down=True) for ident, n in down]
        return Status(tuple(sorted(statuses, key=lambda p: p.id)), self.state.space, self.state.algorithm)

    async def _crawl_status(self) -> tuple[list[Any], list[tuple[str, Neighbour]]]:
        """Each peer's status asked directly (a route to a point of its zone, sent to it), and its
        table beside it: the peers it names are asked as soon as it answers, so one silent peer
        costs `partial_wait` once, wherever it sits (a multicast tree waits for each silent
        inner node in turn). A peer that does not answer within `partial_wait` is down, with
        the zone the table naming it gives; a stale entry answered by the zone's live owner is
        not listed down. Each entry is asked once."""
        state, whole = self.state, self.state.space.whole_space()
        answers: dict[str, Any] = {state.id: await self._local_status(Empty())}
        silent: dict[str, Neighbour] = {}
        asked: set[str] = {state.id}
        limiter = trio.CapacityLimiter(CRAWL_AT_ONCE)

        async def ask(ident: str, neighbour: Neighbour) -> None:
            got: dict[str, Any] = {}

            async def one(key: str, op: Op, body: Any) -> None:
                got[key] = await self.router.call(neighbour.address, op, body)

            async with limiter:
                with trio.move_on_after(self.router.partial_wait):
                    try:
                        async with trio.open_nursery() as both:
                            both.start_soon(one, "status", Op.ROUTE, Route(
                                lowest_corner(neighbour.zone, whole), Op.STATUS_LOCAL.value, {}, to=ident))
                            both.start_soon(one, "table", Op.TABLE, Empty())
                    except* EventCloudError:
                        pass
            if len(got) < 2:
                silent[ident] = neighbour
                return
            status = Routed.from_wire(got["status"]).result
            answers[PeerStatus.from_wire(status, trusted=True).id] = status
            discover(Table.from_wire(got["table"]).neighbours.items())

        def discover(entries: Any) -> None:
            for ident, neighbour in entries:
                if ident not in asked and len(asked) < MAX_CRAWLED:
                    asked.add(ident)
                    nursery.start_soon(ask, ident, neighbour)

        async with trio.open_nursery() as nursery:
            discover(sorted(state.neighbours.items()))
        zones = [PeerStatus.from_wire(a, trusted=True).zone for a in answers.values()]
        down = [(k, n) for k, n in silent.items() if k not in answers and
                not any(z.intersects(n.zone.bounds) for z in zones)]
        return list(answers.values()), down

    async def _held(self) -> int:
        """The quads this peer holds (a counter), or while its store holds quads outside its zone
        (a split or a take-over under way), those of its own zone only (a scan, for that while)."""
        if not self.foreign.held:
            return self.store.held()
        return len(await self._mine((None, None, None, None), pending=True))

    async def _local_status(self, body: Empty) -> dict[str, Any]:
        state = self.state
        quads = await self._held()
        return PeerStatus(
            id=state.id, address=state.address, zone=state.zone, quads=quads,
            pending=min(self.store.sync.pending_quads, quads),
            events=len(self.store.events()), subscriptions=len(self.subscriptions),
            events_claimed=self.store.sync.claims, subscriptions_homed=self.subscriptions.homed_in(state.zone),
            neighbours={k: n.address for k, n in sorted(state.neighbours.items())},
            counters={**{k: v for k, v in sorted(self.counters.items()) if k != "subscriptions"},
                      "regex_timeouts": self.subscriptions.regex_timeouts()},
        ).to_wire()


def _taxonomy_in(gathered: set[Quad], taxonomy: Taxonomy) -> set[Quad]:
    """The taxonomy's rdfs:subClassOf edges in each event graph gathered: a path such as
    `?x a/rdfs:subClassOf* ex:C` inside `GRAPH ?g` reads them there, as a subscription's is-a
    path means (the event store holds no taxonomy: every peer keeps it apart)."""
    subclass = trusted_iri(RDFS_SUBCLASSOF)
    edges = [(trusted_iri(a), trusted_iri(b)) for a, b in sorted(taxonomy.edges)]
    return {Quad(graph, a, subclass, b) for graph in {q.g for q in gathered} for a, b in edges}


def _evaluate(text: str, gathered: set[Quad], started: float, functions: Any = None) -> SparqlResult:
    """Evaluate a query over the gathered quads (blocking: runs in a worker thread)."""
    store = ox.Store()
    store.extend([quad_to_ox(q) for q in gathered])
    try:
        result = store.query(text, use_default_graph_as_union=True, custom_functions=functions)
        if isinstance(result, ox.QueryTriples):
            form, out = "graph", result.serialize(format=ox.RdfFormat.N_TRIPLES).decode()
        else:
            form = "boolean" if isinstance(result, ox.QueryBoolean) else "solutions"
            out = result.serialize(format=ox.QueryResultsFormat.JSON).decode()
    except (SyntaxError, ValueError, OSError) as exc:
        raise RequestError(f"query failed: {exc}", ErrorCode.BAD_QUERY) from None
    return SparqlResult(form, out, len(gathered), time.perf_counter() - started)


def _star_in_order(text: str, result: SparqlResult) -> SparqlResult:
    """`SELECT *`'s columns in the order the query first names them, as pushed-down queries give
    them (Oxigraph sorts them by name: a join's columns came out `g o o2 p p2 s`)."""
    if result.form != "solutions":
        return result
    answer = json.loads(result.text)
    answer["head"]["vars"] = list(select_star_order(text, tuple(answer["head"].get("vars", ()))))
    return replace(result, text=json.dumps(answer))


class _Collected:
    """Takes an answer's pages as a cursor's channel would, keeping them all (a client that did
    not ask for pages gets one reply)."""

    def __init__(self) -> None:
        self.rows: list[Any] = []

    async def send(self, page: list[Any]) -> None:
        self.rows.extend(page)


def _solutions(variables: tuple[str, ...], rows: list[Any], started: float) -> SparqlResult:
    out = {"head": {"vars": list(variables)}, "results": {"bindings": rows}}
    return SparqlResult("solutions", json.dumps(out), 0, time.perf_counter() - started)


def _size(item: Any) -> int:
    """About how many bytes a wire quad or a row of SPARQL JSON terms takes on the wire."""
    if type(item) is dict:
        return sum(len(term.get("value", "")) + len(term.get("datatype", "")) + 32 for term in item.values())
    return sum(len(t) if type(t) is str else len(t[0]) + 16 for t in item)


def _copy_rows(text: str, quads: list[Quad], limit: int | None, functions: Any = None) -> Any:
    """`iter_rows` over a copy of some quads (blocking; one thread, start to end)."""
    copy = ox.Store()
    copy.extend([quad_to_ox(q) for q in quads])
    yield from iter_rows(copy, text, None, limit, functions)


def _evaluate_rows(text: str, quads: list[Quad], limit: int | None, functions: Any = None) -> list[Any] | bool:
    """`PeerStore.query_rows` over a copy of some quads (blocking: runs in a worker thread)."""
    copy = ox.Store()
    copy.extend([quad_to_ox(q) for q in quads])
    return query_rows(copy, text, None, limit, MAX_ROWS if limit is None else limit, functions)
