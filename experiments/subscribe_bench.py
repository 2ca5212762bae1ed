"""Subscribe benchmark (issue: scale): how fast a local overlay registers subscriptions, and
what each stored subscription costs a peer.

    python -m experiments.subscribe_bench [--peers 8] [--subscriptions 4000] [--clients 16]
        [--mix chains|filters|both] [--batch N] [--baseline COMMIT]

Starts a local cluster of real peer processes (R = 2, fsync on), then `--clients` clients
(each its own connection, spread over the entry peers) register `--subscriptions` distinct
subscriptions between them, each waiting for its subscribe to return (stored on every peer of
its indexing box) before sending the next; with `--batch N` each client registers N at a time
with `Client.subscribe_many` (one request, one multicast for the lot). Prints subscribes per second, the latency of one
subscribe (p50/p99), messages and the peers' CPU time per subscribe, and the peers' resident
memory per stored copy (growth of the peers' RSS over the copies they store, i.e. with the
index entries and the store's own memory).

Subscriptions: `chains` are the paper's k = 5 chains (distinct predicates each); `filters` are
sensor-style subscriptions with a PREFIX, a literal and a numeric FILTER threshold that differ
per subscription; `both` alternates them.

`--baseline COMMIT` runs that commit's peers (a temporary worktree) with the same
subscriptions first, in the same run, and prints both rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from eventcloud.client import connect
from experiments.benchkit import percentile, table as markdown_table
from experiments.clusterkit import baseline_tree, cpu_seconds, rss_mb
from experiments.workloads import generate
from peers.supervisor import LocalCluster


def subscriptions(n: int, mix: str) -> list[str]:
    chains = generate(events=0, subscriptions=n, k=5, seed=99).subscriptions if mix != "filters" else []
    filters = [f"PREFIX city: <http://city.example/ns#> SELECT ?g ?obs ?v WHERE {{ GRAPH ?g {{ "
               f"?obs city:observedBy <http://city.example/sensor/{i}> ; city:value ?v ; "
               f"city:unit \"km/h\" FILTER(?v > {i % 120}) }} }}" for i in range(n)] if mix != "chains" else []
    if mix == "both":
        return [chains[i] if i % 2 else filters[i] for i in range(n)]
    return chains or filters


async def run_once(texts: list[str], args: argparse.Namespace, code: Path | None) -> dict[str, Any]:
    cluster = LocalCluster(args.peers, algorithm=args.algorithm, seed=args.seed, replicas=args.replicas,
                           fsync=not args.no_fsync, cwd=code)
    await trio.to_thread.run_sync(cluster.start)
    latencies: list[float] = []
    try:
        async with connect(cluster.entry, source="subscribe-bench") as probe:
            before = (await probe.status()).to_wire()
            rss_before = [rss_mb(p.pid) for p in cluster.processes]
            cpu_before = sum(cpu_seconds(p.pid) for p in cluster.processes)
            connections = []
            async with trio.open_nursery() as nursery:
                async def client(slot: int) -> None:
                    async with connect(cluster.addresses[slot % args.peers], source=f"sub-{slot}") as c:
                        connections.append(c)
                        mine = texts[slot::args.clients]
                        for start in range(0, len(mine), args.batch):
                            started = time.perf_counter()
                            if args.batch == 1:
                                await c.subscribe(mine[start], kind="signal")
                            else:
                                await c.subscribe_many(mine[start:start + args.batch], kind="signal")
                            latencies.extend([time.perf_counter() - started] * len(mine[start:start + args.batch]))
                        await done.wait()  # keep the subscriptions (a closed connection ends them)

                done = trio.Event()
                began = time.perf_counter()
                async with trio.open_nursery() as clients:
                    for slot in range(args.clients):
                        clients.start_soon(client, slot)
                    while len(latencies) < len(texts):
                        await trio.sleep(0.05)
                    elapsed = time.perf_counter() - began
                    after = (await probe.status()).to_wire()
                    rss_after = [rss_mb(p.pid) for p in cluster.processes]
                    cpu = sum(cpu_seconds(p.pid) for p in cluster.processes) - cpu_before
                    done.set()
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    copies = sum(p["subscriptions"] for p in after["peers"]) - sum(p["subscriptions"] for p in before["peers"])
    messages = sum(v for peer in after["peers"] for k, v in peer["counters"].items() if k.startswith("out:")) - \
        sum(v for peer in before["peers"] for k, v in peer["counters"].items() if k.startswith("out:"))
    grown = sum(rss_after) - sum(rss_before)
    return {
        "subscriptions": len(texts), "rate": len(texts) / elapsed,
        "p50": percentile(latencies, 0.5) * 1000, "p99": percentile(latencies, 0.99) * 1000,
        "copies": copies, "messages": messages / len(texts), "cpu_ms": cpu * 1000 / len(texts),
        "kb_per_copy": grown * 1024 / copies if copies else float("nan"),
    }


HEADER = ["code", "subscriptions", "subscribes/s", "latency p50 / p99 (ms)", "stored copies",
          "messages / subscribe", "peers' CPU / subscribe (ms)", "peer RSS per stored copy (KB)"]


def table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    return markdown_table(HEADER, [
        (code, f"{r['subscriptions']:,}", f"{r['rate']:,.0f}", f"{r['p50']:.1f} / {r['p99']:.1f}",
         f"{r['copies']:,}", f"{r['messages']:.1f}", f"{r['cpu_ms']:.1f}", f"{r['kb_per_copy']:.2f}") for code, r in rows])


def memory_per_subscription(texts: list[str]) -> dict[str, float]:
    """Bytes a peer holds per stored subscription, in this process (tracemalloc): the records
    as they arrive (`store_sub` with the parsed form), kept by the real registry and its index,
    and the index's entries apart (measured again in a second index, and taken off)."""
    import msgpack

    from eventcloud.sparql.subscription import parse_subscription
    from eventcloud.wire.messages import SubscriptionRecord
    from eventcloud.wire.parsed import subscription_to_wire
    from experiments.benchkit import memory_of
    from peers.store import PeerState
    from peers.store import AsyncStore
    from peers.store import PeerStore
    from peers.matching import Subscriptions

    frames = [msgpack.packb(SubscriptionRecord(f"{i:032x}", text, "signal", "127.0.0.1:7000", 10 ** 15 + i,
                                               parsed=subscription_to_wire(parse_subscription(text))).to_wire())
              for i, text in enumerate(texts)]
    registry = Subscriptions(PeerState(), AsyncStore(PeerStore(None), False), Counter(), tombstone_ttl=60)
    held, records = memory_of(lambda: [registry._put(SubscriptionRecord.from_wire(msgpack.unpackb(f)))
                                       for f in frames])
    # the index's entries apart: a second index of the same stored subscriptions (the registry
    # needs its own to share the parts of identical ones)
    index = type(registry.index)()
    indexed, _ = memory_of(lambda: [index.add(s.id, s.sub) for s in records])
    held -= indexed
    return {"registry": held / len(texts), "index": indexed / len(texts),
            "text": sum(len(t.encode()) for t in texts) / len(texts)}


