"""One-time queries over a large store (issue: scale): 8 local peer processes, every CityBench stream
published (--quads, ~600 k by default), then each query timed (--repeat times, the median) with
its answer checked against what was published.

    python -m experiments.query_bench [--peers 8] [--quads 600000] [--repeat 3]
        [--rebalance-every 5] [--no-make-room] [--settle 120] [--authority none] [--log-level info]

Prints one row per query: seconds (median), rows, and whether the answer is right (COUNT(*) must
equal the quads published, per-predicate counts must add up to it, LIMIT 3 must give 3 rows).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import trio

from eventcloud.cli.demo import citybench_dir
from eventcloud.client import ClientError, connect
from eventcloud.overlay import Neighbour, heirs, is_guillotine, room_faces
from eventcloud.rdf.citybench import read_stream
from peers.supervisor import LocalCluster
from peers.runtime import serve_task_dumps

# $EVENTCLOUD_CITYBENCH, or shared/data/citybench beside the checkout (as the demo finds it)
DATA = citybench_dir() or Path(__file__).resolve().parents[2] / "shared" / "data" / "citybench"
QUERIES = {
    "COUNT(*)": "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }",
    "SELECT * LIMIT 3": "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } } LIMIT 3",
    "COUNT GROUP BY ?p": "SELECT ?p (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?p",
    "AVG of values > 50": "SELECT (AVG(?v) AS ?mean) (COUNT(?v) AS ?n) WHERE { GRAPH ?g { "
                          "?o <http://purl.oclc.org/NET/sao/hasValue> ?v } FILTER(?v > 50) }",
    "ASK": "ASK { GRAPH ?g { ?s <http://purl.oclc.org/NET/sao/hasValue> ?v } }",
    # gathered whole at the entry until issue 45 (frame limit at ~600,000 quads)
    "COUNT(DISTINCT ?g)": "SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }",
    "GROUP BY ?g top 10": "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g "
                          "ORDER BY DESC(?n) ?g LIMIT 10",
    "ORDER BY DESC(?v) LIMIT 5": "SELECT ?o ?v WHERE { GRAPH ?g { ?o <http://purl.oclc.org/NET/sao/hasValue> ?v } } "
                                 "ORDER BY DESC(?v) LIMIT 5",
    "ASK {}": "ASK {}",
}
#: A join: the values one parking sensor observed (844 of 87,308 values in 600,070 quads).
SENSOR = "http://www.insight-centre.org/dataset/SampleEventService#AarhusParkingDataNORREPORT"
_BY, _VALUE = "<http://purl.oclc.org/NET/ssnx/ssn#observedBy>", "<http://purl.oclc.org/NET/sao/hasValue>"
JOINS = {
    # one basic graph pattern: the values are fetched bound to the sensor's observations
    "join: one sensor's values, bound": "SELECT (COUNT(?v) AS ?n) (AVG(?v) AS ?mean) WHERE { GRAPH ?g { "
                                        f"?ob {_BY} <{SENSOR}> . ?ob {_VALUE} ?v }} }}",
    # the same question in two GRAPH blocks: not one basic graph pattern, so every value is fetched
    "join: the same, fetched whole": "SELECT (COUNT(?v) AS ?n) (AVG(?v) AS ?mean) WHERE { "
                                     f"GRAPH ?g {{ ?ob {_BY} <{SENSOR}> }} GRAPH ?g {{ ?ob {_VALUE} ?v }} }}",
}


#: Times a refused batch is published (a transient refusal says: retry), pausing 1, 2, 4… 10 s.
ATTEMPTS = 10


def events(limit_quads: int, data: Path) -> list:
    out, quads = [], 0
    streams = sorted(data.glob("*.stream"))
    iterators = [read_stream(path) for path in streams]
    while iterators and quads < limit_quads:
        for it in list(iterators):
            event = next(it, None)
            if event is None:
                iterators.remove(it)
                continue
            out.append(event)
            quads += len(event)
    return out


async def run(args: argparse.Namespace) -> int:
    evs = events(args.quads, Path(args.data))
    total = sum(len(e) for e in evs)
    if not total:
        print(f"no CityBench stream found in {args.data} (set EVENTCLOUD_CITYBENCH)", file=sys.stderr)
        return 2
    print(f"{len(evs):,} CityBench events, {total:,} quads", file=sys.stderr)
    extra = [] if args.rebalance_every is None else ["--rebalance-every", str(args.rebalance_every)]
    if args.make_room is not None:
        extra.append("--rebalance-make-room" if args.make_room else "--no-rebalance-make-room")
    cluster = LocalCluster(args.peers, seed=1, extra=extra, log_level=args.log_level, data_dir=args.keep,
                           authority=None if args.authority == "none" else args.authority)
    await trio.to_thread.run_sync(cluster.start)
    ok = True
    try:
        async with connect(cluster.addresses, admin_token=cluster.admin_token, source="qbench",
                           on_event=lambda line: print(f"{time.strftime('%H:%M:%S')} client: {line}", file=sys.stderr,
                                                       flush=True)) as client, trio.open_nursery() as dumps:
            await dumps.start(serve_task_dumps, lambda: "the benchmark's client")  # kill -USR1: where it waits
            started = time.perf_counter()
            send, receive = trio.open_memory_channel(0)
            refused: list[str] = []

            async def publisher() -> None:
                async for batch in receive:
                    for attempt in range(ATTEMPTS):  # a batch refused while peers move is published again
                        try:
                            await client.publish_batch(batch)
                            break
                        except ClientError as exc:
                            if not exc.transient or attempt == ATTEMPTS - 1:
                                raise
                            refused.append(exc.message)
                            print(f"{time.strftime('%H:%M:%S')} batch refused (attempt {attempt + 1}): {exc.message}",
                                  file=sys.stderr, flush=True)
                            await trio.sleep(min(2 ** attempt, 10))

            failed: ClientError | None = None
            during: list[float] = []   # COUNT(*) latencies while publishing (answers still moving)

            async def counting_while_publishing(done: trio.Event) -> None:
                while not done.is_set():
                    with trio.move_on_after(5):
                        await done.wait()
                    if done.is_set():
                        return
                    begun = time.perf_counter()
                    try:
                        await client.query(QUERIES["COUNT(*)"])
                    except ClientError:
                        continue
                    during.append(time.perf_counter() - begun)

            try:
                async with trio.open_nursery() as nursery:
                    published = trio.Event()
                    nursery.start_soon(counting_while_publishing, published)
                    async with trio.open_nursery() as publishers:
                        for _ in range(4):
                            publishers.start_soon(publisher)
                        async with send:
                            for i in range(0, len(evs), 50):
                                await send.send(evs[i:i + 50])
                    published.set()
            except* ClientError as group:
                failed = group.exceptions[0]  # type: ignore[assignment]
            if failed is not None:
                print(f"publishing failed after {time.perf_counter() - started:.0f} s: a batch was refused "
                      f"{ATTEMPTS} times ({len(refused)} refusals in all); the last: {failed.message}",
                      file=sys.stderr)
                dumps.cancel_scope.cancel()
                return 1
            if during:
                print(f"COUNT(*) while publishing, every 5 s: median {statistics.median(during):.3f} s, "
                      f"max {max(during):.3f} s ({len(during)} asked)", file=sys.stderr)
            print(f"published in {time.perf_counter() - started:.0f} s; batches refused and published again: "
                  f"{len(refused)}{' (first: ' + refused[0] + ')' if refused else ''}", file=sys.stderr)
            if args.settle > 0:  # the rebalancer moves peers meanwhile (docs/overlay.md)
                await trio.sleep(args.settle)
            rows = []
            sensor_values = observed_values(evs, SENSOR)
            for name, text in {**QUERIES, **JOINS}.items():
                times, answer = [], None
                for _ in range(args.repeat):
                    begun = time.perf_counter()
                    answer = await client.query(text)
                    times.append(time.perf_counter() - begun)
                bindings = answer.get("results", {}).get("bindings", []) if isinstance(answer, dict) else []
                got = ""
                if name == "COUNT(*)":
                    got = f"{int(bindings[0]['n']['value']):,}"
                    right = int(bindings[0]["n"]["value"]) == total
                elif name == "COUNT GROUP BY ?p":
                    got = f"{sum(int(b['n']['value']) for b in bindings):,}"
                    right = sum(int(b["n"]["value"]) for b in bindings) == total
                elif name == "SELECT * LIMIT 3":
                    right = len(bindings) == 3
                elif name in ("ASK", "ASK {}"):
                    right = answer.get("boolean") is True
                elif name == "COUNT(DISTINCT ?g)":
                    got = f"{int(bindings[0]['n']['value']):,}"
                    right = int(bindings[0]["n"]["value"]) == len({e.graph for e in evs})
                elif name == "GROUP BY ?g top 10":
                    got = bindings[0]["n"]["value"] if bindings else ""
                    right = len(bindings) == 10 and int(bindings[0]["n"]["value"]) == max(len(e) for e in evs)
                elif name == "ORDER BY DESC(?v) LIMIT 5":
                    values = [float(b["v"]["value"]) for b in bindings]
                    got = ", ".join(f"{v:g}" for v in values)
                    right = len(values) == 5 and values == sorted(values, reverse=True)
                elif name in JOINS:
                    got = f"{int(bindings[0]['n']['value']):,}"
                    right = int(bindings[0]["n"]["value"]) == sensor_values
                else:
                    right = len(bindings) == 1
                ok &= right
                rows.append((name, statistics.median(times), len(bindings), right, got))
            subject = evs[0].quads[0].s
            for name, text in (("DESCRIBE one subject", f"DESCRIBE <{subject.value}>"),):
                begun = time.perf_counter()
                described = await client.query(text)
                lines = [line for line in described.splitlines() if line.strip()]
                right = len(lines) == len({(q.p, q.o) for e in evs for q in e.quads if q.s == subject})
                ok &= right
                rows.append((name, time.perf_counter() - begun, len(lines), right, ""))
            # whole-store exports, read page by page (counted, never held)
            for name, opener in (("export: SELECT * streamed", lambda: client.query_stream(
                    "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }")), ("export: find streamed", client.find_stream)):
                begun, n = time.perf_counter(), 0
                async with await opener() as answer:
                    async for page in answer.pages():
                        n += len(page)
                seconds = time.perf_counter() - begun
                ok &= n == total
                rows.append((name, seconds, n, n == total, f"{n / seconds:,.0f} quads/s"))
            for name, call in (("count() (find --count)", client.count), ("status", client.status)):
                times = []
                for _ in range(args.repeat):
                    begun = time.perf_counter()
                    result = await call()
                    times.append(time.perf_counter() - begun)
                if name.startswith("count"):
                    right, got = result == total, f"{result:,}"
                else:
                    right = sum(p.quads for p in result.peers) == total
                    held, pending = sum(p.quads for p in result.peers), sum(p.pending for p in result.peers)
                    got = f"{held:,} held, {pending:,} pending"
                ok &= right
                rows.append((name, statistics.median(times), 1, right, got))
            status = await client.status()
            loads = [p.quads for p in status.peers]
            if not ok:  # not settled yet (pending events), or lost? look again a minute later
                await trio.sleep(60)
                again = await client.query(QUERIES["COUNT(*)"])
                status = await client.status()
                print(f"a minute later: COUNT(*) {int(again['results']['bindings'][0]['n']['value']):,}, count() "
                      f"{await client.count():,}, status {sum(p.quads for p in status.peers):,} held, "
                      f"{sum(p.pending for p in status.peers):,} pending (published {total:,})", file=sys.stderr)
                for line in await miscounted(client, evs):
                    print(line, file=sys.stderr)
            dumps.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    print(f"| query ({args.peers} peers, {total:,} quads) | seconds (median of {args.repeat}) | rows | right |")
    print("|---|---|---|---|")
    for name, seconds, n, right, got in rows:
        verdict = "yes" if right else f"NO ({got})" if got else "NO"
        print(f"| {name} | {seconds:.3f} | {n} | {verdict} |")
    mean = sum(loads) / len(loads)
    print(f"quads per peer: max {max(loads):,}, mean {mean:,.0f} (max/mean {max(loads) / mean:.1f}), "
          f"empty peers {sum(1 for q in loads if q == 0)}")
    for line in why_empty(status):
        print(line)
    return 0 if ok else 1


def observed_values(evs: list, sensor: str) -> int:
    """How many values observations by `sensor` have in the events (what the joins count)."""
    total = 0
    for event in evs:
        observations = {q.s for q in event.quads if q.p.value == _BY[1:-1] and q.o.value == sensor}
        total += sum(1 for q in event.quads if q.p.value == _VALUE[1:-1] and q.s in observations)
    return total


async def miscounted(client, evs: list) -> list[str]:  # noqa: ANN001 - a client
    """The events whose quads the peers count otherwise than published (GROUP BY ?g), and the
    peers whose zones hold a point of each (to tell a quad held twice from a counter's error)."""
    published = {e.graph.value: len(e) for e in evs}
    try:
        answer = await client.query("SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g")
    except ClientError as exc:
        return [f"could not count per event: {exc.message}"]
    counted = {b["g"]["value"]: int(b["n"]["value"]) for b in answer["results"]["bindings"]}
    wrong = sorted(g for g in published.keys() | counted.keys() if published.get(g, 0) != counted.get(g, 0))
    lines = [f"{len(wrong)} events counted otherwise than published"]
    for graph in wrong[:20]:
        lines.append(f"  {graph}: published {published.get(graph, 0)}, counted {counted.get(graph, 0)}")
    return lines


def why_empty(status) -> list[str]:  # noqa: ANN001 - a client Status
    """For each empty peer: whether a neighbour's zone merges with its own (it could leave), the
    faces it could make room over (`room_faces`), and whether the zones still form a guillotine
    partition (every split history a k-d tree allows: one plane cuts the set in two, recursively)."""
    zones = {p.id: p.zone for p in status.peers}
    whole = status.space.whole_space()
    lines = []
    for peer in status.peers:
        if peer.quads:
            continue
        table = {k: Neighbour(a, zones[k]) for k, a in peer.neighbours.items() if k in zones}
        faces = room_faces(peer.zone, table, whole)
        lines.append(f"empty peer {peer.id}: {len(table)} neighbours, "
                     f"{len(heirs(peer.zone, table, tree_only=True))} whose zone merges with its own, "
                     f"{len(faces)} faces to make room over "
                     f"({', '.join(f'dim {f.dim}: {len(f.neighbours)} across' for f in faces) or 'none'})")
    unplaced = sum(1 for z in zones.values() if not z.placed)
    lines.append(f"the zones {'form' if is_guillotine(list(zones.values())) else 'do NOT form'} a guillotine "
                 f"partition; {unplaced} of {len(zones)} do not know their place in the split tree")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=8)
    parser.add_argument("--quads", type=int, default=600_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rebalance-every", type=float,
                        help="the peers' --rebalance-every (0: off) [the peers' default]")
    parser.add_argument("--make-room", action=argparse.BooleanOptionalAction,
                        help="the peers' --rebalance-make-room [the peers' default]")
    parser.add_argument("--settle", type=float, default=0.0, help="seconds to wait after publishing, before the queries")
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--log-level", default="warning", help="the peers' --log-level")
    parser.add_argument("--authority", default="local",
                        help="the peers' ownership authority: local (served by the benchmark, as `eventcloud "
                             "cluster` does), etcd://…, or none [local]")
    parser.add_argument("--keep", help="the peers' data directory, kept afterwards (default: a temporary one, removed)")
    return trio.run(run, parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
