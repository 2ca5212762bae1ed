"""EventCloud against the simplest alternative a user would pick (issue 48).

    python -m experiments.peers_bench [--subscriptions 10,100,1000,10000] [--events 2000]
        [--peers 4] [--publishers 8] [--baseline-seconds 120] [--baseline COMMIT]

The alternative is SEPA's design: one store that takes each update, then evaluates every
subscription against what the update added and pushes the matches. Here it runs in-process on
pyoxigraph with an on-disk store (`SepaDesign`: the store extended with the event's graph, then
each subscription's SPARQL evaluated with that graph as the default graph), with `--publishers`
threads publishing at once. EventCloud runs as `eventcloud cluster --peers 4` does, at the
defaults (R = 2, fsync, the local authority), one subscriber client holding every
subscription, `--publishers` publisher clients each publishing one event per call
(`--shared-client`: tasks of one client, whose concurrent publishes the SDK merges).

The work is the same on both sides: events of 5 quads, each a reading of one of 50 sensors, and
S subscriptions "an observation by sensor i with a value above t". A run ends when every
expected notification has arrived; both sides' notifications are checked against the expected
set (missing, duplicated, unexpected). The baseline's cost grows with S, so at large S it
publishes for at most `--baseline-seconds` and its rate is taken over the events it published.
`--baseline COMMIT` also runs EventCloud at that commit's code in the same run. Printed: a
markdown table of events/s, the ratio, notifications, and the peers' CPU per event.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import trio

from eventcloud.client import connect
from eventcloud.rdf.model import IRI, RDF, XSD, CompoundEvent, Literal, Quad
from eventcloud.rdf.oxigraph import quad_to_ox
from experiments.benchkit import table
from experiments.clusterkit import baseline_tree, cpu_seconds
from peers.supervisor import LocalCluster

EX = "http://example.org/peers-bench/"
SSN = "http://purl.oclc.org/NET/ssnx/ssn#"
SENSORS = 50


def sensor_of(j: int) -> int:
    return j % SENSORS


def value_of(j: int) -> int:
    return (j * 37 + j // SENSORS) % 100


def event(j: int) -> CompoundEvent:
    """Event j: one observation (5 quads) by sensor j mod 50."""
    graph, obs = IRI(f"{EX}event/{j}"), IRI(f"{EX}obs/{j}")
    return CompoundEvent(graph, (
        Quad(graph, obs, IRI(f"{RDF}type"), IRI(f"{SSN}Observation")),
        Quad(graph, obs, IRI(f"{SSN}observedBy"), IRI(f"{EX}sensor/{sensor_of(j)}")),
        Quad(graph, obs, IRI(f"{EX}value"), Literal(str(value_of(j)), f"{XSD}integer")),
        Quad(graph, obs, IRI(f"{EX}time"), Literal(str(1_700_000_000 + j), f"{XSD}integer")),
        Quad(graph, obs, IRI(f"{EX}unit"), Literal("Cel")),
    ))


def threshold_of(i: int) -> int:
    return (i * 13) % 100


def body(i: int) -> str:
    """Subscription i's pattern and FILTER: sensor i mod 50, a value above its threshold."""
    return (f"?obs <{SSN}observedBy> <{EX}sensor/{i % SENSORS}> . ?obs <{EX}value> ?v . "
            f"FILTER(?v > {threshold_of(i)})")


def subscription(i: int) -> str:
    return f"SELECT ?obs ?v WHERE {{ GRAPH ?g {{ {body(i)} }} }}"


def expected(subscriptions: int, events: range) -> set[tuple[int, int]]:
    return {(i, j) for i in range(subscriptions) for j in events
            if sensor_of(j) == i % SENSORS and value_of(j) > threshold_of(i)}


