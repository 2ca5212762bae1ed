"""An in-process overlay for tests: real peers (runtime, store, protocol) over memory streams.

Peers run under the test's trio clock (use `MockClock(autojump_threshold=0)`, e.g. the
`autojump_clock` fixture), so timeouts and retries are deterministic and instant. Store calls
run inline (no worker threads), which keeps virtual time honest.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import trio

from eventcloud.client import Client, connect
from eventcloud.errors import AuthorityUnreachable, ClockOffset
from eventcloud.overlay import CoordinateSpace
from eventcloud.testing.memory import Endpoint, MemoryNetwork
from peers.authority import Authority, LocalAuthority
from peers.config import PeerConfig
from peers.runtime import RunningPeer, run_peer

__all__ = ["Overlay", "open_overlay", "trio_ms"]


def trio_ms() -> int:
    """The trio clock in milliseconds: the physical clock of peers and clients under test."""
    return int(trio.current_time() * 1000)


class Overlay:
    def __init__(self, nursery: trio.Nursery, network: MemoryNetwork, config: PeerConfig, seed: int,
                 authority: LocalAuthority | None = None) -> None:
        self.nursery = nursery
        self.network = network
        self.config = config
        self.peers: list[RunningPeer] = []
        self.seed = seed
        self.authority = authority   # the ownership authority every peer reaches (None: none)
        self.endpoints: dict[str, Endpoint] = {}   # a peer's address -> its side of the network
        self.clock_stops: list[ClockOffset] = []   # peers that stopped because their clock was off

    async def add_peer(self, data_dir: Any = None, *, skew_ms: int | Callable[[], int] = 0,
                       **knobs: Any) -> RunningPeer:
        """Start one more peer (joining the first); `knobs` override PeerConfig fields; `skew_ms`
        sets its wall clock that far ahead (or behind) of the others (a callable: as it says
        each time, so a test can make the clock jump)."""
        join = self.peers[0].address if self.peers else None
        config = replace(self.config, join=join, data_dir=data_dir, seed=self.seed * 1000 + len(self.peers), **knobs)
        endpoint = self.network.endpoint()
        running: RunningPeer = await self.nursery.start(self._run, config, endpoint, skew_ms)
        self.endpoints[running.address] = endpoint
        self.peers.append(running)
        return running

    async def _run(self, config: PeerConfig, endpoint: Endpoint, skew_ms: int | Callable[[], int] = 0,
                   task_status=trio.TASK_STATUS_IGNORED) -> None:
        skew = skew_ms if callable(skew_ms) else (lambda: skew_ms)
        physical_ms = trio_ms if not skew_ms else (lambda: trio_ms() + skew())
        authority = _Reached(self.authority, endpoint) if self.authority is not None else None
        started = _Started(task_status)
        try:
            await run_peer(config, endpoint, physical_ms=physical_ms, task_status=started, authority=authority)
        except ClockOffset as exc:   # a running peer whose clock went wrong stops, as a process would exit
            if not started.done:
                raise
            self.clock_stops.append(exc)

    async def cut(self, *peers: RunningPeer) -> None:
        """Cut these peers' processes off together (every peer they run: stand-ins, annexes): they
        reach each other and nothing else, the authority included, until `heal`."""
        await self.network.cut(*(a for peer in peers for a in self.endpoints[peer.address].bound))

    def heal(self, peer: RunningPeer) -> None:
        self.network.heal(*self.endpoints[peer.address].bound)

    @asynccontextmanager
    async def client(self, index: int = 0, source: str = "test") -> AsyncIterator[Client]:
        async with connect(self.peers[index].address, transport=self.network, source=source,
                           physical_ms=trio_ms) as client:
            yield client


@asynccontextmanager
async def open_overlay(peers: int, algorithm: str = "osma", *, space: CoordinateSpace | None = None,
                       seed: int = 0, authority: LocalAuthority | None = None, data_root: Any = None,
                       **knobs: Any) -> AsyncIterator[Overlay]:
    """`peers` peers joined one after the other on a MemoryNetwork; `knobs` set PeerConfig fields;
    `authority`: the ownership authority they all reach (through the network: a peer cut off
    does not reach it); `data_root`: a directory for the peers' data directories (`peer-<i>`:
    on-disk stores, and stand-ins that come back with their host), else in memory."""
    network = MemoryNetwork()
    # No rebalancer unless a test asks for one: a move changes zones and ids under a test's
    # feet (and a seeded schedule's), and the tests of moves set it themselves.
    knobs.setdefault("rebalance_every", 0.0)
    config = PeerConfig(listen="peer:0", algorithm=algorithm, space=space or CoordinateSpace(), retry_window=2.0,
                        offload_store=False, **knobs)
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        overlay = Overlay(nursery, network, config, seed, authority)
        for i in range(peers):
            await overlay.add_peer(data_dir=None if data_root is None else Path(data_root) / f"peer-{i}")
        try:
            yield overlay
        except BaseException as exc:  # re-raised below, not wrapped in the nursery's group
            failure = exc
        nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure


class _Started:
    """A task status that remembers whether the peer started (then its failures are its own)."""

    def __init__(self, status: Any) -> None:
        self._status, self.done = status, False

    def started(self, value: Any = None) -> None:
        self.done = True
        self._status.started(value)


class _Reached:
    """The authority as one peer reaches it: unreachable while that peer is cut off."""

    def __init__(self, authority: Authority, endpoint: Endpoint) -> None:
        self._authority, self._endpoint = authority, endpoint

    def _refuse_if_cut(self) -> None:
        if self._endpoint.cut_off:
            raise AuthorityUnreachable("the ownership authority did not answer: this peer is cut off")

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._authority, name)

        async def reached(*args: Any, **kwargs: Any) -> Any:
            await trio.lowlevel.checkpoint()
            self._refuse_if_cut()
            return await call(*args, **kwargs)

        return reached

    async def watch(self, prefix: str, start: int, changed: Callable[..., None], *, quiet: float) -> None:
        """A watch's stream breaks at its next change once this peer is cut off (as a TCP stream
        would); a quiet one is noticed when it is opened again."""
        def through(batch: Any) -> None:
            self._refuse_if_cut()
            changed(batch)

        await trio.lowlevel.checkpoint()
        self._refuse_if_cut()
        await self._authority.watch(prefix, start, through, quiet=quiet)
