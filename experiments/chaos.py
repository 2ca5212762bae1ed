"""Fault injection with real processes, and a history check of what survived.

    python -m experiments.chaos [--peers 8] [--events 2000] [--algorithms osma,csma] [--kills 4]
                                [--down 4] [--never-restart] [--lose-disk] [--replicas 2] [--seed 1]

Starts a local cluster of peer processes, a subscriber (two subscriptions: one pattern with a
FILTER, and a two-pattern join that makes CSMA chain) on peer 0 and a publisher on peer 1,
then publishes events whose quads spread over several peers while a chaos task kill -9s a
random other peer every few seconds and restarts it with the same command `--down` seconds
later (the last one is never restarted with --never-restart; with --lose-disk a restarted
peer comes back without its data directory). When publishing is over it waits for the
notifications to settle, reads back every stored event and prints, per algorithm:

    acknowledged   publications the SDK saw succeed (after its own retries)
    failed         publications that failed for good (each must be invisible)
    stored whole   acknowledged events read back with all their quads
    lost           acknowledged events missing, partly or wholly
    partial        events visible with some but not all of their quads (never allowed)
    notified       (subscription, event) pairs delivered; expected: the matching acknowledged ones
    status/count   the slowest whole-space `status` and COUNT meanwhile (probed every 0.5 s)
    missing        expected pairs never delivered
    duplicated     pairs delivered more than once
    unacknowledged notified pairs of events that were not acknowledged (a lost reply, or a failure)

The exit code is 1 when anything was lost, partial, missing or duplicated.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import trio

from eventcloud.client import ClientError, connect
from eventcloud.overlay import CoordinateSpace, disjoint, tiles
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, event_graph, make_quad
from peers.supervisor import LocalCluster

EX = "http://chaos.example/"
ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
FILTERED = f"SELECT ?s ?v WHERE {{ GRAPH ?g {{ ?s <{EX}value> ?v }} FILTER(?v > 50) }}"
JOINED = f"SELECT ?s ?k WHERE {{ GRAPH ?g {{ ?s <{EX}value> ?v . ?s <{EX}kind> ?k }} }}"


def events(n: int, seed: int) -> list[CompoundEvent]:
    """Events of 4 to 8 quads on subjects spread over the alphabet (so over several peers)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        g = event_graph("chaos", 1_700_000_000_000 + i, i)
        subject = IRI(f"{EX}{rng.choice(ALNUM)}{rng.choice(ALNUM)}sensor{i}")
        triples = [(subject, IRI(f"{EX}value"), Literal(str(rng.randint(0, 100)), XSD + "integer"))]
        if rng.random() < 0.5:
            triples.append((subject, IRI(f"{EX}kind"), IRI(f"{EX}{rng.choice(['Speed', 'Parking', 'Air'])}")))
        for j in range(rng.randint(2, 6)):
            other = IRI(f"{EX}{rng.choice(ALNUM)}{rng.choice(ALNUM)}thing{i}-{j}")
            triples.append((other, IRI(f"{EX}{rng.choice(ALNUM)}rel"), subject))
        out.append(CompoundEvent(g, tuple(make_quad(g, *t) for t in triples)))
    return out


def expected_pairs(evs: list[CompoundEvent]) -> dict[str, set[str]]:
    """Which events each subscription matches (computed from the generator's own rules)."""
    filtered, joined = set(), set()
    for event in evs:
        values = [int(q.o.lexical) for q in event.quads if q.p.value == f"{EX}value"]
        kinds = [q for q in event.quads if q.p.value == f"{EX}kind"]
        if any(v > 50 for v in values):
            filtered.add(event.graph.value)
        if values and kinds:
            joined.add(event.graph.value)
    return {"filtered": filtered, "joined": joined}


