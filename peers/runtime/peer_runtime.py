"""The trio runtime of one peer: builds its services, owns every nursery, listens, joins and serves.

Construction is the wiring (docs/architecture.md, "The daemon's wiring", lists it and a test
keeps that list true): each service is built after what it calls and receives it in its
constructor; the runtime registers every operation's handler explicitly and hands the services
that leave tasks running a `TaskStarter` it serves.

Everything runs under one nursery opened here: the listener, one task per connection (its
RPC reader owns its request handlers), the task starters and each service's `run()`.
Cancelling it (SIGTERM, Ctrl-C, a test's cancel scope) stops the peer; its state and store are
on disk, so the same command brings it back. A peer restarted after a replica took its zone
over finds out before it serves, drops its stale copy and joins again as a new peer
(peers/runtime/lifecycle.py: what outlives one runtime).
"""

from __future__ import annotations

import logging
import random
import uuid
from collections import Counter
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Awaitable, Callable, NoReturn

import trio

from eventcloud.errors import AuthorityUnreachable, EventCloudError, RemoteError
from eventcloud.net.limits import ConnectionLimits, refuse_connection
from eventcloud.net.rpc import RpcConnection
from eventcloud.net.transport import Transport, remote_host
from eventcloud.overlay import Ended, Founded, Left, Outcome, Point, Ready, Rejoin, Stopped, Zone
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Empty, Pong
from eventcloud.wire.ops import Op
from peers.authority import Authority, Ownership, WatchedZoneMap, lease_ttl
from peers.membership import Annexes, LoadSurvey, Membership, Rebalancer
from peers.delivery import Attachments, Gatherer, Homes, Subscribers
from peers.net import Dispatcher, PeerAuth, RetryPolicy, Router
from peers.publish import Commits, GraphClaims, Publishing, RecentPublications
from peers.config import PeerConfig, advertised_address
from peers.process import PeerLauncher, ProcessPeers
from peers.matching import (
    Matcher, OperatorRunner, Schema, Subscriptions, load_operators, load_statistics, load_taxonomy,
)
from peers.runtime.clock_check import ClockCheck, via
from peers.runtime.restart_checks import ask, overlay_of, taken_over_while_down
from peers.runtime.state_file import StateFile
from peers.runtime.lifecycle import Lifetime, told, why_ended
from peers.queries import PAGE_BYTES, RESULT_BYTES, Cursors, Queries, QueryBudget
from peers.replication import OwnerReplication, ReplicaKeeper, ReplicatedStore
from peers.store import AsyncStore, ForeignQuads, Offload, PeerState, PeerStore, StateError, ZoneGuard, load_state
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["PeerConfig", "PeerRuntime", "RunningPeer"]


@dataclass
class RunningPeer:
    """A handle on a serving peer (what `run_peer` reports once it serves)."""

    state: PeerState
    counters: Counter[str]
    router: Router
    subscriptions: Subscriptions
    queries: Queries
    delivery: Subscribers
    matcher: Matcher
    storage: Publishing
    membership: Membership
    replication: OwnerReplication
    replicas: ReplicaKeeper
    standins: PeerLauncher   # stand-ins this peer started for crashed peers whose replica it held
    runtime_limits: ConnectionLimits
    lifetime: Lifetime     # stop() cancels whichever runtime of the peer is current
    stopped: trio.Event
    homes: Homes
    attachments: Attachments
    schema: Schema
    rebalancer: Rebalancer
    annexes: Annexes

    @property
    def id(self) -> str:
        return self.state.id

    @property
    def current(self) -> PeerState:
        """The state of the peer's current runtime: after a move it is a new peer (`state` is the first's)."""
        return self.lifetime.state or self.state

    @property
    def current_store(self) -> AsyncStore:
        """The store of the peer's current runtime (a moved peer has a new one)."""
        return self.lifetime.store or self.rebalancer.store

    @property
    def address(self) -> str:
        return self.state.address

    def stop(self) -> None:
        self.lifetime.cancel()


