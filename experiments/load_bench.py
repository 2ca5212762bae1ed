"""Load benchmark (issue 12): many publishers and subscribers on local peer processes.

    python -m experiments.load_bench [--peers 8] [--publishers 20] [--events 200]
        [--subscribers 50] [--algorithms osma,csma] [--baseline COMMIT]

Starts a local cluster of real peer processes (R = 2, fsync on) per algorithm, connects
`--subscribers` subscribers (each its own connection, spread over the entry peers; half of
them subscribe to one pattern, half to a two-pattern join, so CSMA chains), then
`--publishers` publishers each publish `--events` events one per request, all at once. It
prints the publish rate, the notification rate, the lag of each notification behind the
acknowledgement of its event (p50/p95/p99/max) and behind the publish call (p50/p99), the
peak RSS of each peer, and the notifications not received (expected, not there when
`--timeout` ran out after the last publish) and duplicated. `--publishers 1 --subscribers 1`
measures the notification latency at low load (one event at a time).

`--baseline COMMIT` runs the peers of that commit (checked out in a temporary worktree)
with the same workload in the same run, first, and prints both side by side.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from eventcloud.client import connect
from eventcloud.rdf.model import IRI, CompoundEvent, Literal, Quad
from experiments.benchkit import percentile, table as markdown_table
from experiments.clusterkit import baseline_tree, peak_rss_mb
from peers.supervisor import LocalCluster

EX = "http://example.org/load/"
PREDICATES = [IRI(f"{EX}p{k}") for k in range(4)]


def event(j: int) -> CompoundEvent:
    """Event j: three readings of one sensor, every predicate but p(j mod 4)."""
    graph, sensor = IRI(f"{EX}event/{j}"), IRI(f"{EX}sensor/{j % 97}")
    return CompoundEvent(graph, tuple(Quad(graph, sensor, p, Literal(str(j * 10 + k)))
                                      for k, p in enumerate(PREDICATES) if k != j % 4))


def subscription(i: int) -> tuple[str, frozenset[int]]:
    """Subscriber i's SPARQL and the predicates its events must all have."""
    a = i % 4
    if i % 2 == 0:
        return (f"SELECT ?s ?v WHERE {{ GRAPH ?g {{ ?s <{PREDICATES[a].value}> ?v }} }}", frozenset({a}))
    b = (a + 1) % 4
    return (f"SELECT ?s ?v ?w WHERE {{ GRAPH ?g {{ ?s <{PREDICATES[a].value}> ?v . "
            f"?s <{PREDICATES[b].value}> ?w }} }}", frozenset({a, b}))


def matches(i: int, j: int) -> bool:
    return j % 4 not in subscription(i)[1]


