"""Per-message cost of the RPC layer: requests and replies between two local processes.

A server process answers `ping` requests over TCP with `RpcConnection`; this process opens
`--connections` connections and keeps `--concurrency` callers busy on them. It prints calls per
second and the CPU both processes spent per call (user + system), which is what a peer pays
per message whatever the message carries (docs/pubsub.md). Run it in another checkout
(`cd /tmp/base && python -m experiments.rpc_bench`) to compare commits side by side.

    python -m experiments.rpc_bench --calls 20000 --concurrency 8
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

import trio

from eventcloud.net.rpc import RpcConnection, open_connection
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.ops import Op

#: What a request carries: about a delivered event's size (five quads of short IRIs).
BODY = {"deliveries": [["http://example.org/g/1", [["http://example.org/s", "http://example.org/p",
                                                   f"value {i}"] for i in range(5)]]]}


def _cpu(pid: int | None = None, part: int = 3) -> float:
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return (usage.ru_utime if part & 1 else 0) + (usage.ru_stime if part & 2 else 0)
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return ((int(fields[11]) if part & 1 else 0) + (int(fields[12]) if part & 2 else 0)) / os.sysconf("SC_CLK_TCK")


async def _serve() -> None:
    async def handle(conn: RpcConnection, op: Op, body: dict) -> dict:
        return {"ok": True}

    async def one(stream: trio.SocketStream) -> None:
        # the timeouts a peer sets on the connections it serves
        await RpcConnection(stream, HybridClock(lambda: int(time.time() * 1000)), on_request=handle,
                            idle_timeout=300.0, frame_timeout=30.0).run()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    await trio.serve_listeners(one, listeners)


async def _client(port: int, calls: int, connections: int, concurrency: int, server: int) -> None:
    clock = HybridClock(lambda: int(time.time() * 1000))
    async with trio.open_nursery() as nursery:
        conns: list[RpcConnection] = []
        for _ in range(connections):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            conn = RpcConnection(stream, clock)
            nursery.start_soon(conn.run)
            conns.append(conn)
        for conn in conns:  # warm up
            await conn.call(Op.PING, BODY)
        left = [calls]

        async def caller(conn: RpcConnection) -> None:
            while left[0] > 0:
                left[0] -= 1
                await conn.call(Op.PING, BODY)

        sys_before = _cpu(part=2) + _cpu(server, part=2)
        cpu_client, cpu_server, started = _cpu(), _cpu(server), time.perf_counter()
        async with trio.open_nursery() as callers:
            for i in range(concurrency):
                callers.start_soon(caller, conns[i % connections])
        wall = time.perf_counter() - started
        client_us = (_cpu() - cpu_client) / calls * 1e6
        server_us = (_cpu(server) - cpu_server) / calls * 1e6
        system_us = (_cpu(part=2) + _cpu(server, part=2) - sys_before) / calls * 1e6
        print(f"{calls} calls, {concurrency} callers on {connections} connection(s): {calls / wall:,.0f} calls/s; "
              f"CPU per call: client {client_us:.0f} µs, server {server_us:.0f} µs, "
              f"together {client_us + server_us:.0f} µs, of which in the kernel {system_us:.0f} µs")
        nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        trio.run(_serve)
        return 0
    server = subprocess.Popen([sys.executable, "-m", "experiments.rpc_bench", "--serve"], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        for _ in range(args.repeat):
            trio.run(_client, port, args.calls, args.connections, args.concurrency, server.pid)
    finally:
        server.kill()
        server.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
