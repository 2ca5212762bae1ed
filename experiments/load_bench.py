"""Load benchmark (issue 12): many publishers and subscribers on local peer processes.

    python -m experiments.load_bench [--peers 8] [--publishers 20] [--events 200]
        [--subscribers 50] [--algorithms osma,csma] [--paced 0.5] [--paced-seconds 20]
        [--low-events 50] [--baseline COMMIT]

Starts a local cluster of real peer processes (R = 2, fsync on) per algorithm, connects
`--subscribers` subscribers (each its own connection, spread over the entry peers; half of
them subscribe to one pattern, half to a two-pattern join, so CSMA chains), then
`--publishers` publishers each publish `--events` events one per request, all at once. It
prints the publish rate, the notification rate, the lag of each notification behind the
acknowledgement of its event (p50/p95/p99/max) and behind the publish call (p50/p99), the
peak RSS of each peer, and the notifications not received (expected, not there when
`--timeout` ran out after the last publish) and duplicated. That is the *saturated* phase; on
the same overlay (issue 48.3) it then publishes for `--paced-seconds` at each `--paced`
fraction of the rate the saturated phase reached (an open loop: each event is due at its time
whatever the answers do, and its latency counts from then), and finally `--low-events` events
one at a time (each after the last one's notifications): latency at half the maximum
throughput and at low load, reported beside the throughput, one row per phase.

`--baseline COMMIT` runs the peers of that commit (checked out in a temporary worktree)
with the same workload in the same run, first, and prints both side by side.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from contextlib import AsyncExitStack
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


class Phase:
    """One phase of a run: the events it publishes (ids `first` .. `first + count - 1`), when each
    was sent (scheduled, for paced phases: a late start counts in its latency), acknowledged and
    notified, and the notifications it expects."""

    def __init__(self, name: str, first: int, count: int, subscribers: int) -> None:
        self.name, self.first, self.count = name, first, count
        self.expected = {(i, j) for i in range(subscribers) for j in range(first, first + count) if matches(i, j)}
        self.sent: dict[int, float] = {}
        self.acked: dict[int, float] = {}
        self.lags: list[float] = []        # from the acknowledgement to each notification
        self.latencies: list[float] = []   # from the publish call (its scheduled time) to each notification
        self.arrivals: list[float] = []
        self.received: Counter[tuple[int, int]] = Counter()
        self.done = trio.Event()
        self.started = self.published = 0.0
        self.offered: float | None = None  # the paced rate asked for (events/s)

    def holds(self, j: int) -> bool:
        return self.first <= j < self.first + self.count

    def notified(self, i: int, j: int, now: float) -> None:
        self.received[(i, j)] += 1
        self.arrivals.append(now)
        if j in self.acked:
            self.lags.append(now - self.acked[j])
        if j in self.sent:
            self.latencies.append(now - self.sent[j])
        if len(self.received) >= len(self.expected):
            self.done.set()

    def result(self, algorithm: str) -> dict[str, Any]:
        last = max(self.arrivals) if self.arrivals else self.published
        return {
            "algorithm": algorithm, "phase": self.name, "events": self.count, "expected": len(self.expected),
            "offered": self.offered,
            "publish_rate": self.count / max(1e-9, self.published - self.started),
            "notification_rate": len(self.arrivals) / max(1e-9, last - self.started),
            "last_after_publish": last - self.published,
            "lag": [percentile(self.lags, q) for q in (0.5, 0.95, 0.99)] + [max(self.lags, default=float("nan"))],
            "latency": [percentile(self.latencies, q) for q in (0.5, 0.99)],
            "lost": len(self.expected - set(self.received)),
            "duplicated": sum(n - 1 for n in self.received.values() if n > 1),
            "unexpected": len(set(self.received) - self.expected),
        }


async def publish_flat_out(phase: Phase, clients: list[Any]) -> None:
    """Every publisher publishes its share, one event per request, as fast as it is acknowledged."""
    async def publisher(p: int) -> None:
        for j in range(phase.first + p, phase.first + phase.count, len(clients)):
            phase.sent[j] = time.perf_counter()
            await clients[p].publish(event(j))
            phase.acked[j] = time.perf_counter()

    async with trio.open_nursery() as nursery:
        for p in range(len(clients)):
            nursery.start_soon(publisher, p)


async def publish_paced(phase: Phase, clients: list[Any], rate: float, in_flight: int = 512) -> None:
    """An open loop: event k is due at start + k / rate, whatever the acknowledgements do (a
    closed loop would hide a slow answer by sending less); each is its own request on the next
    publisher's connection. Its latency counts from when it was due."""
    limit = trio.CapacityLimiter(in_flight)

    async def one(j: int, due: float, client: Any) -> None:
        async with limit:
            phase.sent[j] = due
            await client.publish(event(j))
            phase.acked[j] = time.perf_counter()

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for k in range(phase.count):
            due = start + k / rate
            await trio.sleep(max(0.0, due - time.perf_counter()))
            nursery.start_soon(one, phase.first + k, due, clients[k % len(clients)])


async def publish_one_at_a_time(phase: Phase, client: Any, subscribers: int, wait: float = 10.0) -> None:
    """Low load: the next event once every notification of the last has arrived (or `wait` s)."""
    for j in range(phase.first, phase.first + phase.count):
        owed = sum(1 for i in range(subscribers) if matches(i, j))
        phase.sent[j] = time.perf_counter()
        await client.publish(event(j))
        phase.acked[j] = time.perf_counter()
        with trio.move_on_after(wait):
            while sum(1 for i in range(subscribers) if phase.received[(i, j)]) < owed:
                await trio.sleep(0.001)


