"""Grid-style scenarios reproducing the paper's Fig. 2, on local processes or a host list.

    python -m experiments run fig2a [--runs R --discard D] [--out DIR] [--hosts FILE]

Each scenario sweeps what its panel sweeps, scaled to one 2-core machine by default
(`--scale paper` gives the paper's sizes, for a cluster):

| panel | x axis | fixed | paper | local default |
|---|---|---|---|---|
| fig2a | peers | 1 chain subscription (k=5), CEs of 5 quads | 1–25 peers, 3,000 CEs | 1, 2, 4, 8 peers; 1,000 CEs |
| fig2b | publications | 1 chain subscription, peers | 3,000–30,000 CEs, 25 peers | 500–2,000 CEs, 8 peers |
| fig2c | subscriptions | CEs matching them evenly | 1–60 subs, 3,000 CEs, 25 peers | 1, 10, 30, 60 subs; 1,200 CEs; 8 peers |
| fig2d | peers | the accept-all subscription | 1–25 peers, 3,000 CEs | 1, 2, 4, 8 peers; 500 CEs |
| fig2e | publications | no subscription, CEs of 25 quads | 3,000–30,000 CEs, 25 peers | 250–1,000 CEs, 8 peers |

Every run starts a fresh overlay per algorithm, subscribes, publishes, waits for the
expected notifications (or a timeout) and writes JSON-lines logs (`experiments/logs.py`)
that `experiments/spark/aggregate.py` turns into tables and plots.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import trio

from eventcloud.client import connect
from eventcloud.wire.hlc import unpack
from experiments import logs
from experiments.clusterkit import publish_while_listening
from experiments.hosts import SshCluster, read_hosts
from experiments.workloads import Workload, generate
from peers.supervisor import LocalCluster


@dataclass(frozen=True)
class Point:
    """One x value of a scenario: what to run there."""

    x: int
    peers: int
    events: int
    subscriptions: int
    quads: int = 5
    accept_all: bool = False


SCENARIOS: dict[str, dict[str, Callable[[], list[Point]]]] = {
    "fig2a": {"local": lambda: [Point(p, p, 1000, 1) for p in (1, 2, 4, 8)],
              "paper": lambda: [Point(p, p, 3000, 1) for p in (1, 5, 10, 15, 20, 25)]},
    "fig2b": {"local": lambda: [Point(n, 8, n, 1) for n in (500, 1000, 2000)],
              "paper": lambda: [Point(n, 25, n, 1) for n in (3000, 9000, 15000, 21000, 30000)]},
    "fig2c": {"local": lambda: [Point(s, 8, 1200, s) for s in (1, 10, 30, 60)],
              "paper": lambda: [Point(s, 25, 3000, s) for s in (1, 10, 20, 30, 40, 50, 60)]},
    "fig2d": {"local": lambda: [Point(p, p, 500, 0, accept_all=True) for p in (1, 2, 4, 8)],
              "paper": lambda: [Point(p, p, 3000, 0, accept_all=True) for p in (1, 5, 10, 15, 20, 25)]},
    "fig2e": {"local": lambda: [Point(n, 8, n, 0, quads=25) for n in (250, 500, 1000)],
              "paper": lambda: [Point(n, 25, n, 0, quads=25) for n in (3000, 9000, 15000, 21000, 30000)]},
}


def workload_for(point: Point, seed: int) -> Workload:
    k = 5 if point.subscriptions else 1
    return generate(events=point.events, subscriptions=point.subscriptions, k=k,
                    quads_per_event=point.quads, seed=seed, accept_all=point.accept_all)


async def run_point(scenario: str, point: Point, run: int, algorithm: str, out: Path, *,
                    hosts: list[str] | None, concurrency: int, timeout: float, seed: int,
                    progress: Callable[[str], None]) -> dict[str, Any]:
    """One run of one algorithm at one x: start an overlay, measure, log, stop it."""
    key = logs.RunKey(scenario, point.x, run, algorithm)
    workload = workload_for(point, seed + run)
    cluster = SshCluster(hosts[: point.peers], algorithm=algorithm) if hosts else \
        LocalCluster(point.peers, algorithm=algorithm, seed=seed)
    await trio.to_thread.run_sync(cluster.start)
    received: list[tuple[str, str, float, float | None]] = []
    published: list[tuple[str, float]] = []
    try:
        async with connect(cluster.entry, source="experiment-subscriber") as subscriber:
            names = {}
            subs = []
            for name, text in zip(workload.names, workload.subscriptions):
                sub = await subscriber.subscribe(text, kind="signal")
                names[sub.id] = name
                subs.append(sub)
            expected = workload.expected_notifications
            done = trio.Event()

            async def listen(sub) -> None:
                async for note in sub:
                    # the publication's hybrid-clock time: its physical part is the entry
                    # peer's wall clock (ms) when it stamped the publication
                    received.append((names[note.subscription], note.event, time.time(),
                                     unpack(note.published)[0] / 1000 if note.published else None))
                    if len(received) >= expected:
                        done.set()

            async def publish(slot: int) -> None:
                address = cluster.addresses[slot % len(cluster.addresses)]
                async with connect(address, source=f"experiment-publisher-{slot}") as client:
                    for index in range(slot, len(workload.events), concurrency):
                        event = workload.events[index]
                        await client.publish(event)
                        published.append((event.graph.value, time.time()))
                        if len(published) % 250 == 0:
                            progress(f"{scenario} x={point.x} run={run} {algorithm}: "
                                     f"{len(published)}/{len(workload.events)} published, {len(received)} notified")

            started = time.time()
            with trio.move_on_after(timeout):
                async with trio.open_nursery() as nursery:
                    await publish_while_listening(nursery, subs, listen, publish, concurrency)
                    if expected == 0:
                        done.set()
                    await done.wait()
                    nursery.cancel_scope.cancel()
            finished = time.time()
            status = (await subscriber.status()).to_wire()
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    with logs.open_log(out, key, f"{algorithm}-run") as log:
        log.write_all([logs.publication(key, g, t) for g, t in published])
        log.write_all([logs.notification(key, s, g, t, p) for s, g, t, p in received])
        log.write_all([logs.peer(key, p["id"], {**p["counters"], "quads": p["quads"]}) for p in status["peers"]])
        log.write(logs.run(key, peers=point.peers, subscriptions=len(workload.subscriptions),
                           events=len(workload.events), started=started, finished=finished,
                           expected_notifications=workload.expected_notifications))
    return {"notified": len(received), "expected": workload.expected_notifications,
            "seconds": finished - started}


def run_scenario(scenario: str, *, runs: int, out: Path, hosts_file: Path | None, algorithms: list[str],
                 scale: str, concurrency: int, timeout: float, seed: int, only: list[int] | None = None) -> int:
    if scenario not in SCENARIOS:
        raise SystemExit(f"unknown scenario {scenario!r}: choose one of {', '.join(SCENARIOS)}")
    points = SCENARIOS[scenario][scale]()
    if only:
        points = [p for p in points if p.x in only]
    hosts = read_hosts(hosts_file) if hosts_file else None
    if hosts and max(p.peers for p in points) > len(hosts):
        raise SystemExit(f"{scenario} needs {max(p.peers for p in points)} hosts, {hosts_file} lists {len(hosts)}")

    def progress(message: str) -> None:
        print(f"\r  {message}", end="", file=sys.stderr, flush=True)

    total = len(points) * runs * len(algorithms)
    step = 0
    for point in points:
        for run in range(runs):
            for algorithm in algorithms:
                step += 1
                print(f"[{step}/{total}] {scenario} x={point.x} ({point.peers} peers, {point.events} CEs, "
                      f"{point.subscriptions or ('accept-all' if point.accept_all else 'no')} subscription(s)) "
                      f"run {run} {algorithm}", file=sys.stderr, flush=True)
                result = trio.run(lambda: run_point(scenario, point, run, algorithm, out, hosts=hosts,
                                                    concurrency=concurrency, timeout=timeout, seed=seed,
                                                    progress=progress))
                print(f"\r  done: {result['notified']}/{result['expected']} notifications in "
                      f"{result['seconds']:.1f} s" + " " * 30, file=sys.stderr, flush=True)
    print(f"logs in {out / scenario}; aggregate with: python -m experiments.spark.aggregate {out} --out "
          f"{out / 'results'} --discard D", file=sys.stderr)
    return 0