async def _for_the_peers_lifetime(run: Callable[..., Awaitable[None]], *,
                                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Run a service, which ends only when the peer stops (cancelled). One that returns leaves
    the peer serving without it (a nursery that meets a stray trio.Cancelled ends quietly, and a
    peer without its matcher would go on storing events it never matches): the peer stops
    instead, loudly, and its replica takes its zone over."""
    await run(task_status=task_status)
    raise RuntimeError(f"{getattr(run, '__qualname__', run)} ended while the peer was running")


class PeerRuntime:
    def __init__(self, config: PeerConfig, transport: Transport, physical_ms: Any, process: ProcessPeers,
                 state: PeerState | None, store: PeerStore | None, taxonomy: Taxonomy | None = None,
                 lifetime: Lifetime | None = None, join_at: Point | None = None, rejoining: bool = False,
                 join_annex: tuple[Zone, Zone] | None = None, annex_launcher: PeerLauncher | None = None,
                 authority: Authority | None = None, launch: Callable[..., Awaitable[None]] | None = None) -> None:
        self.lifetime = lifetime = lifetime or Lifetime()
        self.launch = launch      # runs another peer of this process (`run_peer`): stand-ins, annexes
        self.join_at = join_at    # a rejoin moved by the rebalancer splits the zone holding this point
        self.join_annex = join_annex  # an annex takes this side of this zone (peers/membership/annexes.py)
        self.rejoining = rejoining  # one attempt of run_peer's rejoin loop: failing, it lets the loop go on
        self._launched = 0
        self.config = config
        self.transport = transport
        data_dir = config.data_dir
        restored = state if state is not None else (load_state(data_dir) if data_dir is not None else None)
        self.restored = restored
        self.state = state = restored or PeerState(space=config.space, algorithm=config.algorithm,
                                                   replicas=config.replicas)
        if not state.overlay and restored is None and not config.join:
            state.overlay = uuid.uuid4().hex  # a new overlay's id
        self.process = process
        # peers' clocks are within max_clock_offset (ClockCheck): a stamp past twice that is from a wrong one
        self.clock = clock = HybridClock(physical_ms, state.clock, max_ahead_ms=int(config.max_clock_offset * 2000))
        self.counters = counters = Counter[str]()
        self.zone_map = WatchedZoneMap(authority, lambda: state.overlay, counters)
        self.ownership = ownership = Ownership(state, authority, counters,
                                               ttl=config.lease_ttl or lease_ttl(config.failure_timeout),
                                               watched=self.zone_map)
        offload = Offload(config.offloaded, 1)
        self.auth = PeerAuth(lambda: self.state.id, config.secret, config.admin_token, counters,
                             publish_policy=config.publish_policy)
        self.dispatcher = dispatcher = Dispatcher(counters, self.auth, ready_wait=config.retry_window)
        # the long-lived tasks of each service that starts some run in a nursery of this runtime
        # (the router serves its own in its run(): its readers must end before it closes their connections)
        self.tasks = {name: TaskStarter(name) for name in ("standins", "annexes", "subscribers", "attachments",
                                                           "homes", "membership", "cursors")}
        self.standins = PeerLauncher(self._launch_peer, data_dir, self.tasks["standins"], offload)
        # Annexes run under the process's top-level peer, whichever of its peers adopts them (one
        # started under a stand-in or an annex would end with it): a top-level peer runs its own
        # launcher, every other peer of the process is handed that one.
        self.runs_annexes = annex_launcher is None
        self.annex_launcher = annex_launcher or PeerLauncher(self._launch_peer, data_dir, self.tasks["annexes"],
                                                             offload, "annexes")
        self.physical_ms = physical_ms
        self.router = router = Router(state, transport, clock, dispatcher, counters, TaskStarter("router"),
                                      retry=RetryPolicy(config.retry_window), max_hops=config.max_hops,
                                      max_frame=config.max_frame, liveness=config.failure_timeout, auth=self.auth)
        # a lease set by one peer is compared on another's clock: they must agree (refused otherwise)
        self.clock_check = ClockCheck(state, physical_ms, via(router.call, config.retry_window / 2), counters,
                                      max_offset=config.max_clock_offset, every=config.clock_check_every,
                                      rng=random.Random(None if config.seed is None else config.seed + 4))
        peer_store = store if store is not None else PeerStore(data_dir / "store" if data_dir is not None else None,
                                                               durable=config.fsync)
        self.store = store_ = ReplicatedStore(peer_store, config.offloaded, state=state, router=router,
                                              counters=counters, local_peers=process, retry_window=config.retry_window,
                                              heartbeat=config.heartbeat, fence=ownership.fence,
                                              record=ownership.record_replica)
        self.replication = replication = store_.replication
        foreign = ForeignQuads()   # quads held during a split or a take-over: membership marks, queries read
        self.operators = operators = load_operators(config.operators, plugins=config.operator_plugins)
        self.statistics = statistics = load_statistics(config.statistics_file)
        self.runner = runner = OperatorRunner(operators, counters, statistics, budget=config.operator_budget,
                                              threads=config.operator_threads, inline_cost=config.operator_inline_cost)
        self.subscriptions = subscriptions = Subscriptions(state, store_, counters, tombstone_ttl=config.tombstone_ttl,
                                                           taxonomy=load_taxonomy(data_dir) or taxonomy,
                                                           operators=operators, order=config.evaluation_order,
                                                           statistics=statistics)
        # A restarted peer or a stand-in started from a replica's copy stamps what arrives after
        # every event and subscription it holds (matching compares those stamps).
        held = [s.t for s in subscriptions] + [i.published for i in store_.events().values()]
        if held:
            clock.observe(max(held))
        self.schema = Schema(state, router, clock, subscriptions, counters, data_dir=data_dir, offload=offload,
                             sync_every=config.schema_sync_every,
                             rng=random.Random(None if config.seed is None else config.seed + 1))
        self.commits = commits = Commits(state, router, store_, counters)
        guard = ZoneGuard()
        claims = GraphClaims(state, router, store_, guard, counters, retry_window=config.retry_window)
        cursors = Cursors(self.tasks["cursors"], counters, threaded=config.offloaded,
                          page_bytes=min(PAGE_BYTES, config.max_frame // 8))
        self.queries = queries = Queries(state, router, store_, subscriptions, commits, claims, counters, cursors,
                                         offload=Offload(config.offloaded, 2),
                                         budget=QueryBudget(config.query_budget, config.query_memory_mb,
                                                            RESULT_BYTES)
                                         if config.offloaded else None, foreign=foreign)
        self.published = published = RecentPublications()
        gatherer = Gatherer(queries, counters, state=state, router=router, published=published)
        self.delivery = delivery = Subscribers(
            state, router, gatherer, clock, counters, self.tasks["subscribers"], physical_ms=physical_ms,
            leases=config.leases,
            is_admin=self.auth.is_admin, retry_window=config.retry_window,
            subscriber_buffer=config.subscriber_buffer, seen_limit=config.seen_limit,
            reconstructors=config.reconstructors, reconstruct_deadline=config.reconstruct_deadline,
            taxonomy=lambda: subscriptions.taxonomy, operators=operators, runner=runner)
        self.attachments = attachments = Attachments(state, router, delivery, clock, counters, self.tasks["attachments"],
                                                     attach_refresh=config.attach_refresh,
                                                     retry_window=config.retry_window)
        self.homes = homes = Homes(
            state, router, store_, subscriptions, gatherer, counters, self.tasks["homes"], physical_ms=physical_ms,
            retry_window=config.retry_window, attach_refresh=config.attach_refresh,
            lease_check_every=config.lease_check_every, ended_ttl=config.ended_ttl, lease_grace=config.lease_grace,
            clock_agrees=self.clock_check.agrees,
            reconstruct_deadline=config.reconstruct_deadline, guard=guard, runner=runner)
        self.matcher = matcher = Matcher(
            state, router, store_, subscriptions, delivery.accept, clock, counters, runner, workers=config.workers,
            work_queue=config.work_queue, enqueue_timeout=config.retry_window, outbox_every=config.outbox_every,
            give_up_after=config.give_up_after, contained_chains=config.contained_chains, guard=guard)
        self.storage = storage = Publishing(state, router, store_, commits, matcher, clock, counters, guard,
                                         retry_window=config.retry_window, commit_later=config.commit_later,
                                         resolve_after=config.resolve_after,
                                         abort_after=config.abort_after, admit_backlog=config.admit_backlog,
                                         backlog=lambda: max(matcher.backlog, delivery.backlog),
                                         published=published, peers_proven=dispatcher.peers_proven,
                                         claims=claims, may_publish=self.auth.publish_refusal)
        self.persistence = StateFile(state, clock, data_dir, offload, replication)
        self.scope = lifetime.runtime(state, store_)   # what the peer's handle reads from now on
        self.limits = ConnectionLimits(
            config.max_connections, config.max_buffered, per_address=config.max_per_address,
            reserved=min(config.reserved_connections, config.max_connections // 4),
            evictable=lambda conn: not (delivery.holds(conn) or attachments.holds(conn)))
        self._nursery: trio.Nursery | None = None
        joins_rng = random.Random(config.seed)   # the join's random point and its probes: one sequence
        self.survey = survey = LoadSurvey(state, router, store_, joins_rng, process)
        self.membership = membership = Membership(
            state, router, store_, subscriptions, transport, clock, counters, self.tasks["membership"],
            replication=replication,
            persist=self.persistence.save, retire=self._retire, rng=joins_rng,
            join_timeout=config.join_timeout, retry_window=config.retry_window, guard=guard, foreign=foreign,
            operators=operators, rematch=matcher.rematch, survey=survey, locate=ownership.server_of,
            authority_url=lambda: ownership.url, silent_owners=lambda: self.replicas.silent_owners(),
            decisions=ownership, end=self._end)
        self.rebalancer = Rebalancer(state, membership, survey, router, store_, counters, every=config.rebalance_every,
                                     ratio=config.rebalance_ratio, min_quads=config.rebalance_min_quads,
                                     make_room=config.rebalance_make_room,
                                     rng=random.Random(None if config.seed is None else config.seed + 2),
                                     table_of=membership.stabiliser.table_of, ready=dispatcher.ready,
                                     step_down=self._move, live_subscriptions=delivery.live)
        self.annexes = Annexes(state, router, store_, membership, process, self.annex_launcher, counters, offload,
                               limit=config.neighbour_limit, cap=config.host_neighbour_cap, every=config.annex_every,
                               rng=random.Random(None if config.seed is None else config.seed + 3),
                               ready=dispatcher.ready, retire=self._retire_now)
        self.replicas = replicas = ReplicaKeeper(
            state, router, self.standins, counters, data_dir=data_dir, durable=config.fsync, offload=Offload(
                config.offloaded, 1), heartbeat=config.heartbeat, failure_timeout=config.failure_timeout,
            departed=membership.departed, claim=ownership.claim, refusal=ownership.refusal,
            epoch_of=ownership.epoch_of, locate=ownership.server_of)
        # Every operation and the service that serves it (the dispatcher refuses one registered twice).
        dispatcher.register({Op.PING: self._ping, **self.auth.handlers()})
        dispatcher.register(router.handlers(), routed=router.routed())
        dispatcher.register(queries.handlers(), routed=queries.routed(), batches=queries.routed_batches())
        dispatcher.register(delivery.handlers(), routed=delivery.routed())
        dispatcher.register(attachments.handlers())
        dispatcher.register(storage.handlers(), routed=storage.routed(), pushes=storage.pushes())
        dispatcher.register(membership.handlers(), routed=membership.routed())
        dispatcher.register(survey.handlers(), routed=survey.routed())
        dispatcher.register(replicas.handlers())
        dispatcher.register(self.schema.handlers(), routed=self.schema.routed())
        dispatcher.register(self.rebalancer.handlers())
        dispatcher.register(self.annexes.handlers())
        dispatcher.register(routed=matcher.routed(), batches=matcher.routed_batches())
        dispatcher.register(routed=commits.routed())
        dispatcher.register(routed=claims.routed())
        dispatcher.register(routed=homes.routed())

    async def _ping(self, conn: RpcConnection, body: Empty) -> Pong:
        replica = self.state.replica
        return Pong(self.state.id, self.state.address, replica[0] if replica else "", clock=self.physical_ms())

    def _end(self, outcome: Outcome, *, cancel: bool = True) -> None:
        """Every end of this runtime is this one step of its zone lifecycle (the first end wins),
        and then the runtime's scope is cancelled: `run` returns the outcome. A zone handed over
        (a leave, an annex handed on, a move) is retired too: no restart brings it back, no
        replica claims it."""
        lifecycle = self.state.lifecycle
        if not lifecycle.ended:
            self.state.step(Ended(outcome))
            if isinstance(outcome, Left) or (isinstance(outcome, Rejoin) and outcome.handed_over):
                self.persistence.retire()
                self.ownership.retire()
        if cancel:
            self.scope.cancel()

    async def _end_now(self, outcome: Outcome) -> NoReturn:
        """`_end`, from a task of this runtime: it goes no further."""
        self._end(outcome)
        await trio.sleep_forever()   # cancelled at once: every task of the runtime is in its scope

    async def _retire(self, conn: RpcConnection) -> None:
        """A graceful leave handed the zone over: the runtime stops once the leaver's client has the reply."""
        self._end(Left(), cancel=False)
        assert self._nursery is not None
        self._nursery.start_soon(_stop_after_reply, conn, self.scope)

    def _retire_now(self) -> None:
        """This peer handed its zone over on its own (an annex handed on): it stops."""
        self._end(Left())

    async def _launch_peer(self, *, task_status: Any, data_dir: Path | None = None, state: PeerState | None = None,
                           store: PeerStore | None = None, annex: tuple[str, Zone, Zone] | None = None,
                           taking_over: bool = False) -> None:
        """Another peer in this process: a stand-in (`taking_over`: just now, from a copy), or
        an annex (`annex`: its owner's address, the zone and the side to take); or one of them
        coming back with this peer."""
        host = self.config.listen.rpartition(":")[0]
        self._launched += 1   # a seeded peer's stand-ins and annexes are seeded too (replayable runs)
        # A stand-in taking over never listens on the port of the peer it stands in for (its
        # copy's address): that peer, restarted with its own command, must find its port free
        # (it then learns it was taken over, and rejoins). Stand-ins and annexes coming back
        # with this peer take their own old ports again when free.
        config = replace(self.config, listen=f"{host}:0", join=annex[0] if annex else None, data_dir=data_dir,
                         seed=None if self.config.seed is None else self.config.seed * 1009 + self._launched,
                         reuse_port=not taking_over)
        assert self.launch is not None, "this runtime was given no way to run another peer"
        await self.launch(config, self.transport, physical_ms=self.physical_ms, task_status=task_status,
                       process=self.process, state=state, store=store, taxonomy=self.subscriptions.taxonomy,
                       join_annex=annex[1:] if annex else None, annex_launcher=self.annex_launcher,
                       authority=self.ownership.authority)

    async def _serve_connection(self, stream: trio.abc.Stream) -> None:
        config, limits = self.config, self.limits
        conn = RpcConnection(stream, self.clock, on_request=self.dispatcher.handle, on_push=self.dispatcher.handle_push,
                             max_frame=config.max_frame,
                             accepted_ops=self.dispatcher.request_ops, max_inflight=config.max_inflight,
                             max_outbox=config.max_outbox, name=f"{self.state.address}<-client",
                             counters=self.counters, limits=limits, idle_timeout=config.idle_timeout,
                             frame_timeout=config.frame_timeout, first_request_timeout=config.first_request_timeout,
                             remote=remote_host(stream))
        refused = limits.admit(conn)
        self.counters["connections_evicted"] = limits.evicted
        if refused is not None:
            self.counters["connections_refused"] += 1
            others = [n.address for n in self.state.neighbours.values()][:2]
            elsewhere = f"try another peer ({', '.join(others)}) or later" if others else "try again later"
            await refuse_connection(stream, self.clock, f"peer {self.state.id} {refused}; {elsewhere}")
            return
        try:
            await conn.run()
        finally:
            limits.release(conn)
            self.auth.forget(conn)
            with trio.CancelScope(shield=True):
                with trio.move_on_after(config.retry_window):
                    await self.attachments.connection_closed(conn)
                    await self.delivery.connection_closed(conn)

    async def run(self, task_status: trio.TaskStatus[RunningPeer]) -> Outcome:
        """Serve until this runtime ends; how it ended (a `Rejoin`: run_peer starts a new peer)."""
        state, config = self.state, self.config
        if self.restored is not None and self.restored.has_zone:
            try:
                if config.join:
                    await self._check_same_overlay(config.join)
                await self.clock_check.check_most([n.address for n in state.neighbours.values()][:3], self._ask)
                rejoin = await self._taken_over_while_down()   # before anything serves the restored zone
            except BaseException:
                self._close_stores()
                raise
            if rejoin is not None:
                self._close_stores()
                state.step(Ended(rejoin))
                return rejoin
        try:
            with self.scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    for starter in self.tasks.values():
                        await nursery.start(_for_the_peers_lifetime, starter.serve)
                    await self._listen(nursery)
                    for service in (self.router, self.matcher, self.delivery, self.homes, self.standins,
                                    *([self.annex_launcher] if self.runs_annexes else [])):
                        await nursery.start(_for_the_peers_lifetime, service.run)
                    if self.restored is not None and self.restored.has_zone:
                        await self._commit_restored_join()
                        await self.membership.splits.resume()   # a split saved under way: its commit, or undo
                        await self.membership.merges.resume()   # a merge saved under way: the authority's word
                        await self.persistence.save()
                        await self._register(nursery)
                        self.dispatcher.ready.set()
                        await self.membership.announce_self()
                        if state.replicas >= 2:
                            await self.replication.ensure(replace=True)  # the copy may miss our last writes
                    elif config.join:
                        await self.clock_check.check_most([config.join], self._ask)
                        await self._check_same_overlay(config.join)
                        state.annex = self.join_annex is not None
                        if self.ownership.enabled and not state.overlay:   # the authority's keys name it
                            state.overlay = await overlay_of(self._ask, config.join) or ""
                        self.membership.join_outcome = "started"
                        await self._register(nursery, joining=True)   # before the zone's quads: they are writes too
                        await self.membership.join(config.join, at=self.join_at, annex=self.join_annex)
                        await self.schema.sync_from(config.join)   # before matching anything
                        self.dispatcher.ready.set()
                    else:
                        await self.ownership.refuse_a_second_overlay()
                        state.step(Founded(Zone(state.space.whole_space())))
                        await self.persistence.save()
                        await self._register(nursery)
                        await self._found_zone_map()
                        self.dispatcher.ready.set()
                    self.process.add(state, self.store.held)
                    if self.auth.open and self.process.first_open_warning():
                        log.warning("peer %s: no cluster secret is set, so any client can use peer operations "
                                    "(start peers with --secret-file or EVENTCLOUD_SECRET)", state.id)
                    await nursery.start(_for_the_peers_lifetime,
                                        partial(self.membership.run, stabilise_every=config.stabilise_every))
                    for service in (self.storage, self.replication, self.replicas, self.schema, self.rebalancer,
                                    self.annexes, self.clock_check):
                        await nursery.start(_for_the_peers_lifetime, service.run)
                    nursery.start_soon(self._step_down_when_superseded)
                    nursery.start_soon(self._step_down_when_deposed)
                    task_status.started(RunningPeer(
                        state=state, counters=self.counters, router=self.router, subscriptions=self.subscriptions,
                        queries=self.queries, delivery=self.delivery, matcher=self.matcher, storage=self.storage,
                        membership=self.membership, replication=self.replication, replicas=self.replicas,
                        standins=self.standins, runtime_limits=self.limits, lifetime=self.lifetime,
                        stopped=self.lifetime.stopped, homes=self.homes, attachments=self.attachments, schema=self.schema,
                        rebalancer=self.rebalancer, annexes=self.annexes))
                    await trio.sleep_forever()
        except BaseException as exc:
            if not state.lifecycle.ended:
                state.step(Ended(Stopped(why_ended(exc))))
            raise
        finally:
            if not state.lifecycle.ended:   # its scope was cancelled: a stop was asked
                state.step(Ended(Stopped("asked to stop")))
            outcome = state.lifecycle.ready().end   # what the runtime owes its lifecycle: this end
            if state.has_zone:   # a zone's owner ends: say why, naming it (a moved peer's id is a new one)
                log.info("peer %s (%s): its runtime ends holding zone %s: %s", state.id, state.address,
                         state.zone, told(outcome))
            self.runner.close()
            self.process.discard(state)
            with trio.CancelScope(shield=True):
                if state.has_zone:
                    try:
                        await self.persistence.save()
                    except (OSError, EventCloudError) as exc:
                        log.warning("peer %s: could not save its state on the way out: %s", state.id, exc)
                if self.membership.join_outcome in ("started", "refused"):   # surely not its zone
                    await self.ownership.abandon_join()
                self.store.sync.close()
                self.replicas.close_copies()   # closed by its run already, unless that never started
            # A rejoin attempt that failed before serving leaves the peer to run_peer's loop,
            # which tries the next address: setting `stopped` here would end the peer process.
            if not isinstance(outcome, Rejoin) and not (self.rejoining and not self.dispatcher.ready.is_set()):
                self.lifetime.stopped.set()
        assert outcome is not None
        state.lifecycle.advance(Ready(save=False, end=outcome))
        return outcome

    def _close_stores(self) -> None:
        """A runtime that ends before it served: its store and the copies it opened close."""
        self.store.sync.close()
        self.replicas.close_copies()

    async def _listen(self, nursery: trio.Nursery) -> None:
        config, restored = self.config, self.restored
        bound = None
        if restored is not None and restored.address and config.listen.endswith(":0") and config.reuse_port:
            # Come back on the same port if it is free, so clients' addresses stay valid;
            # otherwise any port will do: neighbours learn it when we announce ourselves.
            previous = config.listen.rpartition(":")[0] + ":" + restored.address.rpartition(":")[2]
            try:
                bound = await nursery.start(self.transport.serve, previous, self._serve_connection)
            except OSError:
                bound = None
        if bound is None:
            bound = await nursery.start(self.transport.serve, config.listen, self._serve_connection)
        self.state.address = advertised_address(bound, config.advertise)

    async def _check_same_overlay(self, bootstrap: str) -> None:
        """A data directory of another overlay must not join this one (nor start a new one)."""
        if self.restored is None or not self.restored.overlay:
            return
        overlay = await overlay_of(self._ask, bootstrap)   # unreachable: the join itself will say so
        if overlay and overlay != self.restored.overlay:
            raise StateError(f"the data directory {self.config.data_dir} belongs to overlay {self.restored.overlay}, "
                             f"but the peer at {bootstrap} is in overlay {overlay}; use another --data-dir")

    async def _taken_over_while_down(self) -> Rejoin | None:
        """Before serving a restored zone: did a replica take it over while we were down?"""
        rejoin = await taken_over_while_down(self.state, self.ownership, self._ask)
        if rejoin is None:
            return None
        log.warning("peer %s: its zone was taken over while it was down; rejoining as a new peer", self.state.id)
        return Rejoin(tuple(rejoin), "taken over while it was down")

    async def _commit_restored_join(self) -> None:
        """A state saved while its join was committing: its splitter decides before the zone is
        served. Refused (the split was undone while this peer was down), it rejoins as a new peer;
        undecided (no answer, a fence, for longer than the splitter waits), the runtime fails: the
        peer's next start asks again, and its replica meanwhile asks on its behalf."""
        try:
            await self.membership.commit_again()
        except RemoteError as exc:
            if self.membership.join_outcome != "refused":
                raise
            log.warning("peer %s: its join was not committed and its splitter refuses it now (%s); rejoining "
                        "as a new peer", self.state.id, exc.message)
            rejoin = [n.address for n in self.state.neighbours.values()] + ([self.config.join] if self.config.join else [])
            await self._end_now(Rejoin(tuple(rejoin), "its join was refused after a restart"))

    async def _found_zone_map(self) -> None:
        """The new overlay's zone map at the authority: the whole space, this peer's."""
        try:
            await self.ownership.founded(self.state.zone)
        except EventCloudError as exc:
            log.warning("peer %s: the ownership authority did not record the new overlay's zone (%s); its "
                        "zone map fills in with the first join", self.state.id, exc)

    async def _register(self, nursery: trio.Nursery, *, joining: bool = False) -> None:
        """Register as the zone's owner before serving it, and renew from then on (`Ownership.run`,
        started here: what follows a registration, a join or a restored peer's first copy to its
        replica, may outlast the lease's TTL). `Ownership.run` retries an authority that does not
        answer; a joining peer fails instead: its join's writes would all be fenced."""
        try:
            await self.ownership.establish()
        except AuthorityUnreachable as exc:
            if joining:
                raise StateError(f"cannot join: {exc}; a peer joins only once it may own a zone") from None
            log.warning("peer %s: %s; it serves reads and refuses writes until the authority answers",
                        self.state.id, exc)
        if self.ownership.superseded.is_set():
            await self._end_now(Rejoin(tuple(n.address for n in self.state.neighbours.values()),
                                       "deposed: its zone's epoch moved on", listen=self.state.address))
        await nursery.start(_for_the_peers_lifetime, self.ownership.run)
        await nursery.start(_for_the_peers_lifetime, self.zone_map.run)   # its keys' prefix is known now
        nursery.start_soon(self._follow_moves)

    async def _follow_moves(self) -> None:
        """Zones the watched map shows served elsewhere now: each checked with the peer there,
        and our table repointed (`Stabiliser.learn_served`); publications then go to it."""
        async for ident, address, incarnation in self.zone_map.moves:
            await self.membership.stabiliser.learn_served(ident, address, incarnation)

    async def _step_down_when_deposed(self) -> None:   # the authority holds a newer epoch of its zone
        await self.ownership.superseded.wait()
        self.replication.taken_over(None)

    async def _step_down_when_superseded(self) -> None:
        """A peer frozen or cut off past the failure timeout comes back to find its replica
        serving its zone: two owners of one zone would split its data, so it stops serving
        (this runtime ends) and rejoins as a new peer on the same address."""
        await self.replication.superseded.wait()
        state = self.state
        rejoin = tuple(a for a in (self.replication.taken_over_at, *(n.address for n in state.neighbours.values()))
                       if a)
        await self._end_now(Rejoin(rejoin, "superseded: another peer serves its zone", listen=state.address))

    async def _move(self, rejoin: list[str], at: Point | None, after: float = 0.0) -> NoReturn:
        """The rebalancer handed this peer's zone over: this runtime ends and the peer rejoins as
        a new peer on the same address, through `rejoin` (its heir first), splitting the zone
        that holds `at` (the busiest peer's; None: the busiest it finds then), `after` seconds on."""
        await self._end_now(Rejoin(tuple(rejoin), "moved by the rebalancer", listen=self.state.address, at=at,
                                   after=after, handed_over=True))

    async def _ask(self, address: str, op: Op, body: Any) -> dict[str, Any] | None:
        return await ask(self.transport, self.clock, self.auth, address, op, body, within=self.config.retry_window / 2)


async def _stop_after_reply(conn: RpcConnection, scope: trio.CancelScope) -> None:
    """After a graceful leave: stop once the client has the reply (it closes), within 2 s."""
    with trio.move_on_after(2):
        await conn.wait_closed()
    scope.cancel()