async def run_once(algorithm: str, args: argparse.Namespace, code: Path | None) -> dict[str, Any]:
    cluster = LocalCluster(args.peers, algorithm=algorithm, seed=args.seed, replicas=args.replicas,
                           fsync=not args.no_fsync, cwd=code)
    await trio.to_thread.run_sync(cluster.start)
    total = args.publishers * args.events
    expected = {(i, j) for i in range(args.subscribers) for j in range(total) if matches(i, j)}
    acked: dict[int, float] = {}
    received: Counter[tuple[int, int]] = Counter()
    lags: list[float] = []
    sent: dict[int, float] = {}
    latencies: list[float] = []   # from the publish call to each notification
    arrivals: list[float] = []
    try:
        async with trio.open_nursery() as nursery:
            ready = trio.Semaphore(0)
            done = trio.Event()

            async def subscriber(i: int) -> None:
                async with connect(cluster.addresses[i % args.peers], source=f"load-sub-{i}") as client:
                    sub = await client.subscribe(subscription(i)[0])
                    ready.release()
                    async for note in sub:
                        j = int(note.event.rsplit("/", 1)[1])
                        now = time.perf_counter()
                        received[(i, j)] += 1
                        arrivals.append(now)
                        if j in acked:
                            lags.append(now - acked[j])
                        if j in sent:
                            latencies.append(now - sent[j])
                        if len(received) >= len(expected):
                            done.set()

            for i in range(args.subscribers):
                nursery.start_soon(subscriber, i)
            for _ in range(args.subscribers):
                await ready.acquire()
            started = time.perf_counter()

            async def publisher(p: int) -> None:
                address = cluster.addresses[(p % (args.peers - 1)) + 1] if args.peers > 1 else cluster.entry
                async with connect(address, source=f"load-pub-{p}") as client:
                    for j in range(p, total, args.publishers):
                        built = event(j)
                        sent[j] = time.perf_counter()
                        await client.publish(built)
                        acked[j] = time.perf_counter()

            async with trio.open_nursery() as publishers:
                for p in range(args.publishers):
                    publishers.start_soon(publisher, p)
            published = time.perf_counter()
            with trio.move_on_after(args.timeout):
                await done.wait()
            await trio.sleep(args.settle)  # late duplicates, if any
            finished = time.perf_counter()
            nursery.cancel_scope.cancel()
        rss = [peak_rss_mb(proc.pid) for proc in cluster.processes]
        async with connect(cluster.entry, source="load-status") as client:
            status = (await client.status()).to_wire()
        ops: Counter[str] = Counter()
        for peer in status["peers"]:  # messages sent and routed operations run, by operation
            ops.update({k: v for k, v in peer["counters"].items() if k.startswith(("out:", "run:"))})
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    last = max(arrivals) if arrivals else finished
    return {
        "algorithm": algorithm, "events": total, "expected": len(expected),
        "publish_rate": total / (published - started),
        "notification_rate": len(arrivals) / max(1e-9, last - started),
        "last_after_publish": last - published,
        "lag": [percentile(lags, q) for q in (0.5, 0.95, 0.99)] + [max(lags, default=float("nan"))],
        "latency": [percentile(latencies, q) for q in (0.5, 0.99)],
        "rss_max": max(rss), "rss_mean": sum(rss) / len(rss),
        "lost": len(expected - set(received)),
        "duplicated": sum(n - 1 for n in received.values() if n > 1),
        "unexpected": len(set(received) - expected),
        "ops": {k: v / total for k, v in ops.most_common() if v},
    }


HEADER = ["code", "algorithm", "events", "publish ev/s", "notifications/s", "last after publish (s)",
          "lag p50 / p95 / p99 / max (s)", "from the publish call p50 / p99 (ms)", "peak RSS max / mean (MB)", "expected", "not received", "duplicated"]


def table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    return markdown_table(HEADER, [
        (code, r["algorithm"], f"{r['events']:,}", f"{r['publish_rate']:,.0f}", f"{r['notification_rate']:,.0f}",
         f"{r['last_after_publish']:.1f}", " / ".join(f"{x:.2f}" for x in r["lag"]),
         " / ".join(f"{x * 1000:.1f}" for x in r["latency"]),
         f"{r['rss_max']:.0f} / {r['rss_mean']:.0f}", f"{r['expected']:,}", f"{r['lost']:,}",
         f"{r['duplicated'] + r['unexpected']:,}") for code, r in rows])


async def main_async(args: argparse.Namespace) -> None:
    rows: list[tuple[str, dict[str, Any]]] = []
    algorithms = [a for a in args.algorithms.split(",") if a]
    if args.baseline:
        with baseline_tree(args.baseline) as code:
            for algorithm in algorithms:
                rows.append((args.baseline[:8], await run_once(algorithm, args, code)))
                print(table(rows[-1:]), file=sys.stderr)
    for algorithm in algorithms:
        rows.append(("this", await run_once(algorithm, args, None)))
        print(table(rows[-1:]), file=sys.stderr)
    print(f"{args.peers} peers, {args.publishers} publishers x {args.events} events (one per request), "
          f"{args.subscribers} subscribers, R = {args.replicas}, fsync {'off' if args.no_fsync else 'on'}")
    print(table(rows))
    for code, r in rows:
        print(f"{code} {r['algorithm']} per event: " + ", ".join(f"{k} {v:.2f}" for k, v in r["ops"].items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=8)
    parser.add_argument("--publishers", type=int, default=20)
    parser.add_argument("--events", type=int, default=200, help="events per publisher")
    parser.add_argument("--subscribers", type=int, default=50)
    parser.add_argument("--algorithms", default="osma,csma")
    parser.add_argument("--replicas", type=int, default=2, choices=(1, 2))
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600, help="longest wait for the notifications")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to wait for duplicates at the end")
    parser.add_argument("--baseline", help="also run the peers of this commit, first, in the same run")
    trio.run(main_async, parser.parse_args(argv))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
