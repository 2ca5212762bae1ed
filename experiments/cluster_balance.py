"""`eventcloud cluster` at its defaults, loaded with `eventcloud publish` (issue 44.8's check):
is the load balanced once the data is in, and are the counts exact?

    python -m experiments.cluster_balance [--peers 8] [--quads 620000] [--watch 240] [--every 20]
        [--data DIR] [-- CLUSTER OPTIONS…]

Runs the commands a user would: `eventcloud cluster --peers N --data-dir TMP` (its defaults: R = 2,
fsync, the local authority, the rebalancer), then `eventcloud publish --peer ENTRY` of the
CityBench streams' readings (~620,000 quads, as one N-Quads file), then, every `--every`
seconds for `--watch` seconds, the overlay's `status` (busiest / mean, empty peers, peers
serving under a new id: moved) and a timed COUNT(*) through the entry peer. Prints one row per look and exits 1 if publishing failed, or the last look
answered is not balanced (busiest > 3× the mean, or a peer empty) or its count is wrong.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from eventcloud.cli.demo import citybench_dir
from eventcloud.client import ClientError, connect
from eventcloud.rdf.files import write_nquads
from experiments.benchkit import stop_process, table
from experiments.query_bench import events as query_bench_events

COUNT = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }"


def readings(data: Path, limit_quads: int) -> list:
    """The readings of the streams in `data`, interleaved, up to `limit_quads` quads (the
    issue's ~620,000; all six streams hold 1.66 million): query_bench's selection."""
    return query_bench_events(limit_quads, data)


async def look(entry: str, first_ids: set[str], total: int, started: float) -> tuple:
    """One row: seconds since publishing ended, busiest / mean, empty peers, peers moved, the
    quads status counts, COUNT(*) and its seconds."""
    async with connect(entry, source="cluster-balance") as client:
        status = await client.status()
        loads = [p.quads for p in status.peers if not p.down]
        begun = time.perf_counter()
        count = await client.query(COUNT)
        took = time.perf_counter() - begun
    n = int(count["results"]["bindings"][0]["n"]["value"])
    moved = len({p.id for p in status.peers} - first_ids)   # peers serving under a new id (a move, a rejoin)
    spread = f"{max(loads) / statistics.mean(loads):.2f}" if loads and max(loads) > 0 else "-"
    return (f"{time.monotonic() - started:.0f}", spread,
            sum(1 for q in loads if q == 0), moved, f"{sum(loads):,}", f"{n:,}" + ("" if n == total else " (wrong)"),
            f"{took:.2f}")


async def run(args: argparse.Namespace, cluster_options: list[str]) -> int:
    streams = sorted(Path(args.data).glob("*.stream"))
    if not streams:
        print(f"no CityBench stream in {args.data} (set EVENTCLOUD_CITYBENCH)", file=sys.stderr)
        return 2
    events = readings(Path(args.data), args.quads)
    total = sum(len(event) for event in events)
    print(f"{len(events):,} readings of {len(streams)} CityBench streams, {total:,} quads", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="eventcloud-balance-") as tmp:
        source = Path(tmp) / "readings.nq"   # what the user publishes: one N-Quads file, a graph per reading
        with open(source, "w") as out:
            write_nquads(events, out)
        del events
        log = open(Path(tmp) / "cluster.log", "w")
        cluster = subprocess.Popen([sys.executable, "-m", "eventcloud", "cluster", "--peers", str(args.peers),
                                    "--data-dir", str(Path(tmp) / "peers"), *cluster_options],
                                   stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            assert cluster.stdout is not None
            entry = (await trio.to_thread.run_sync(cluster.stdout.readline)).strip()
            if not entry:
                print(f"eventcloud cluster did not start: {(Path(tmp) / 'cluster.log').read_text()[-2000:]}",
                      file=sys.stderr)
                return 2
            async with connect(entry, source="cluster-balance") as client:
                first_ids = {p.id for p in (await client.status()).peers}
            begun = time.monotonic()
            publish = await trio.run_process([sys.executable, "-m", "eventcloud", "publish", "--peer", entry,
                                              str(source)], capture_stdout=True, capture_stderr=True, check=False)
            seconds = time.monotonic() - begun
            said = (publish.stderr or b"").decode(errors="replace").strip().splitlines()
            print(f"eventcloud publish: exit {publish.returncode} after {seconds:.0f} s "
                  f"({total / seconds:,.0f} quads/s); last words: {said[-1] if said else ''}", file=sys.stderr)
            started, rows, ok = time.monotonic(), [], publish.returncode == 0
            while True:
                try:
                    with trio.fail_after(60):
                        rows.append(await look(entry, first_ids, total, started))
                except (ClientError, trio.TooSlowError) as exc:
                    rows.append((f"{time.monotonic() - started:.0f}", "-", "-", "-", "-", str(exc)[:60], "-"))
                print(rows[-1], file=sys.stderr, flush=True)
                if time.monotonic() - started >= args.watch:
                    break
                await trio.sleep(args.every)
            print(table(("s after publishing", "busiest / mean", "empty", "moved", "status quads", "COUNT(*)",
                         "COUNT s"), rows))
            answered = [row for row in rows if row[1] != "-"]   # (a look during a move may get no answer)
            last = answered[-1] if answered else rows[-1]
            balanced = last[1] != "-" and float(last[1]) <= 3.0 and last[2] == 0
            exact = "(wrong)" not in last[5] and last[5] != "-"
            print(f"last look: {'balanced' if balanced else 'NOT balanced'} (busiest <= 3x the mean, no peer "
                  f"empty), COUNT(*) {'exact' if exact else 'NOT exact'}")
            return 0 if ok and balanced and exact else 1
        finally:
            stop_process(cluster, timeout=60)   # (it stops its peers on SIGTERM)
            log.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, cluster_options = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=8)
    parser.add_argument("--quads", type=int, default=620_000, help="readings published, in quads [620000]")
    parser.add_argument("--watch", type=float, default=240.0, help="seconds to watch after publishing")
    parser.add_argument("--every", type=float, default=20.0, help="seconds between looks")
    parser.add_argument("--data", default=str(citybench_dir() or Path(__file__).resolve().parents[2] / "shared"
                                              / "data" / "citybench"))
    return trio.run(run, parser.parse_args(ours), cluster_options)


if __name__ == "__main__":
    raise SystemExit(main())
