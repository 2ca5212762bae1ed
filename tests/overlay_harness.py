"""An in-process overlay for tests: real peers (runtime, store, protocol) over memory streams.

Peers run under the test's trio clock (use the `autojump_clock` fixture for a
MockClock(autojump_threshold=0)), so timeouts and retries are deterministic and instant.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

import trio

from eventcloud.client import Client, connect
from eventcloud.overlay.zones import CoordinateSpace
from eventcloud.net.transport import MemoryNetwork
from peers.runtime import PeerConfig, RunningPeer, run_peer


def trio_ms() -> int:
    return int(trio.current_time() * 1000)


class Overlay:
    def __init__(self, nursery: trio.Nursery, network: MemoryNetwork, algorithm: str, space: CoordinateSpace,
                 seed: int) -> None:
        self.nursery = nursery
        self.network = network
        self.algorithm = algorithm
        self.space = space
        self.peers: list[RunningPeer] = []
        self.seed = seed

    async def add_peer(self, data_dir=None) -> RunningPeer:
        join = self.peers[0].address if self.peers else None
        config = PeerConfig(listen="peer:0", join=join, data_dir=data_dir, algorithm=self.algorithm,
                            space=self.space, retry_window=2.0, seed=self.seed * 1000 + len(self.peers))
        running: RunningPeer = await self.nursery.start(self._run, config)
        self.peers.append(running)
        return running

    async def _run(self, config: PeerConfig, task_status=trio.TASK_STATUS_IGNORED) -> None:
        await run_peer(config, self.network, physical_ms=trio_ms, task_status=task_status)

    @asynccontextmanager
    async def client(self, index: int = 0, source: str = "test") -> AsyncIterator[Client]:
        async with connect(self.peers[index].address, transport=self.network, source=source,
                           physical_ms=trio_ms) as client:
            yield client


@asynccontextmanager
async def open_overlay(peers: int, algorithm: str = "osma", *, space: CoordinateSpace | None = None,
                       seed: int = 0) -> AsyncIterator[Overlay]:
    network = MemoryNetwork()
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        overlay = Overlay(nursery, network, algorithm, space or CoordinateSpace(), seed)
        for _ in range(peers):
            await overlay.add_peer()
        try:
            yield overlay
        except BaseException as exc:  # re-raised below, not wrapped in the nursery's group
            failure = exc
        nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
