"""Pub/sub benchmark (docs/pubsub.md): OSMA vs CSMA subscriber throughput on local peers.

    python -m experiments.pubsub_bench [--peers 8] [--events 3000] [--k 5] [--subscriptions 1]

Starts a local cluster of real peer processes per algorithm, registers the chain
subscription(s) of the paper's workload (k patterns), publishes the compound events (5
quads each) with a few publishers in flight, and reports the paper's subscriber throughput
(matching publications / time between the first and the last notification), the publish
rate, messages and bytes per event and duplicates on the wire (from the peers' counters),
side by side for both algorithms with their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import trio

from eventcloud.client import connect
from experiments.workloads import generate
from experiments.clusterkit import cpu_seconds
from peers.cluster import LocalCluster


async def run_once(algorithm: str, peers: int, workload, concurrency: int, timeout: float,
                   batch: int = 1, extra: list[str] = (), seed: int | None = 1, replicas: int = 2,
                   fsync: bool = True) -> dict[str, Any]:
    cluster = LocalCluster(peers, algorithm=algorithm, seed=seed, replicas=replicas, fsync=fsync)
    await trio.to_thread.run_sync(cluster.start)
    try:
        async with connect(cluster.entry, source="bench-sub") as subscriber:
            subs = [await subscriber.subscribe(text, kind="signal") for text in workload.subscriptions]
            if extra:
                async def register(texts: list[str]) -> None:
                    for text in texts:
                        await subscriber.subscribe(text, kind="signal")
                async with trio.open_nursery() as nursery:
                    for slot in range(8):
                        nursery.start_soon(register, extra[slot::8])
                print(f"  {algorithm}: {len(extra)} non-matching subscriptions registered", file=sys.stderr)
            expected = workload.expected_notifications
            times: list[float] = []
            before = (await subscriber.status()).to_wire()
            cpu_before = sum(cpu_seconds(p.pid) for p in cluster.processes)
            started = time.perf_counter()
            published = 0

            async def listen(sub) -> None:
                async for _ in sub:
                    times.append(time.perf_counter())
                    if len(times) >= expected:
                        break

            async def publish(slot: int) -> None:
                nonlocal published
                address = cluster.addresses[(slot % (peers - 1)) + 1] if peers > 1 else cluster.entry
                async with connect(address, source=f"bench-pub-{slot}") as client:
                    mine = workload.events[slot::concurrency]
                    for start in range(0, len(mine), batch):
                        chunk = mine[start:start + batch]
                        if batch == 1:
                            await client.publish(chunk[0])
                        else:
                            await client.publish_batch(chunk)
                        published += len(chunk)
                        if published % 500 < len(chunk):
                            print(f"\r  {algorithm}: {published}/{len(workload.events)} published, "
                                  f"{len(times)} notified", end="", file=sys.stderr, flush=True)

            with trio.move_on_after(timeout):
                async with trio.open_nursery() as nursery:
                    for sub in subs:
                        nursery.start_soon(listen, sub)
                    async with trio.open_nursery() as publishers:
                        for slot in range(concurrency):
                            publishers.start_soon(publish, slot)
                    publish_seconds = time.perf_counter() - started
            print(file=sys.stderr)
            cpu = sum(cpu_seconds(p.pid) for p in cluster.processes) - cpu_before
            after = (await subscriber.status()).to_wire()
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    counters = _counter_delta(before, after)
    span = (times[-1] - times[0]) if len(times) > 1 else float("nan")
    return {
        "algorithm": algorithm,
        "notified": len(times),
        "expected": expected,
        "throughput": len(times) / span if span == span and span > 0 else float("nan"),
        "publish_rate": len(workload.events) / publish_seconds,
        "end_to_end": (times[-1] - started) if times else float("nan"),
        "messages_per_event": sum(v for k, v in counters.items() if k.startswith("out:")) / len(workload.events),
        "bytes_per_event": counters.get("bytes_out", 0) / len(workload.events),
        "cpu_ms": cpu * 1000 / len(workload.events),
        "duplicates": counters.get("duplicates_filtered", 0),
        "rewrites": counters.get("csma_rewrites", 0),
        "by_op": {k[4:]: v / len(workload.events) for k, v in counters.items() if k.startswith("out:") and v},
        "routed": {k[4:]: v / len(workload.events) for k, v in counters.items() if k.startswith("run:") and v},
    }


def _counter_delta(before: dict, after: dict) -> dict[str, int]:
    total: dict[str, int] = {}
    for status, sign in ((after, 1), (before, -1)):
        for peer in status["peers"]:
            for key, value in peer["counters"].items():
                total[key] = total.get(key, 0) + sign * value
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=8)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--subscriptions", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=8, help="publishers (requests in flight)")
    parser.add_argument("--batch", type=int, default=1, help="events per publish request [1: one by one, as the paper]")
    parser.add_argument("--algorithms", default="osma,csma")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--repeat", type=int, default=3, help="runs per algorithm; the median is reported [3]")
    parser.add_argument("--seed", type=int, default=1, help="seed of the peers' join points (same topology) [1]")
    parser.add_argument("--replicas", type=int, default=2, choices=(1, 2), help="copies of every zone [2]")
    parser.add_argument("--no-fsync", action="store_true", help="peers acknowledge writes without fsync")
    parser.add_argument("--registered", type=int, default=0,
                        help="also register this many non-matching chain subscriptions (issue 4's end-to-end effect)")
    args = parser.parse_args(argv)
    workload = generate(events=args.events, subscriptions=args.subscriptions, k=args.k, seed=0)
    extra = generate(events=0, subscriptions=args.registered, k=args.k, seed=99).subscriptions if args.registered else []
    rows = []
    for algorithm in args.algorithms.split(","):  # the median run of --repeat, same topology each time
        runs = sorted((trio.run(run_once, algorithm, args.peers, workload, args.concurrency, args.timeout,
                                args.batch, extra, args.seed, args.replicas, not args.no_fsync)
                       for _ in range(args.repeat)),
                      key=lambda r: r["throughput"])
        rows.append(runs[len(runs) // 2])
    print(f"\nR = {args.replicas}, fsync {'off' if args.no_fsync else 'on'}; "
          f"{args.peers} local peer processes, {args.events} CEs of 5 quads, {args.subscriptions} "
          f"chain subscription(s) k={args.k} (+{len(extra)} non-matching), median of {args.repeat} runs, {args.concurrency} publishers, {args.batch} event(s) per request\n")
    print("| algorithm | notified/expected | subscriber throughput (CE/s) | publish rate (CE/s) | end-to-end (s) "
          "| peers' CPU/event (ms) | messages/event | bytes/event | duplicates filtered | CSMA rewrites |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['algorithm']} | {r['notified']}/{r['expected']} | {r['throughput']:,.0f} | "
              f"{r['publish_rate']:,.0f} | {r['end_to_end']:.1f} | {r['cpu_ms']:.2f} | {r['messages_per_event']:.1f} | "
              f"{r['bytes_per_event']:,.0f} | {r['duplicates']} | {r['rewrites']} |")
    for r in rows:
        ops = sorted(r["by_op"].items(), key=lambda kv: -kv[1])
        print(f"\n{r['algorithm']} messages per event by operation: " + ", ".join(f"{k} {v:.2f}" for k, v in ops))
        runs = sorted(r["routed"].items(), key=lambda kv: -kv[1])
        print(f"{r['algorithm']} routed operations run per event (on all peers): "
              + ", ".join(f"{k} {v:.2f}" for k, v in runs))
    by = {r["algorithm"]: r for r in rows}
    if "osma" in by and "csma" in by:
        print(f"\nOSMA / CSMA subscriber throughput: {by['osma']['throughput'] / by['csma']['throughput']:.2f}× "
              f"(paper: 5.43× median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