async def run_once(algorithm: str, args: argparse.Namespace, code: Path | None) -> list[dict[str, Any]]:
    """One cluster: the saturated phase, then (as asked) the same overlay at a fraction of the
    rate it reached, then one event at a time; a result per phase."""
    cluster = LocalCluster(args.peers, algorithm=algorithm, seed=args.seed, replicas=args.replicas,
                           fsync=not args.no_fsync, cwd=code)
    await trio.to_thread.run_sync(cluster.start)
    total = args.publishers * args.events
    phases: list[Phase] = []
    try:
        async with trio.open_nursery() as nursery:
            ready = trio.Semaphore(0)

            async def subscriber(i: int) -> None:
                async with connect(cluster.addresses[i % args.peers], source=f"load-sub-{i}") as client:
                    sub = await client.subscribe(subscription(i)[0])
                    ready.release()
                    async for note in sub:
                        j = int(note.event.rsplit("/", 1)[1])
                        now = time.perf_counter()
                        for phase in phases:
                            if phase.holds(j):
                                phase.notified(i, j, now)

            for i in range(args.subscribers):
                nursery.start_soon(subscriber, i)
            for _ in range(args.subscribers):
                await ready.acquire()
            async with AsyncExitStack() as stack:
                clients = [await stack.enter_async_context(connect(
                    cluster.addresses[(p % (args.peers - 1)) + 1] if args.peers > 1 else cluster.entry,
                    source=f"load-pub-{p}")) for p in range(args.publishers)]

                async def run_phase(phase: Phase, publish: Any) -> None:
                    phases.append(phase)
                    phase.started = time.perf_counter()
                    await publish
                    phase.published = time.perf_counter()
                    with trio.move_on_after(args.timeout):
                        await phase.done.wait()
                    await trio.sleep(args.settle)  # late duplicates, if any

                saturated = Phase("saturated", 0, total, args.subscribers)
                await run_phase(saturated, publish_flat_out(saturated, clients))
                first = total
                for fraction in args.paced:
                    rate = fraction * saturated.count / max(1e-9, saturated.published - saturated.started)
                    paced = Phase(f"{fraction:g} of max", first, max(20, round(rate * args.paced_seconds)),
                                  args.subscribers)
                    paced.offered = rate
                    first += paced.count
                    await run_phase(paced, publish_paced(paced, clients, rate))
                if args.low_events:
                    low = Phase("one at a time", first, args.low_events, args.subscribers)
                    await run_phase(low, publish_one_at_a_time(low, clients[0], args.subscribers))
            nursery.cancel_scope.cancel()
        rss = [peak_rss_mb(proc.pid) for proc in cluster.processes]
        async with connect(cluster.entry, source="load-status") as client:
            status = (await client.status()).to_wire()
        ops: Counter[str] = Counter()
        for peer in status["peers"]:  # messages sent and routed operations run, by operation
            ops.update({k: v for k, v in peer["counters"].items() if k.startswith(("out:", "run:"))})
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    results = [phase.result(algorithm) for phase in phases]
    published = sum(phase.count for phase in phases)
    for r in results:
        r.update({"rss_max": max(rss), "rss_mean": sum(rss) / len(rss)})
    results[0]["ops"] = {k: v / published for k, v in ops.most_common() if v}
    return results


HEADER = ["code", "algorithm", "phase", "events", "offered ev/s", "publish ev/s", "notifications/s",
          "last after publish (s)", "lag p50 / p95 / p99 / max (s)", "from the publish call p50 / p99 (ms)",
          "peak RSS max / mean (MB)", "expected", "not received", "duplicated"]


def table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    return markdown_table(HEADER, [
        (code, r["algorithm"], r["phase"], f"{r['events']:,}",
         "-" if r["offered"] is None else f"{r['offered']:,.0f}", f"{r['publish_rate']:,.0f}",
         f"{r['notification_rate']:,.0f}", f"{r['last_after_publish']:.1f}", " / ".join(f"{x:.2f}" for x in r["lag"]),
         " / ".join(f"{x * 1000:.1f}" for x in r["latency"]),
         f"{r['rss_max']:.0f} / {r['rss_mean']:.0f}", f"{r['expected']:,}", f"{r['lost']:,}",
         f"{r['duplicated'] + r['unexpected']:,}") for code, r in rows])


async def main_async(args: argparse.Namespace) -> None:
    rows: list[tuple[str, dict[str, Any]]] = []
    algorithms = [a for a in args.algorithms.split(",") if a]
    if args.baseline:
        with baseline_tree(args.baseline) as code:
            for algorithm in algorithms:
                found = [(args.baseline[:8], r) for r in await run_once(algorithm, args, code)]
                rows += found
                print(table(found), file=sys.stderr)
    for algorithm in algorithms:
        found = [("this", r) for r in await run_once(algorithm, args, None)]
        rows += found
        print(table(found), file=sys.stderr)
    print(f"{args.peers} peers, {args.publishers} publishers x {args.events} events (one per request), "
          f"{args.subscribers} subscribers, R = {args.replicas}, fsync {'off' if args.no_fsync else 'on'}")
    print(table(rows))
    for code, r in rows:
        if "ops" in r:
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
    parser.add_argument("--paced", type=lambda v: [float(x) for x in v.split(",") if x], default=[0.5],
                        help="after the saturated phase, publish at these fractions of the rate it reached "
                             "(an open loop; '' for none)")
    parser.add_argument("--paced-seconds", type=float, default=20.0, help="how long each paced phase publishes")
    parser.add_argument("--low-events", type=int, default=50,
                        help="then this many events one at a time, each after the last one's notifications (0: none)")
    trio.run(main_async, parser.parse_args(argv))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
