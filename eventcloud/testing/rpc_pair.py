"""Two RPC endpoints joined by memory streams, like h11's ConnectionPair: test the RPC layer
(requests, replies, pushes, errors, limits) with no network and no peer."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import trio
import trio.testing

from eventcloud.net.rpc import RpcConnection
from eventcloud.wire.hlc import HybridClock

__all__ = ["RpcPair", "open_rpc_pair"]


class RpcPair:
    def __init__(self, client: RpcConnection, server: RpcConnection) -> None:
        self.client = client
        self.server = server


@asynccontextmanager
async def open_rpc_pair(*, client: dict[str, Any] | None = None, server: dict[str, Any] | None = None,
                        physical_ms=lambda: int(trio.current_time() * 1000)) -> AsyncIterator[RpcPair]:
    """A client and a server RpcConnection over a memory stream pair, both running.

    `client` and `server` are RpcConnection options (on_request, on_push, limits…)."""
    left, right = trio.testing.memory_stream_pair()
    a = RpcConnection(left, HybridClock(physical_ms), name="client", **(client or {}))
    b = RpcConnection(right, HybridClock(physical_ms), name="server", **(server or {}))
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.run)
        nursery.start_soon(b.run)
        try:
            yield RpcPair(a, b)
        except BaseException as exc:  # re-raised below, not wrapped in the nursery's group
            failure = exc
        nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