@dataclass
class Report:
    algorithm: str
    acknowledged: int = 0
    failed: int = 0
    stored_whole: int = 0
    lost: int = 0
    partial: int = 0
    failed_visible: int = 0
    notified: int = 0
    expected: int = 0
    missing: int = 0
    duplicated: int = 0
    unacknowledged: int = 0
    kills: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)   # the lost, partial and missing, named
    seconds: float = 0.0
    sdk_retries: int = 0
    status_max: float = 0.0     # slowest `status` while peers were being killed (seconds)
    count_max: float = 0.0      # slowest whole-space COUNT meanwhile
    probe_failures: int = 0
    peers_at_end: int = 0       # zones served at the end (more than --peers: annexes, stand-ins)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.partial or self.missing or self.duplicated or self.failed_visible)


async def run_once(algorithm: str, args: argparse.Namespace) -> Report:
    report = Report(algorithm)
    evs = events(args.events, args.seed)
    expected = expected_pairs(evs)
    rng = random.Random(args.seed)
    cluster = LocalCluster(args.peers, algorithm=algorithm, seed=args.seed, replicas=args.replicas,
                           authority=getattr(args, "authority", None),
                           log_level=args.log_level, extra=["--failure-timeout", str(args.failure_timeout),
                                                            "--neighbour-limit", str(args.neighbour_limit),
                                                            "--host-neighbour-cap", str(args.host_neighbour_cap),
                                                            "--annex-every", str(args.annex_every)])
    started = time.monotonic()
    await trio.to_thread.run_sync(cluster.start)
    try:
        async with connect(cluster.addresses[0], source="chaos-sub") as subscriber, \
                connect(cluster.addresses[1], source="chaos-pub", publish_retry=args.publish_retry) as publisher:
            subs = {"filtered": await subscriber.subscribe(FILTERED, kind="bindings"),
                    "joined": await subscriber.subscribe(JOINED, kind="signal")}
            seen: dict[str, Counter[str]] = {name: Counter() for name in subs}
            acked: dict[str, int] = {}
            failed: set[str] = set()
            publishing = trio.Event()

            async def listen(name: str) -> None:
                async for note in subs[name]:
                    seen[name][note.event] += 1

            async def publish(queue: trio.MemoryReceiveChannel) -> None:
                async for event in queue:
                    try:
                        await publisher.publish(event)
                        acked[event.graph.value] = len(event)
                    except ClientError as exc:
                        failed.add(event.graph.value)
                        print(f"  publication failed for good: {exc}", file=sys.stderr)

            async def chaos() -> None:
                victims = list(range(2, args.peers))
                for k in range(args.kills):
                    await trio.sleep(args.every)
                    if publishing.is_set():
                        return
                    index = rng.choice(victims)
                    await trio.to_thread.run_sync(cluster.stop_peer, index, signal.SIGKILL)
                    report.kills.append(f"peer {index} at {time.monotonic() - started:.1f} s")
                    print(f"  kill -9 peer {index} ({cluster.addresses[index]})", file=sys.stderr)
                    if args.never_restart and k == args.kills - 1:
                        victims.remove(index)
                        report.kills[-1] += " (never restarted)"
                        continue
                    await trio.sleep(args.down)
                    if args.lose_disk:
                        shutil.rmtree(cluster.data_dir / f"peer-{index}", ignore_errors=True)
                        report.kills[-1] += " (disk lost)"
                    command = cluster.commands[index]
                    if args.lose_disk:  # a new machine: it joins afresh
                        command = [c for c in command]
                    await trio.to_thread.run_sync(cluster.start_peer, index, command)
                    print(f"  restarted peer {index} at {cluster.addresses[index]}", file=sys.stderr)

            async def probe() -> None:
                """Whole-space reads during the chaos: how long do they take, do they answer at all?"""
                async with connect(cluster.addresses[0], source="chaos-probe") as prober:
                    while not publishing.is_set():
                        for kind in ("status", "count"):
                            begun = trio.current_time()
                            try:
                                with trio.fail_after(30):
                                    await (prober.status() if kind == "status" else prober.count())
                            except (ClientError, trio.TooSlowError):
                                report.probe_failures += 1
                            took = trio.current_time() - begun
                            setattr(report, f"{kind}_max", max(getattr(report, f"{kind}_max"), took))
                        await trio.sleep(0.5)

            async with trio.open_nursery() as nursery:
                for name in subs:
                    nursery.start_soon(listen, name)
                nursery.start_soon(probe)
                send, receive = trio.open_memory_channel[CompoundEvent](0)
                async with trio.open_nursery() as work:
                    work.start_soon(chaos)
                    for _ in range(args.concurrency):
                        work.start_soon(publish, receive.clone())
                    async with send:
                        for event in evs:
                            await send.send(event)
                            if args.rate:
                                await trio.sleep(1 / args.rate)
                    receive.close()
                publishing.set()
                want = {name: expected[name] & set(acked) for name in subs}
                total = sum(len(w) for w in want.values())

                def got() -> int:
                    return sum(len(set(seen[n]) & want[n]) for n in subs)

                await settle(got, lambda: got() == total, quiet=20, at_most=180)
                await trio.sleep(3)  # late duplicates, if any, arrive too
                nursery.cancel_scope.cancel()

            counts = await _stored_counts(publisher)
            report.peers_at_end = len((await publisher.status()).peers)
            report.acknowledged, report.failed = len(acked), len(failed)
            report.sdk_retries = publisher.retries
            for graph, size in acked.items():
                n = counts.get(graph, 0)
                if n == size:
                    report.stored_whole += 1
                else:
                    report.lost += 1
                    report.problems.append(f"lost {graph}: {n} of {size} quads stored")
            sizes = {e.graph.value: len(e) for e in evs}
            report.partial = sum(1 for g, n in counts.items() if n != sizes.get(g, n))
            report.problems += [f"partial {g}: {n} of {sizes[g]}" for g, n in counts.items() if n != sizes.get(g, n)]
            report.failed_visible = sum(1 for g in failed if counts.get(g, 0) and counts[g] != sizes[g])
            for name in subs:
                want = expected[name] & set(acked)
                report.expected += len(want)
                report.notified += sum(1 for g in seen[name] if g in want)
                report.missing += len(want - set(seen[name]))
                report.problems += [f"missing {name} {g}" for g in sorted(want - set(seen[name]))[:20]]
                report.duplicated += sum(1 for n in seen[name].values() if n > 1)
                report.unacknowledged += sum(1 for g in seen[name] if g not in acked)
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    report.seconds = time.monotonic() - started
    return report


