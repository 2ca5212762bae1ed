"""Every knob of a peer, in one validated place.

Tests and the CLI set knobs here, never by changing module globals. Durations are seconds.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from eventcloud.matching.ordering import ORDERS
from eventcloud.overlay import CoordinateSpace
from eventcloud.wire.frames import DEFAULT_MAX_FRAME

ALGORITHMS = ("osma", "csma")


@dataclass(frozen=True)
class LeaseSettings:
    """Subscription lifetimes and what a durable subscription keeps (seconds, counts, bytes)."""

    default: float = 86_400.0           # a durable subscription's lease when it asks for none
    maximum: float = 30 * 86_400.0      # the longest lease granted
    session: float = 600.0              # a non-durable one's lease, renewed while its connection lives
    retain_count: int = 10_000          # notifications kept unacknowledged per durable subscription …
    retain_bytes: int = 16 * 1024 * 1024  # … and their bytes; past either, the oldest go (a gap notice)
    seen_ms: int = 1_200_000            # how long a delivered event is remembered against duplicates


@dataclass
class PeerConfig:
    listen: str = "127.0.0.1:0"
    join: str | None = None
    data_dir: Path | None = None          # None: in memory, nothing survives (tests)
    algorithm: str = "osma"               # used only by the first peer of an overlay
    space: CoordinateSpace = field(default_factory=CoordinateSpace)
    seed: int | None = None               # for the join point; None: random
    advertise: str | None = None          # HOST[:PORT] other peers use to reach this one
    reuse_port: bool = True               # a restored peer listening on port 0 comes back on its old port if free
    replicas: int = 2                     # copies of every zone, fixed by an overlay's first peer (1 or 2)
    # security
    secret: bytes | None = None           # the cluster secret peers prove to each other (None: open overlay)
    admin_token: str | None = None        # needed for leave and delete when set
    # publish token -> the graph IRI prefixes it may publish under (None: anyone publishes anywhere)
    publish_policy: dict[str, tuple[str, ...]] | None = None
    tls_cert: Path | None = None          # serve TLS with this certificate chain and key …
    tls_key: Path | None = None
    tls_ca: Path | None = None            # … and verify the peers one connects to against this CA
    # routing and membership
    retry_window: float = 5.0             # how long a request retries around a dead peer
    heartbeat: float = 0.5                # a replica pings the owner of each copy it holds this often
    failure_timeout: float = 3.0          # ... and takes its zone over after this long without an answer
    lease_ttl: int = 0                    # seconds of an owner's lease with the authority (0: 4 x failure_timeout, >= 10)
    max_hops: int = 256
    stabilise_every: float = 5.0          # seconds between neighbour-table checks (0: never)
    join_timeout: float = 30.0            # a split whose newcomer never commits is undone after this
    rebalance_every: float = 10.0         # a light peer looks for a much busier one this often, then moves (0: never)
    rebalance_ratio: float = 4.0          # ... when that one holds at least this many times its quads
    rebalance_min_quads: int = 10_000     # ... and at least this many
    rebalance_make_room: bool = True      # an empty peer that cannot leave has neighbours step aside
    neighbour_limit: int = 48             # a peer with more neighbours hands an empty side to another host (0: never)
    host_neighbour_cap: int = 64          # ... to one that stays within this many neighbours with it
    annex_every: float = 30.0             # ... and looks this often
    # connections
    max_frame: int = DEFAULT_MAX_FRAME
    max_inflight: int = 64                # requests served at once per connection
    max_outbox: int = 8 * 1024 * 1024     # bytes queued for sending per connection
    max_connections: int = 1024           # connections served at once (more are refused)
    max_buffered: int = 64 * 1024 * 1024  # bytes of unfinished frames buffered by all connections together
    idle_timeout: float = 300.0           # a connection without any message for this long is closed
    first_request_timeout: float = 10.0   # a new connection must ask something this soon (else closed)
    max_per_address: int = 256            # connections without credentials one host may hold at once
    reserved_connections: int = 64        # slots kept for connections that prove the secret or admin token
    frame_timeout: float = 30.0           # a frame begun must be complete within this
    # matching and delivery
    workers: int = 4                      # matching tasks
    work_queue: int = 65536               # matching steps queued
    admit_backlog: int = 128              # publications wait while owners queue more matching steps (0: never)
    reconstructors: int = 4               # CSMA reconstructions at once (apart from matching)
    reconstruct_deadline: float = 30.0
    subscriber_buffer: int = 10_000       # notifications queued per subscriber before dropping
    seen_limit: int = 200_000             # (subscription, event) pairs remembered for dedup
    tombstone_ttl: float = 300.0
    schema_sync_every: float = 10.0       # a peer asks a neighbour for a newer taxonomy this often
    # publication and notification reliability
    commit_later: float = 1.0             # owners with no matching to start get their commits merged, this often
    resolve_after: float = 3.0            # a pending event this old is resolved with its entry's decision
    abort_after: float = 30.0             # ... and aborted if nobody decided it by then
    outbox_every: float = 5.0             # committed events whose notifications are not done: retried
    give_up_after: float = 600.0          # ... until this old (an entry peer gone for good)
    # subscription lifetimes (see LeaseSettings) and durable delivery
    lease_default: float = 86_400.0
    lease_max: float = 30 * 86_400.0
    session_lease: float = 600.0
    retain_count: int = 10_000
    retain_bytes: int = 16 * 1024 * 1024
    attach_refresh: float = 5.0           # an entry peer re-attaches its durable subscribers this often
    lease_check_every: float = 1.0        # a home checks its mailboxes' leases this often
    ended_ttl: float = 86_400.0           # an ended durable subscription is remembered (to say why)
    lease_grace: float = 60.0             # peers drop a subscription this long after its lease ended
    # leases set by one peer are compared by another: their clocks must agree (peers/runtime/clock_check.py)
    max_clock_offset: float = 30.0        # seconds a peer's clock may be off its neighbours' (< lease_grace)
    clock_check_every: float = 30.0       # a peer measures its offset to a few neighbours this often
    # registered operator functions in FILTERs: docs/matching.md, "Operators"
    operators: tuple = ()                 # module names exposing OPERATORS, or Operator objects
    operator_plugins: bool = True         # also load the installed `eventcloud.operators` entry points
    operator_budget: float = 2.0          # seconds one call may take; past it, its FILTER is false
    operator_threads: int = 2             # expensive calls running at once (off the event loop)
    operator_inline_cost: float = 50.0    # operators declaring at most this many µs run in place
    evaluation_order: str = "suborder"    # residual predicates: naive, sequential or suborder
    statistics_file: Path | None = None   # offline statistics (experiments/spark/statistics.py) to start from
    contained_chains: bool = True         # CSMA: contained subscriptions ride their container's chain
    # one-time queries that gather (several patterns) run in a child process, stopped past these
    query_budget: float = 30.0            # seconds
    query_memory_mb: int = 2048           # MB of address space
    # store
    offload_store: bool | None = None     # run store calls in a thread (None: iff on disk)
    fsync: bool = True                    # the log is fsynced before a write is acknowledged

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}: use one of {', '.join(ALGORITHMS)}")
        if self.data_dir is not None:
            self.data_dir = Path(self.data_dir)
        if self.evaluation_order not in ORDERS:
            raise ValueError(f"unknown evaluation order {self.evaluation_order!r}: use one of {', '.join(ORDERS)}")
        if isinstance(self.operators, str):
            self.operators = (self.operators,)
        self.operators = tuple(self.operators)
        if self.statistics_file is not None:
            self.statistics_file = Path(self.statistics_file)
        if not self.operator_inline_cost >= 0:
            raise ValueError("operator_inline_cost must be 0 or more")
        if self.lease_ttl != 0 and not 2 <= self.lease_ttl <= 3600:
            raise ValueError(f"lease_ttl must be 2 to 3600 seconds (0: derived from failure_timeout), got {self.lease_ttl!r}")
        if self.replicas not in (1, 2):
            raise ValueError(f"replicas must be 1 or 2, got {self.replicas!r}")
        positive = ("retry_window", "heartbeat", "failure_timeout", "join_timeout", "reconstruct_deadline",
                    "idle_timeout", "frame_timeout", "first_request_timeout", "lease_default", "lease_max", "session_lease",
                    "attach_refresh", "lease_check_every", "ended_ttl", "lease_grace", "clock_check_every",
                    "tombstone_ttl", "schema_sync_every",
                    "commit_later", "resolve_after", "abort_after", "outbox_every", "give_up_after", "operator_budget",
                    "query_budget")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        at_least_one = ("max_hops", "max_frame", "max_inflight", "max_outbox", "max_connections", "max_buffered",
                        "workers", "work_queue",
                        "reconstructors", "subscriber_buffer", "seen_limit", "retain_count", "retain_bytes",
                        "operator_threads", "query_memory_mb")
        for name in at_least_one:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.stabilise_every < 0:
            raise ValueError("stabilise_every must be 0 (never) or positive")
        if not isinstance(self.neighbour_limit, int) or self.neighbour_limit < 0:
            raise ValueError(f"neighbour_limit must be 0 (never) or a positive integer, got {self.neighbour_limit!r}")
        if self.neighbour_limit and not self.neighbour_limit < self.host_neighbour_cap:
            raise ValueError(f"host_neighbour_cap ({self.host_neighbour_cap!r}) must be over neighbour_limit "
                             f"({self.neighbour_limit})")
        if not self.annex_every > 0:
            raise ValueError(f"annex_every must be positive, got {self.annex_every!r}")
        if self.rebalance_every < 0:
            raise ValueError("rebalance_every must be 0 (never) or positive")
        if not self.rebalance_ratio >= 2:
            raise ValueError(f"rebalance_ratio must be at least 2 (a move could undo another), "
                             f"got {self.rebalance_ratio!r}")
        if not isinstance(self.rebalance_min_quads, int) or self.rebalance_min_quads < 1:
            raise ValueError(f"rebalance_min_quads must be a positive integer, got {self.rebalance_min_quads!r}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both a certificate (tls_cert) and its key (tls_key)")
        if self.tls_ca is not None and self.tls_cert is None:
            raise ValueError("tls_ca verifies other peers' certificates: give this peer's own (tls_cert, tls_key) too")
        if self.secret is not None and len(self.secret) < 16:
            raise ValueError("the cluster secret must be at least 16 bytes long")
        if self.max_per_address < 0 or self.reserved_connections < 0:
            raise ValueError("max_per_address and reserved_connections must be 0 or more")
        if self.publish_policy is not None:
            for token, prefixes in self.publish_policy.items():
                if not isinstance(token, str) or len(token) < 8:
                    raise ValueError("publish_policy: every token needs at least 8 characters")
                if not isinstance(prefixes, tuple) or not all(isinstance(p, str) and p for p in prefixes):
                    raise ValueError(f"publish_policy: token {token[:4]}…: a tuple of graph IRI prefixes")
        if self.admin_token is not None and len(self.admin_token) < 8:
            raise ValueError("the admin token must be at least 8 characters long")
        if self.lease_default > self.lease_max:
            raise ValueError(f"lease_default ({self.lease_default:g} s) is longer than lease_max ({self.lease_max:g} s)")
        if not 0 < self.max_clock_offset < self.lease_grace:
            raise ValueError(f"the maximum clock offset (--max-clock-offset, max_clock_offset: {self.max_clock_offset:g} s) "
                             f"must be above 0 and below the lease grace ({self.lease_grace:g} s): a lease is "
                             f"compared on another peer's clock")
        if self.abort_after <= self.resolve_after:
            raise ValueError("abort_after must be longer than resolve_after")
        if self.resolve_after <= self.commit_later:
            raise ValueError("resolve_after must be longer than commit_later (owners would ask before being told)")

    @property
    def leases(self) -> LeaseSettings:
        return LeaseSettings(self.lease_default, self.lease_max, self.session_lease, self.retain_count,
                             self.retain_bytes, int(self.give_up_after * 2000))

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def offloaded(self) -> bool:
        return self.data_dir is not None if self.offload_store is None else self.offload_store


def advertised_address(bound: str, advertise: str | None) -> str:
    """The address other peers should use: --advertise if given; a wildcard bind
    (0.0.0.0, ::) is replaced by this host's name so neighbours can reach it."""
    host, _, port = bound.rpartition(":")
    if advertise:
        host_part, sep, port_part = advertise.rpartition(":")
        if not sep:
            return f"{advertise}:{port}"
        return f"{host_part}:{port}" if port_part == "0" else advertise
    if host in ("0.0.0.0", "::", ""):
        return f"{socket.gethostbyname(socket.gethostname())}:{port}"
    return bound