@dataclass
class Outcome:
    events: int
    seconds: float
    received: Counter[tuple[int, int]] = field(default_factory=Counter)
    cpu_ms_per_event: float = float("nan")
    messages_per_event: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("nan")

    def check(self, subscriptions: int) -> tuple[int, int, int, int]:
        """(expected, missing, duplicated, unexpected) notifications."""
        want = expected(subscriptions, range(self.events))
        got = set(self.received)
        return (len(want), len(want - got), sum(n - 1 for n in self.received.values() if n > 1), len(got - want))


class SepaDesign:
    """SEPA's way of matching, on pyoxigraph in-process: store each update (an on-disk store),
    then evaluate every subscription against the update's graph and notify its solutions."""

    def __init__(self, path: Path, subscriptions: int) -> None:
        self.store = ox.Store(str(path))
        self.queries = [f"SELECT ?obs ?v WHERE {{ {body(i)} }}" for i in range(subscriptions)]
        self.received: Counter[tuple[int, int]] = Counter()
        self._lock = threading.Lock()

    def publish(self, j: int) -> None:
        ev = event(j)
        graph = ox.NamedNode(ev.graph.value)
        self.store.extend([quad_to_ox(q) for q in ev.quads])
        for i, query in enumerate(self.queries):
            solutions = self.store.query(query, default_graph=graph)
            if any(True for _ in solutions):   # type: ignore[union-attr]
                with self._lock:
                    self.received[(i, j)] += 1


def run_baseline(subscriptions: int, events: int, publishers: int, seconds: float) -> Outcome:
    """The SEPA design with `publishers` threads publishing at once, for at most `seconds`."""
    folder = Path(tempfile.mkdtemp(prefix="peers-bench-sepa-"))
    try:
        sepa = SepaDesign(folder / "store", subscriptions)
        deadline = time.perf_counter() + seconds
        done = [0] * publishers

        def publisher(p: int) -> None:
            for j in range(p, events, publishers):
                if time.perf_counter() > deadline:
                    return
                sepa.publish(j)
                done[p] += 1

        started = time.perf_counter()
        with ThreadPoolExecutor(publishers) as pool:
            list(pool.map(publisher, range(publishers)))
        elapsed = time.perf_counter() - started
        # the events published are the first n of each publisher's stride: count the prefix all
        # publishers covered, so the expected set is that of events 0..n-1
        covered = min(done) * publishers
        received = Counter({k: v for k, v in sepa.received.items() if k[1] < covered})
        return Outcome(covered, elapsed * covered / max(1, sum(done)), received)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def run_eventcloud(subscriptions: int, events: int, args: argparse.Namespace, code: Path | None) -> Outcome:
    cluster = LocalCluster(args.peers, authority="local", seed=args.seed, cwd=code)
    await trio.to_thread.run_sync(cluster.start)
    want = expected(subscriptions, range(events))
    outcome = Outcome(events, float("nan"))
    try:
        async with trio.open_nursery() as nursery:
            done = trio.Event()
            async with connect(cluster.entry, source="bench-sub") as subscriber:
                subs = []
                queries = [subscription(i) for i in range(subscriptions)]
                for start in range(0, subscriptions, 1000):
                    subs += await subscriber.subscribe_many(queries[start:start + 1000])
                index = {sub.id: i for i, sub in enumerate(subs)}

                async def listen(sub: Any) -> None:
                    i = index[sub.id]
                    async for note in sub:
                        outcome.received[(i, int(note.event.rsplit("/", 1)[1]))] += 1
                        if len(outcome.received) >= len(want):
                            done.set()

                for sub in subs:
                    nursery.start_soon(listen, sub)
                sent_before = _messages(await subscriber.status())
                cpu_before = sum(cpu_seconds(p.pid) for p in cluster.processes)
                started = time.perf_counter()

                async def publisher(p: int, client: Any = None) -> None:
                    if client is None:
                        async with connect(cluster.addresses[p % args.peers], source=f"bench-pub-{p}") as own:
                            await publisher(p, own)
                        return
                    for j in range(p, events, args.publishers):
                        await client.publish(event(j))

                async with connect(cluster.entry, source="bench-pub") as shared:
                    async with trio.open_nursery() as publishing:
                        for p in range(args.publishers):
                            publishing.start_soon(publisher, p, shared if args.shared_client else None)
                if want:
                    with trio.move_on_after(args.timeout):
                        await done.wait()
                outcome.seconds = time.perf_counter() - started
                cpu = sum(cpu_seconds(p.pid) for p in cluster.processes) - cpu_before
                outcome.cpu_ms_per_event = 1000 * cpu / events
                sent = _messages(await subscriber.status()) - sent_before
                outcome.messages_per_event = {op: n / events for op, n in sent.most_common() if n}
                await trio.sleep(args.settle)   # late duplicates, if any
                nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    return outcome