async def _stored_counts(client: Any, within: float = 60.0) -> dict[str, int]:
    """Every event's stored quads. A query may meet a zone between a killed owner and its
    replica's takeover (`unreachable`, `unavailable`: transient): asked again, for `within`
    seconds at most; a zone still unserved by then fails the run, as it should."""
    deadline = trio.current_time() + within
    while True:
        try:
            result = await client.query("SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g")
            return {b["g"]["value"]: int(b["n"]["value"]) for b in result["results"]["bindings"]}
        except ClientError as exc:
            if not exc.transient or trio.current_time() > deadline:
                print(await tiling(client), file=sys.stderr)
                raise
            print(f"  counting again ({exc})", file=sys.stderr)
            await trio.sleep(1)


async def tiling(client: Any) -> str:
    """Why a whole-space read keeps missing zones, as `status` sees the overlay: whether the
    zones served tile the space (a gap, an overlap), and peers that no table names or that
    tables name at another address (what a multicast follows)."""
    try:
        status = await client.status()
    except ClientError as exc:
        return f"  (no status either: {exc})"
    peers = [p for p in status.peers if not p.down]
    space = CoordinateSpace().whole_space()
    zones = [p.zone.bounds for p in peers]
    lines = [f"  status: {len(status.peers)} peers, {len(status.peers) - len(peers)} down; their zones "
             f"{'tile' if tiles(space, zones) else 'do NOT tile'} the space "
             f"({'disjoint' if disjoint(space, zones) else 'OVERLAPPING'})"]
    named: dict[str, set[str]] = {}
    for p in peers:
        for ident, address in p.neighbours.items():
            named.setdefault(ident, set()).add(address)
    by_id = {p.id: p for p in status.peers}
    for p in status.peers:
        said = named.get(p.id, set())
        if p.down or not said or said != {p.address}:
            lines.append(f"  peer {p.id} at {p.address}{' DOWN' if p.down else ''}: named at {sorted(said) or 'nothing'}"
                         f", zone {p.zone.bounds[0][0] % 10**6}..., {p.quads} quads")
    for ident in sorted(set(named) - set(by_id)):
        lines.append(f"  tables name {ident} at {sorted(named[ident])}: status does not know it")
    return "\n".join(lines)