async def main_async(args: argparse.Namespace) -> None:
    texts = subscriptions(args.subscriptions, args.mix)
    memory = memory_per_subscription(texts)
    print(f"in one process: {memory['registry']:,.0f} B per stored subscription (record, text of "
          f"{memory['text']:,.0f} B, parsed form, registry), {memory['index']:,.0f} B of index entries")
    rows: list[tuple[str, dict[str, Any]]] = []
    if args.baseline:
        with baseline_tree(args.baseline) as code:
            rows.append((args.baseline[:8], await run_once(texts, args, code)))
            print(table(rows[-1:]), file=sys.stderr)
    rows.append(("this", await run_once(texts, args, None)))
    print(f"{args.peers} peers ({args.algorithm}, R = {args.replicas}, fsync {'off' if args.no_fsync else 'on'}), "
          f"{args.clients} clients, {args.mix} subscriptions, each distinct, "
          f"{'one per request' if args.batch == 1 else f'{args.batch} per request'}")
    print(table(rows))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=8)
    parser.add_argument("--subscriptions", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--mix", choices=("chains", "filters", "both"), default="both")
    parser.add_argument("--batch", type=int, default=1, help="subscriptions per request (subscribe_many when > 1)")
    parser.add_argument("--algorithm", default="osma")
    parser.add_argument("--replicas", type=int, default=2, choices=(1, 2))
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--baseline", help="also run the peers of this commit, first, in the same run")
    trio.run(main_async, parser.parse_args(argv))


if __name__ == "__main__":
    main()
