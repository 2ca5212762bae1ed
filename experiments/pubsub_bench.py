"""Pub/sub benchmark (docs/pubsub.md): OSMA vs CSMA subscriber throughput on local peers.

    python -m experiments.pubsub_bench [--peers 8] [--events 3000] [--k 5] [--subscriptions 1]

Starts a local cluster of real peer processes per algorithm, registers the chain
subscription(s) of the paper's workload (k patterns), publishes the compound events (5
quads each) with a few publishers in flight, and reports the paper's subscriber throughput
(matching publications / time between the first and the last notification), the publish
rate, messages and bytes per event and duplicates on the wire (from the peers' counters),
side by side for both algorithms with their ratio.

`--baseline COMMIT` compares this code with that commit's (checked out in a temporary
worktree) in one run: each tree runs its own copy of this benchmark, one run at a time, in
pairs whose order alternates (on this 2-core machine the cluster started first in a pair
is 8-20% faster), `--repeat` pairs per algorithm; options the baseline's benchmark does not
know (e.g. `--replicas` before replication existed) are left out of its runs, and said.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from eventcloud.client import connect
from experiments.workloads import generate
from experiments.clusterkit import baseline_tree, cpu_seconds, publish_while_listening
from peers.supervisor import LocalCluster


async def run_once(algorithm: str, peers: int, workload, concurrency: int, timeout: float,
                   batch: int = 1, extra: list[str] = (), seed: int | None = 1, replicas: int = 2,
                   fsync: bool = True, authority: str | None = None) -> dict[str, Any]:
    cluster = LocalCluster(peers, algorithm=algorithm, seed=seed, replicas=replicas, fsync=fsync, authority=authority)
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
                    await publish_while_listening(nursery, subs, listen, publish, concurrency)
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
    parser.add_argument("--authority", help="the peers' ownership authority: local, or etcd://… [none]")
    parser.add_argument("--baseline", help="compare with this commit's code, pairs of runs in alternating order")
    args = parser.parse_args(argv)
    if args.baseline:
        return compare(args, argv if argv is not None else sys.argv[1:])
    workload = generate(events=args.events, subscriptions=args.subscriptions, k=args.k, seed=0)
    extra = generate(events=0, subscriptions=args.registered, k=args.k, seed=99).subscriptions if args.registered else []
    rows = []
    for algorithm in args.algorithms.split(","):  # the median run of --repeat, same topology each time
        runs = sorted((trio.run(run_once, algorithm, args.peers, workload, args.concurrency, args.timeout,
                                args.batch, extra, args.seed, args.replicas, not args.no_fsync, args.authority)
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


def _own_options(argv: list[str], known: str) -> tuple[list[str], list[str]]:
    """`argv` without --baseline, --repeat and --algorithms, split into the options a tree's
    benchmark knows (by its --help text `known`) and those it does not."""
    kept, dropped, i = [], [], 0
    while i < len(argv):
        option = argv[i].split("=", 1)[0]
        takes_value = "=" not in argv[i] and i + 1 < len(argv) and not argv[i + 1].startswith("--")
        item = argv[i:i + 2] if takes_value else argv[i:i + 1]
        i += len(item)
        if option in ("--baseline", "--repeat", "--algorithms"):
            continue
        (kept if re.search(rf"{re.escape(option)}\b", known) else dropped).extend(item)
    return kept, dropped


def _one_run(tree: Path | None, algorithm: str, options: list[str]) -> dict[str, float]:
    """One run of the benchmark of `tree` (None: this code): its result row, by column."""
    done = subprocess.run([sys.executable, "-m", "experiments.pubsub_bench", "--repeat", "1", "--algorithms", algorithm,
                           *options], cwd=tree or Path(__file__).resolve().parent.parent, capture_output=True, text=True,
                          timeout=3600)
    lines = done.stdout.splitlines()
    header = next((line for line in lines if line.startswith("| algorithm |")), None)
    row = next((line for line in lines if line.startswith(f"| {algorithm} |")), None)
    if done.returncode or header is None or row is None:
        raise SystemExit(f"the benchmark of {tree or 'this code'} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    names = [c.strip() for c in header.strip("|").split("|")]
    cells = [c.strip().replace(",", "") for c in row.strip("|").split("|")]
    values = {}
    for name, cell in zip(names, cells):
        try:
            values[name] = float(cell)
        except ValueError:
            pass
    return values


def compare(args: argparse.Namespace, argv: list[str]) -> int:
    here = subprocess.run([sys.executable, "-m", "experiments.pubsub_bench", "--help"],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True).stdout
    options, _ = _own_options(argv, here)
    columns = ("subscriber throughput (CE/s)", "peers' CPU/event (ms)", "messages/event")
    with baseline_tree(args.baseline) as tree:
        known = subprocess.run([sys.executable, "-m", "experiments.pubsub_bench", "--help"], cwd=tree,
                               capture_output=True, text=True).stdout
        base_options, dropped = _own_options(argv, known)
        if dropped:
            print(f"{args.baseline[:8]}'s benchmark does not know {' '.join(dropped)}: its runs go without", file=sys.stderr)
        table = []
        for algorithm in args.algorithms.split(","):
            runs: dict[str, list[tuple[dict[str, float], bool]]] = {"base": [], "this": []}
            for pair in range(args.repeat):
                order = [("base", tree, base_options), ("this", None, options)]
                for position, (code, where, opts) in enumerate(order if pair % 2 == 0 else order[::-1]):
                    result = _one_run(where, algorithm, opts)
                    runs[code].append((result, position == 0))
                    print(f"  {algorithm} pair {pair + 1}: {args.baseline[:8] if code == 'base' else 'this'} "
                          f"{result.get(columns[0], float('nan')):,.0f} CE/s", file=sys.stderr)
            medians = {code: {c: statistics.median(r[c] for r, _ in got if c in r) if any(c in r for r, _ in got)
                              else float("nan") for c in columns} for code, got in runs.items()}
            for code, got in runs.items():
                table.append((algorithm, args.baseline[:8] if code == "base" else "this",
                              ", ".join(f"{r.get(columns[0], float('nan')):,.0f}{'*' if first else ''}" for r, first in got),
                              *(medians[code][c] for c in columns)))
            ratio = medians["this"][columns[0]] / medians["base"][columns[0]]
            table.append((algorithm, "this / baseline", "", ratio, float("nan"), float("nan")))
    print(f"\n{args.repeat} pair(s) per algorithm, alternating which code runs first (* in the runs); options: "
          f"{' '.join(options) or '(defaults)'}\n")
    print("| algorithm | code | subscriber throughput per run (CE/s) | median (CE/s or ratio) | peers' CPU/event (ms) | messages/event |")
    print("|---|---|---|---:|---:|---:|")
    for algorithm, code, per_run, median, cpu, messages in table:
        shown = f"{median:.2f}×" if code == "this / baseline" else f"{median:,.0f}"
        print(f"| {algorithm} | {code} | {per_run} | {shown} | {'' if cpu != cpu else f'{cpu:.2f}'} | "
              f"{'' if messages != messages else f'{messages:.1f}'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