async def settle(progress: Callable[[], int], complete: Callable[[], bool], *, quiet: float, at_most: float) -> None:
    """Wait for the last notifications: until `complete()`, or `progress()` (what has arrived)
    has not moved for `quiet` seconds, or `at_most` seconds have passed."""
    last, since = -1, trio.current_time()
    with trio.move_on_after(at_most):
        while not complete():
            got = progress()
            if got != last:
                last, since = got, trio.current_time()
            elif trio.current_time() - since > quiet:
                return
            await trio.sleep(0.5)


def table(reports: list[Any], keys: list[str] | None = None) -> str:
    """One markdown row per report (an algorithm's): `keys` as columns, then the seconds it took."""
    keys = keys or ["acknowledged", "failed", "stored_whole", "lost", "partial", "failed_visible", "expected",
                    "notified", "missing", "duplicated", "unacknowledged", "sdk_retries", "status_max", "count_max",
                    "probe_failures", "peers_at_end"]
    lines = ["| algorithm | " + " | ".join(k.replace("_", " ") for k in keys) + " | seconds |",
             "|---" * (len(keys) + 2) + "|"]
    for r in reports:
        cells = [f"{v:.2f}" if isinstance(v, float) else str(v) for v in (getattr(r, k) for k in keys)]
        lines.append(f"| {r.algorithm} | " + " | ".join(cells) + f" | {r.seconds:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=8)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--algorithms", default="osma,csma")
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--every", type=float, default=6.0, help="seconds between kills [6]")
    parser.add_argument("--down", type=float, default=4.0, help="seconds a killed peer stays down [4]")
    parser.add_argument("--never-restart", action="store_true", help="the last killed peer stays down")
    parser.add_argument("--lose-disk", action="store_true", help="a killed peer comes back without its data")
    parser.add_argument("--replicas", type=int, default=2, choices=(1, 2))
    parser.add_argument("--failure-timeout", type=float, default=3.0)
    parser.add_argument("--neighbour-limit", type=int, default=48,
                        help="peers' --neighbour-limit: a low one (2, 3) makes annexes start under the faults [48]")
    parser.add_argument("--host-neighbour-cap", type=int, default=64)
    parser.add_argument("--annex-every", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=4, help="publications in flight [4]")
    parser.add_argument("--rate", type=float, default=0, help="events per second (0: as fast as it goes)")
    parser.add_argument("--publish-retry", type=float, default=60.0, help="seconds the SDK retries one publication")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--authority", help="the peers' ownership authority: local (served by this process) or "
                                            "etcd://…; default none (each peer decides alone)")
    parser.add_argument("--json", action="store_true", help="also print the reports as JSON lines")
    parser.add_argument("--log-level", default="error", help="of the peers (their messages go to stderr) [error]")
    args = parser.parse_args(argv)
    if args.peers < 4:
        parser.error("--peers must be at least 4 (two entry peers and victims)")
    reports = []
    for algorithm in args.algorithms.split(","):
        print(f"== {algorithm}: {args.peers} peers, {args.events} events, {args.kills} kills", file=sys.stderr)
        reports.append(trio.run(run_once, algorithm, args))
    return print_reports(reports, None, "kills", args.json)


def print_reports(reports: list[Any], keys: list[str] | None, done: str, as_json: bool) -> int:
    """The reports' table, what the chaos did to each run (its `done` field, a list of lines)
    and its problems, then with --json each report as a JSON line; the exit code: 1 unless
    every report is ok."""
    print(table(reports, keys))
    for r in reports:
        print(f"{r.algorithm} {done}: {'; '.join(getattr(r, done))}")
        for problem in r.problems[:40]:
            print(f"  {r.algorithm}: {problem}")
    if as_json:
        for r in reports:
            print(json.dumps(asdict(r)))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
