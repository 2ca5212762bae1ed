"""EventCloud's store against Oxigraph's server on the same data, side by side in one run (issue 45).

The same CityBench events (--quads, ~600,000 by default) are loaded into `oxigraph serve` (the
`oxigraph` CLI: `pip install oxigraph`; `oxigraph load`, then `oxigraph serve
--union-default-graph`, as EventCloud's default graph is the union of its events) and published
into a local cluster (--peers, at the defaults: R = 2, fsync) behind `eventcloud gateway`. Then
every query runs through both SPARQL HTTP endpoints; answers are compared (rows as bags, in
order where the query orders them, numbers by value; graphs as sets of triples; an export by
its count and a digest of its rows), and times, load time, disk and peak memory are printed.

    python -m experiments.store_bench [--peers 8] [--quads 600000] [--repeat 3]

Prints one row per query (seconds for each side, the ratio, rows, equal or not), then load
time, disk and resident memory for each side.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import httpx
import trio

from eventcloud.client import connect
from experiments.benchkit import stop_process
from experiments.query_bench import DATA, SENSOR, events
from peers.supervisor import LocalCluster

SAO, SSN = "http://purl.oclc.org/NET/sao/", "http://purl.oclc.org/NET/ssnx/ssn#"
TL = "http://purl.org/NET/c4dm/timeline.owl#"
QUERIES: dict[str, str] = {
    "COUNT(*)": "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }",
    "COUNT(DISTINCT ?g)": "SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }",
    "DISTINCT ?p": "SELECT DISTINCT ?p WHERE { ?s ?p ?o }",
    "GROUP BY ?p": "SELECT ?p (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p",
    "GROUP BY ?g top 10": "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g "
                          "ORDER BY DESC(?n) ?g LIMIT 10",
    "AVG, MIN, MAX of values": f"SELECT (AVG(?v) AS ?mean) (MIN(?v) AS ?lo) (MAX(?v) AS ?hi) WHERE {{ "
                               f"?o <{SAO}hasValue> ?v }}",
    "ORDER BY DESC(?v) LIMIT 5": f"SELECT ?o ?v WHERE {{ ?o <{SAO}hasValue> ?v }} ORDER BY DESC(?v) ?o LIMIT 5",
    "FILTER range COUNT": f"SELECT (COUNT(*) AS ?n) WHERE {{ ?o <{SAO}hasValue> ?v FILTER(?v > 50 && ?v < 60) }}",
    "ASK FILTER": f"ASK {{ ?o <{SAO}hasValue> ?v FILTER(?v > 1000) }}",
    "ASK {}": "ASK {}",
    "join + FILTER + OPTIONAL": f"SELECT ?ob ?v ?t WHERE {{ ?ob <{SSN}observedBy> <{SENSOR}> ; <{SAO}hasValue> ?v "
                                f"FILTER(?v > 10) OPTIONAL {{ ?ob <{SAO}time> ?i . ?i <{TL}at> ?t }} }}",
    "three-pattern join": f"SELECT ?sensor (COUNT(*) AS ?n) WHERE {{ ?ob <{SSN}observedBy> ?sensor ; "
                          f"<{SAO}hasValue> ?v ; <{SAO}time> ?i FILTER(?v > 100) }} GROUP BY ?sensor",
}
#: name -> query whose answer is a graph (compared as a set of N-Triples lines)
GRAPH_QUERIES = {"DESCRIBE one subject": "DESCRIBE <{subject}>",
                 "CONSTRUCT one event": "CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}"}
EXPORT = "SELECT ?g ?s ?p ?o WHERE { GRAPH ?g { ?s ?p ?o } }"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_http(url: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=2.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {seconds:g} s")


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _peak_rss(pid: int, field: str = "VmHWM") -> int:
    """VmHWM (peak resident set) of a process, or another field of its status (VmRSS: now), in
    bytes (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _term(term: dict[str, str]) -> tuple:
    datatype = term.get("datatype", "")
    if datatype.endswith(("#integer", "#decimal", "#double", "#float", "#int", "#long")):
        try:
            return ("number", str(round(Decimal(term["value"]), 6).normalize()))
        except InvalidOperation:
            pass
    return (term["type"], term["value"], term.get("xml:lang", ""), datatype)


def _answer(body: bytes, ordered: bool) -> Any:
    result = json.loads(body)
    if "boolean" in result:
        return result["boolean"]
    rows = [tuple(sorted((k, _term(v)) for k, v in row.items())) for row in result["results"]["bindings"]]
    return rows if ordered else sorted(rows)


def _triples(body: bytes) -> set[str]:
    return {line.strip() for line in body.decode().splitlines() if line.strip()}


def _timed_get(client: httpx.Client, url: str, query: str, accept: str, headers: dict[str, str]) -> tuple[float, bytes]:
    begun = time.perf_counter()
    response = client.post(url, data={"query": query}, headers={"accept": accept, **headers})
    seconds = time.perf_counter() - begun
    if response.status_code != 200:
        raise RuntimeError(f"{response.status_code}: {response.text[:300]}")
    return seconds, response.content


def _export(client: httpx.Client, url: str, headers: dict[str, str], graph_store: bool = False
            ) -> tuple[float, int, str]:
    """The whole store, streamed: as TSV rows of a SELECT, or (`graph_store`) as N-Quads of the
    Graph Store Protocol's GET; seconds, rows, an order-free digest of them."""
    begun, rows, digest = time.perf_counter(), 0, 0
    request = (client.stream("GET", url, headers={"accept": "application/n-quads", **headers}) if graph_store else
               client.stream("POST", url, data={"query": EXPORT},
                             headers={"accept": "text/tab-separated-values", **headers}))
    with request as response:
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {response.read()[:300]!r}")
        first = not graph_store   # a TSV header line
        for line in response.iter_lines():
            if first:
                first = False
                continue
            if line:
                rows += 1
                digest ^= int.from_bytes(hashlib.blake2b(line.encode(), digest_size=8).digest(), "big")
    return time.perf_counter() - begun, rows, f"{digest:016x}"


async def _publish(addresses: list[str], evs: list, token: str | None) -> float:
    began = time.perf_counter()
    async with connect(addresses, admin_token=token, source="store-bench") as client:
        send, receive = trio.open_memory_channel[list](0)

        async def publisher() -> None:
            async for batch in receive:
                await client.publish_batch(batch)

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(publisher)
            async with send:
                for i in range(0, len(evs), 50):
                    await send.send(evs[i:i + 50])
    return time.perf_counter() - began


def run(args: argparse.Namespace) -> int:
    beside = Path(sys.executable).parent / "oxigraph"   # installed in this environment, not on PATH
    oxigraph = str(beside) if beside.exists() else shutil.which("oxigraph")
    if oxigraph is None:
        print("the `oxigraph` CLI is not installed: pip install oxigraph", file=sys.stderr)
        return 2
    evs = events(args.quads, Path(args.data))
    total = sum(len(e) for e in evs)
    print(f"{len(evs):,} CityBench events, {total:,} quads", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="store-bench-"))
    procs: list[subprocess.Popen] = []
    cluster = LocalCluster(args.peers, seed=1, data_dir=work / "cluster")
    try:
        data = work / "data.nq"
        with open(data, "w") as out:
            for event in evs:
                out.writelines(q.n_quads() + "\n" for q in event.quads)
        began = time.perf_counter()
        subprocess.run([oxigraph, "load", "--location", str(work / "oxigraph"), "--file", str(data)], check=True,
                       capture_output=True)
        ox_load = time.perf_counter() - began
        ox_port = _free_port()
        ox_server = subprocess.Popen([oxigraph, "serve", "--location", str(work / "oxigraph"), "--bind",
                                      f"127.0.0.1:{ox_port}", "--union-default-graph"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(ox_server)
        cluster.start()
        ec_load = trio.run(_publish, cluster.addresses, evs, cluster.admin_token)
        gw_port = _free_port()
        gateway = subprocess.Popen([sys.executable, "-m", "eventcloud", "gateway", "--peer", cluster.entry,
                                    "--listen", f"127.0.0.1:{gw_port}",
                                    "--admin-token-file", str(cluster.admin_token_file)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(gateway)
        ox_url, ec_url = f"http://127.0.0.1:{ox_port}/query", f"http://127.0.0.1:{gw_port}/sparql"
        _wait_http(f"http://127.0.0.1:{ox_port}/")
        _wait_http(f"http://127.0.0.1:{gw_port}/health")
        auth = {"authorization": f"Bearer {cluster.admin_token}"} if cluster.admin_token else {}
        subject, graph = evs[0].quads[0].s.value, evs[0].graph.value
        queries = [(name, text, False) for name, text in QUERIES.items()] + [
            (name, text.format(subject=subject, graph=graph), True) for name, text in GRAPH_QUERIES.items()]
        rows, equal_all = [], True
        with httpx.Client(timeout=600.0) as client:
            for name, text, graph_form in queries:
                accept = "application/n-triples" if graph_form else "application/sparql-results+json"
                times: dict[str, list[float]] = {"ox": [], "ec": []}
                answers: dict[str, Any] = {}
                failed = ""
                for _ in range(args.repeat):
                    for side, url, headers in (("ox", ox_url, {}), ("ec", ec_url, auth)):
                        try:
                            seconds, body = _timed_get(client, url, text, accept, headers)
                        except (RuntimeError, httpx.HTTPError) as exc:
                            failed = f"{side}: {exc}"
                            continue
                        times[side].append(seconds)
                        answers[side] = _triples(body) if graph_form else _answer(body, "ORDER BY" in text)
                equal = not failed and answers.get("ox") == answers.get("ec")
                equal_all &= equal
                size = answers.get("ox")
                count = size if isinstance(size, bool) else len(size or ())
                ox_t = statistics.median(times["ox"]) if times["ox"] else float("nan")
                ec_t = statistics.median(times["ec"]) if times["ec"] else float("nan")
                rows.append((name, ox_t, ec_t, count, equal, failed))
            ox_export = _export(client, ox_url, {})
            ec_export = _export(client, ec_url, auth)
            ox_dump = _export(client, f"http://127.0.0.1:{ox_port}/store", {}, graph_store=True)
            ec_dump = _export(client, f"http://127.0.0.1:{gw_port}/events", auth, graph_store=True)
        print(f"\n{'query':<28} {'oxigraph s':>10} {'eventcloud s':>12} {'ratio':>7} {'rows':>8}  equal")
        for name, ox_t, ec_t, count, equal, failed in rows:
            print(f"{name:<28} {ox_t:>10.3f} {ec_t:>12.3f} {ec_t / ox_t:>6.1f}× {count!s:>8}  "
                  f"{'yes' if equal else 'NO'} {failed}")
        export_equal = ox_export[1:] == ec_export[1:] and ec_export[1] == total
        equal_all &= export_equal
        print(f"{'export (TSV, streamed)':<28} {ox_export[0]:>10.3f} {ec_export[0]:>12.3f} "
              f"{ec_export[0] / ox_export[0]:>6.1f}× {ec_export[1]:>8}  {'yes' if export_equal else 'NO'}  "
              f"({ec_export[1] / ec_export[0]:,.0f} rows/s through the gateway; Oxigraph "
              f"{ox_export[1] / ox_export[0]:,.0f})")
        dump_equal = ox_dump[1] == ec_dump[1] == total   # (N-Quads lines may write a literal differently)
        equal_all &= dump_equal
        print(f"{'export (GET, N-Quads)':<28} {ox_dump[0]:>10.3f} {ec_dump[0]:>12.3f} "
              f"{ec_dump[0] / ox_dump[0]:>6.1f}× {ec_dump[1]:>8}  {'yes' if dump_equal else 'NO'}  "
              f"({ec_dump[1] / ec_dump[0]:,.0f} quads/s through the gateway; Oxigraph {ox_dump[1] / ox_dump[0]:,.0f})")
        peer_rss = [_peak_rss(p.pid) for p in cluster.processes]
        print(f"\nload: oxigraph load {ox_load:.1f} s; EventCloud publish {ec_load:.1f} s "
              f"({ec_load / ox_load:.1f}×, {args.peers} peers, R = 2, fsync)")
        ox_disk, ec_disk = _du(work / "oxigraph"), _du(work / "cluster")
        print(f"disk: oxigraph {ox_disk / 2**20:,.0f} MiB; EventCloud {ec_disk / 2**20:,.0f} MiB "
              f"({ec_disk / max(ox_disk, 1):.1f}×, two copies of each quad)")
        print(f"peak resident memory: oxigraph server {_peak_rss(ox_server.pid) / 2**20:,.0f} MiB; peers "
              f"{sum(peer_rss) / 2**20:,.0f} MiB in all, the largest {max(peer_rss) / 2**20:,.0f} MiB; entry peer "
              f"{peer_rss[0] / 2**20:,.0f} MiB; gateway {_peak_rss(gateway.pid) / 2**20:,.0f} MiB")
        print(f"\nevery answer equal to Oxigraph's: {'yes' if equal_all else 'NO'}")
        return 0 if equal_all else 1
    finally:
        for proc in procs:
            stop_process(proc)
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=8)
    parser.add_argument("--quads", type=int, default=600_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default=str(DATA))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