def _messages(status: Any) -> Counter[str]:
    """Messages the peers sent so far, by operation (their `out:` counters)."""
    sent: Counter[str] = Counter()
    for peer in status.peers:
        sent.update({k[4:]: v for k, v in peer.counters.items() if k.startswith("out:")})
    return sent


HEADER = ["subscriptions", "SEPA design ev/s (events)", "EventCloud ev/s", "ratio", "peers' CPU ms/event", "messages/event",
          "notifications expected", "SEPA missing / dup / unexpected", "EventCloud missing / dup / unexpected"]


async def main_async(args: argparse.Namespace) -> int:
    counts = [int(s) for s in args.subscriptions.split(",")]
    rows, failures = [], 0
    for count in counts:
        base = await trio.to_thread.run_sync(run_baseline, count, args.events, args.publishers, args.baseline_seconds)
        codes = [("this", None)]
        with baseline_tree(args.baseline) if args.baseline else _nothing() as tree:
            if tree is not None:
                codes.insert(0, (args.baseline[:8], tree))
            for label, code in codes:
                ours = await run_eventcloud(count, args.events, args, code)
                want, *ours_bad = ours.check(count)
                _, *base_bad = base.check(count)
                failures += sum(ours_bad) + sum(base_bad)
                rows.append([f"{count:,}" + ("" if label == "this" else f" ({label})"),
                             f"{base.rate:,.1f} ({base.events:,})", f"{ours.rate:,.1f}", f"{ours.rate / base.rate:.2f}×",
                             f"{ours.cpu_ms_per_event:.2f}", f"{sum(ours.messages_per_event.values()):.1f}", f"{want:,}", " / ".join(map(str, base_bad)),
                             " / ".join(map(str, ours_bad))])
                top = ", ".join(f"{op} {n:.2f}" for op, n in list(ours.messages_per_event.items())[:6])
                print(f"S={count} {label}: SEPA {base.rate:.1f} ev/s, EventCloud {ours.rate:.1f} ev/s; peer messages "
                      f"per event: {top}", file=sys.stderr, flush=True)
    print(f"{args.events} events of 5 quads, {SENSORS} sensors, {args.publishers} publishers"
          f"{' (tasks of one client)' if args.shared_client else ''}; EventCloud: "
          f"{args.peers} local peers at the defaults (R = 2, fsync, local authority)")
    print(table(HEADER, rows))
    return 1 if failures else 0


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.peers_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", default="10,100,1000,10000", help="S values, comma-separated")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--peers", type=int, default=4)
    parser.add_argument("--publishers", type=int, default=8)
    parser.add_argument("--baseline-seconds", type=float, default=120.0,
                        help="longest the SEPA design publishes at one S (its rate is over the events it published)")
    parser.add_argument("--baseline", help="also run EventCloud at this commit's code, in the same run")
    parser.add_argument("--shared-client", action="store_true",
                        help="the publishers are tasks of one client (the SDK merges their concurrent publishes "
                             "into shared requests) instead of a client each")
    parser.add_argument("--seed", type=int, default=1, help="seed of the peers' join points")
    parser.add_argument("--timeout", type=float, default=600.0, help="longest wait for the notifications")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to wait for late duplicates")
    raise SystemExit(trio.run(main_async, parser.parse_args(argv)))


if __name__ == "__main__":
    main()
