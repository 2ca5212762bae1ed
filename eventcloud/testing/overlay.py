"""An in-process overlay for tests: real peers (runtime, store, protocol) over memory streams.

Peers run under the test's trio clock (use `MockClock(autojump_threshold=0)`, e.g. the
`autojump_clock` fixture), so timeouts and retries are deterministic and instant. Store calls
run inline (no worker threads), which keeps virtual time honest.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, AsyncIterator

import trio

from eventcloud.client import Client, connect
from eventcloud.overlay import CoordinateSpace
from eventcloud.testing.memory import MemoryNetwork
from peers.config import PeerConfig
from peers.runtime import RunningPeer, run_peer

__all__ = ["Overlay", "open_overlay", "trio_ms"]


def trio_ms() -> int:
    """The trio clock in milliseconds: the physical clock of peers and clients under test."""
    return int(trio.current_time() * 1000)


class Overlay:
    def __init__(self, nursery: trio.Nursery, network: MemoryNetwork, config: PeerConfig, seed: int) -> None:
        self.nursery = nursery
        self.network = network
        self.config = config
        self.peers: list[RunningPeer] = []
        self.seed = seed

    async def add_peer(self, data_dir: Any = None, *, skew_ms: int = 0, **knobs: Any) -> RunningPeer:
        """Start one more peer (joining the first); `knobs` override PeerConfig fields; `skew_ms`
        sets its wall clock that far ahead (or behind) of the others."""
        join = self.peers[0].address if self.peers else None
        config = replace(self.config, join=join, data_dir=data_dir, seed=self.seed * 1000 + len(self.peers), **knobs)
        running: RunningPeer = await self.nursery.start(self._run, config, skew_ms)
        self.peers.append(running)
        return running

    async def _run(self, config: PeerConfig, skew_ms: int = 0, task_status=trio.TASK_STATUS_IGNORED) -> None:
        physical_ms = trio_ms if not skew_ms else (lambda: trio_ms() + skew_ms)
        await run_peer(config, self.network, physical_ms=physical_ms, task_status=task_status)

    @asynccontextmanager
    async def client(self, index: int = 0, source: str = "test") -> AsyncIterator[Client]:
        async with connect(self.peers[index].address, transport=self.network, source=source,
                           physical_ms=trio_ms) as client:
            yield client


@asynccontextmanager
async def open_overlay(peers: int, algorithm: str = "osma", *, space: CoordinateSpace | None = None,
                       seed: int = 0, **knobs: Any) -> AsyncIterator[Overlay]:
    """`peers` peers joined one after the other on a MemoryNetwork; `knobs` set PeerConfig fields."""
    network = MemoryNetwork()
    config = PeerConfig(listen="peer:0", algorithm=algorithm, space=space or CoordinateSpace(), retry_window=2.0,
                        offload_store=False, **knobs)
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        overlay = Overlay(nursery, network, config, seed)
        for _ in range(peers):
            await overlay.add_peer()
        try:
            yield overlay
        except BaseException as exc:  # re-raised below, not wrapped in the nursery's group
            failure = exc
        nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
