"""Rebalancer benchmark (issue: scale): peers started before the data, then moving to it.

    python -m experiments.rebalance_bench [--peers 8] [--events 3000] [--every 5] [--seconds 120]

Starts a local cluster of real peer processes (R = 2, fsync on) with `--rebalance-every`,
all joined before any data exists (midpoint zones), publishes CityBench readings (the
sensor streams, 50 per request), then watches the overlay every few seconds: the busiest
peer against the mean, the empty peers, how many peers have moved so far (new peer ids on
the same addresses), and whether every acknowledged quad is still there (the peers' counts
and a COUNT query). At the end it checks a sample of events whole with `find`. The same
run without `--every` shows the overlay the rebalancer starts from. `--repeat N` runs it N
times on new clusters (moves are timing-dependent: one run proves little), and
`--dump-on-failure` makes every peer log its task tree at the first refused publication or
status (how the leavers waiting on each other were found).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time

import trio

from eventcloud.cli.demo import citybench_dir
from eventcloud.client import ClientError, connect
from eventcloud.rdf.citybench import sample_events, synthetic_events
from experiments.benchkit import table as markdown_table
from peers.supervisor import LocalCluster

COUNT = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }"


def dump_tasks(cluster: LocalCluster, why: str) -> None:
    """Each peer logs its task tree (SIGUSR1, peers/runtime/task_dump.py): what a stuck move waits for."""
    print(f"  {why}: asking every peer for a task dump (SIGUSR1, in the peers' log)", file=sys.stderr)
    for proc in cluster.processes:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGUSR1)


async def run(args: argparse.Namespace) -> int:
    directory = citybench_dir()
    events = sample_events(directory, args.events) if directory is not None else synthetic_events(args.events)
    total = sum(len(e.quads) for e in events)
    # explicit either way (0 too: the peers rebalance by default): the run measures what it says
    extra = ["--rebalance-every", str(args.every), "--rebalance-ratio", str(args.ratio),
             "--rebalance-min-quads", str(args.min_quads),
             "--rebalance-make-room" if args.make_room else "--no-rebalance-make-room"]
    cluster = LocalCluster(args.peers, mapping=args.mapping, seed=1, extra=extra)
    await trio.to_thread.run_sync(cluster.start)
    rows = []
    failures = 0
    try:
        async with connect(cluster.addresses, source="rebalance-bench") as client:
            first_ids = {p.id for p in (await client.status()).peers}
            started = time.monotonic()
            retried = 0
            for at in range(0, len(events), 50):
                for attempt in range(5):  # as an application would: a refused batch is published again
                    try:
                        await client.publish_batch(events[at:at + 50])
                        break
                    except ClientError as exc:
                        if args.dump_on_failure and not retried:
                            dump_tasks(cluster, f"publication refused ({exc.message[:80]})")
                        if not exc.transient or attempt == 4:
                            raise
                        retried += 1
            print(f"published {len(events)} events ({total:,} quads) in {time.monotonic() - started:.1f} s "
                  f"({retried} batches published again)", file=sys.stderr)
            started = time.monotonic()
            while True:
                elapsed = time.monotonic() - started
                try:
                    status = await client.status()
                    counted = int((await client.query(COUNT))["results"]["bindings"][0]["n"]["value"])
                except ClientError as exc:  # a move under way: ask again at the next round
                    if args.dump_on_failure and not failures:
                        dump_tasks(cluster, f"status or COUNT refused ({exc.message[:80]})")
                    failures += 1
                    print(f"  t={elapsed:.0f} s: {exc.message}", file=sys.stderr)
                else:
                    loads = [p.quads for p in status.peers]
                    moved = len({p.id for p in status.peers} - first_ids)
                    rows.append((f"{elapsed:.0f}", f"{max(loads):,}", f"{statistics.mean(loads):,.0f}",
                                 f"{max(loads) / statistics.mean(loads):.1f}×", str(sum(1 for q in loads if q == 0)),
                                 str(moved), f"{sum(loads):,}", f"{counted:,}"))
                    print("  " + " | ".join(rows[-1]), file=sys.stderr)
                if elapsed >= args.seconds:
                    break
                await trio.sleep(args.interval)
            whole = 0
            for event in events[::max(1, len(events) // 50)]:
                whole += set(await client.find(event.graph, None, None, None)) == set(event.quads)
            checked = len(events[::max(1, len(events) // 50)])
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    print(f"\n{args.peers} peer processes (R = 2, fsync on, {args.mapping}), rebalance every "
          f"{args.every:g} s (ratio {args.ratio:g}, at least {args.min_quads:,} quads"
          f"{', making room' if args.make_room else ''}), {len(events):,} CityBench "
          f"readings ({total:,} quads) published after every peer joined\n")
    print(markdown_table(["s after publishing", "busiest peer (quads)", "mean", "busiest / mean", "empty peers",
                          "peers moved", "quads held", "COUNT query"], rows))
    print(f"\nevents found whole afterwards: {whole} of {checked}; status or COUNT refused during moves: {failures}; "
          f"publish batches refused and published again: {retried}")
    return 0 if whole == checked and rows and rows[-1][-1] == f"{total:,}" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=8)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--mapping", choices=("local-name", "identity"), default="identity")
    parser.add_argument("--every", type=float, default=5.0, help="--rebalance-every of the peers (0: off)")
    parser.add_argument("--ratio", type=float, default=4.0)
    parser.add_argument("--min-quads", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to watch after publishing")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between looks")
    parser.add_argument("--make-room", action="store_true",
                        help="--rebalance-make-room: empty peers that cannot leave have neighbours step aside")
    parser.add_argument("--repeat", type=int, default=1, help="runs, one after the other (each on a new cluster)")
    parser.add_argument("--dump-on-failure", action="store_true",
                        help="on the first refused publication or status, every peer logs its task tree")
    args = parser.parse_args(argv)
    codes = [trio.run(run, args) for _ in range(args.repeat)]
    if args.repeat > 1:
        print(f"\n{args.repeat} runs: {codes.count(0)} whole and counted exactly, {len(codes) - codes.count(0)} not")
    return max(codes)


if __name__ == "__main__":
    raise SystemExit(main())
