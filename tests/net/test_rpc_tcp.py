"""The RPC layer over real TCP on loopback, where frames are written to the socket right away
when nothing else is queued (the memory-stream tests never take that path): order, frames
larger than the socket buffer (a partial write finished by the writer task), concurrent
callers, pushes, and a closed socket."""

from __future__ import annotations

import os
import time
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, AsyncIterator

import pytest
import trio

from eventcloud.errors import ConnectionLost
from eventcloud.net import rpc
from eventcloud.net.rpc import RpcConnection
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.ops import Op


def _clock() -> HybridClock:
    return HybridClock(lambda: int(time.time() * 1000))


@asynccontextmanager
async def tcp_pair(server: dict[str, Any], client: dict[str, Any] | None = None
                   ) -> AsyncIterator[tuple[RpcConnection, list[RpcConnection]]]:
    """A client RpcConnection to a server on 127.0.0.1 (port 0); the server's connections."""
    served: list[RpcConnection] = []

    async def handle(stream: trio.SocketStream) -> None:
        conn = RpcConnection(stream, _clock(), name="server", **server)
        served.append(conn)
        await conn.run()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        conn = RpcConnection(stream, _clock(), name="client", **(client or {}))
        nursery.start_soon(conn.run)
        try:
            yield conn, served
        finally:
            nursery.cancel_scope.cancel()


async def echo(conn: RpcConnection, op: Op, body: dict) -> dict:
    return body


async def test_concurrent_calls_small_and_larger_than_the_socket_buffer_all_get_their_own_reply(monkeypatch):
    blob = "x" * (3 * 1024 * 1024)  # far over a loopback socket's send buffer: written in parts
    writes: list[tuple[int, int]] = []
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        sent = real_write(fd, data)
        writes.append((len(data), sent))
        return sent

    monkeypatch.setattr(rpc.os, "write", write)
    with trio.fail_after(60):
        async with tcp_pair({"on_request": echo}) as (client, _):
            answers: dict[int, dict] = {}

            async def caller(i: int) -> None:
                for j in range(20):
                    body = {"i": i, "j": j, "blob": blob} if (i + j) % 15 == 0 else {"i": i, "j": j}
                    answers[(i, j)] = await client.call(Op.PING, body)

            async with trio.open_nursery() as nursery:
                for i in range(8):
                    nursery.start_soon(caller, i)
            assert len(answers) == 160
            for (i, j), reply in answers.items():
                assert reply["i"] == i and reply["j"] == j
                assert reply.get("blob") == (blob if (i + j) % 15 == 0 else None)
            big = sum(1 for i in range(8) for j in range(20) if (i + j) % 15 == 0)
            assert big == 9 and client.counters["bytes_out"] > big * len(blob)
    assert any(sent == size for size, sent in writes), "small frames were written right away"
    assert any(sent < size for size, sent in writes), "a large one only in part: the writer sent the rest"


async def test_pushes_arrive_in_the_order_sent_whichever_path_wrote_them():
    got: list[int] = []
    done = trio.Event()

    def on_push(conn: RpcConnection, op: Op, body: dict) -> None:
        got.append(body["n"])
        if body["n"] == 999:
            done.set()

    blob = "y" * (1024 * 1024)
    with trio.fail_after(60):
        async with tcp_pair({"on_push": on_push}) as (client, _):
            for n in range(1000):  # a large one now and then leaves the rest queued behind it
                await client.push(Op.NOTIFICATION, {"n": n, **({"blob": blob} if n % 97 == 0 else {})})
            await done.wait()
    assert got == list(range(1000))


async def test_a_call_on_a_closed_connection_is_connection_lost_and_writes_nothing():
    with trio.fail_after(30):
        async with tcp_pair({"on_request": echo}) as (client, served):
            assert await client.call(Op.PING, {"a": 1}) == {"a": 1}
            await client.aclose()  # the socket is closed: nothing may be written to its old descriptor
            with pytest.raises(ConnectionLost):
                await client.call(Op.PING, {"a": 2})
            await served[0].wait_closed()
            assert served[0].close_reason == "closed by the other side"
