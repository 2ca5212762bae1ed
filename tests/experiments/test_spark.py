"""The experiments pipeline: log schema, Spark aggregation against hand-computed numbers, replay.

One SparkSession (local[2]) is shared by every Spark test of this module; it costs ~8 s to start.
"""

from __future__ import annotations

import csv
import importlib
import json
import math
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from experiments import logs, workloads
from experiments.logs import LogError, RunKey
from experiments.spark import aggregate as agg
from experiments.spark import replay as rp


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from experiments.spark import session

    spark = session("eventcloud-tests", "local[2]", shuffle_partitions=2)
    yield spark
    spark.stop()


# --- the log schema -------------------------------------------------------------------------


def test_log_writer_puts_runs_where_the_schema_says(tmp_path):
    key = RunKey("fig2a", 25, 3, "osma")
    with logs.open_log(tmp_path, key, "osma-subscriber") as writer:
        writer.write(logs.notification(key, "s0", "http://g/1", 12.5, published=12.0))
        writer.write(logs.peer(key, "peer-1", {"quads": 3}))
    path = tmp_path / "fig2a" / "x=25" / "run=3" / "osma-subscriber.jsonl"
    records = list(logs.read_log(path))
    assert records[0] == {
        "type": "notification", "scenario": "fig2a", "x": 25, "run": 3, "algorithm": "osma",
        "subscription": "s0", "event": "http://g/1", "time": 12.5, "published": 12.0,
    }
    assert records[1]["counters"] == {"quads": 3}
    assert logs.run_dir(tmp_path, "fig2b", 3000.0, 0).name == "run=0"
    assert logs.run_dir(tmp_path, "fig2b", 3000.0, 0).parent.name == "x=3000"


KEY = {"scenario": "a", "x": 1, "run": 0, "algorithm": "osma"}


@pytest.mark.parametrize(
    "record, reason",
    [
        ({"type": "ping"}, "record type"),
        ({**KEY, "type": "publication", "time": 1.0}, "lacks event"),
        ({**KEY, "type": "publication", "x": "many", "event": "e", "time": 1}, "x must"),
        ({**KEY, "type": "publication", "event": "e", "time": math.nan}, "finite"),
        ({**KEY, "type": "peer", "peer": "p", "counters": [1]}, "object of numbers"),
    ],
)
def test_records_off_schema_are_refused(record, reason):
    with pytest.raises(LogError, match=reason):
        logs.validate(record)


# --- replay: the parts without an overlay ---------------------------------------------------


def test_rate_is_shared_between_partitions():
    assert rp.partition_rate(None, 4) is None
    assert rp.partition_rate(100.0, 4) == 25.0
    assert [rp.due(i, 25.0) for i in range(3)] == [0.0, 0.04, 0.08]
    assert rp.due(7, None) == 0.0
    with pytest.raises(rp.ReplayError):
        rp.partition_rate(0, 2)


def test_stats_add_up_at_the_driver():
    parts = [
        rp.Stats(events=3, quads=15, errors=0, seconds=1.5),
        rp.Stats(events=2, quads=10, errors=1, seconds=2.5, messages=["ClientError: refused"]),
        rp.Stats(),
    ]
    result = rp.total(parts)
    assert (result.events, result.quads, result.errors, result.seconds, result.partitions) == (5, 25, 1, 2.5, 3)
    assert result.messages == ["ClientError: refused"]


def test_partition_events_restores_source_order():
    g1, g2 = "<http://g/1>", "<http://g/2>"
    items = [
        (g2, (1, 0, "<http://s/b>", "<http://p/1>", '"late"')),
        (g1, (0, 1, "<http://s/a>", "<http://p/2>", '"2"@en')),
        (g1, (0, 0, "_:x", "<http://p/1>", '"1"^^<http://www.w3.org/2001/XMLSchema#int>')),
    ]
    first, second = rp.partition_events(items)
    assert first.graph.value == "http://g/1" and second.graph.value == "http://g/2"
    assert [q.p.value for q in first.quads] == ["http://p/1", "http://p/2"]
    assert first.quads[0].s.value.startswith("http://eventcloud.io/.well-known/genid/")
    assert first.quads[1].o.language == "en"


def test_source_kinds_and_errors(tmp_path):
    directory = workloads.write(workloads.generate(events=2, subscriptions=1), tmp_path / "wl")
    assert rp.source_kind(directory) == ("nquads", directory / "events.nq")
    assert rp.source_kind(directory / "events.nq")[0] == "nquads"
    with pytest.raises(rp.ReplayError, match="does not exist"):
        rp.source_kind(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(rp.ReplayError, match="workload directory"):
        rp.source_kind(tmp_path / "empty")


@pytest.mark.spark
def test_workload_partitions_hold_whole_events(spark, tmp_path):
    workload = workloads.generate(events=40, subscriptions=2, seed=1)
    directory = workloads.write(workload, tmp_path / "wl")
    rows = [(str(q.g), str(q.s), str(q.p), str(q.o)) for e in workload.events for q in e.quads]
    parquet = tmp_path / "quads.parquet"
    spark.createDataFrame(rows, list(rp.COLUMNS)).repartition(3).write.parquet(str(parquet))

    def partitions_of(source: Path) -> list[list]:
        partitions = rp.load_quads(spark, source, 3).glom().collect()
        assert len(partitions) == 3
        graphs = [{g for g, _ in part} for part in partitions]
        assert all(a.isdisjoint(b) for i, a in enumerate(graphs) for b in graphs[i + 1:])
        return [rp.partition_events(part) for part in partitions]

    # From N-Quads, each partition replays its events in file order, their quads in file order.
    from_nquads = partitions_of(directory)
    assert sorted(len(e) for part in from_nquads for e in part) == [5] * 40
    for part in from_nquads:
        assert part == [e for e in workload.events if e in part]
    # The Parquet rows were shuffled on writing, so only each event's set of quads is kept.
    from_parquet = [e for part in partitions_of(parquet) for e in part]
    assert {e.graph: set(e.quads) for e in from_parquet} == {e.graph: set(e.quads) for e in workload.events}


@pytest.mark.spark
def test_replay_reports_bad_input_and_unreachable_peers(spark, tmp_path):
    bad = tmp_path / "bad.nq"
    bad.write_text("<http://s> <http://p> oops <http://g> .\n")
    with pytest.raises(rp.ReplayError, match="a replay task failed on .*bad.nq"):
        rp.replay(spark, bad, "127.0.0.1:1", partitions=2)
    try:
        importlib.import_module("eventcloud.client")
    except ImportError as error:
        pytest.skip(f"eventcloud.client (the SDK) cannot be imported yet: {error}")
    directory = workloads.write(workloads.generate(events=6, subscriptions=1), tmp_path / "wl")
    stats = rp.replay(spark, directory, "127.0.0.1:1", partitions=2)  # nothing listens on port 1
    assert (stats.events, stats.errors) == (0, 6) and stats.messages


def test_replay_cli_says_what_is_wrong(tmp_path, capsys):
    directory = workloads.write(workloads.generate(events=1, subscriptions=1), tmp_path / "wl")
    with pytest.raises(SystemExit):
        rp.main([str(directory), "--peer", "localhost"])
    assert "--peer must be HOST:PORT" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        rp.main([str(tmp_path / "missing"), "--peer", "127.0.0.1:7000"])
    assert "does not exist" in capsys.readouterr().err


# --- aggregation against numbers computed by hand ------------------------------------------


def write_hand_logs(root: Path) -> None:
    """Small runs whose metrics are worked out in test_aggregate_matches_hand_computed_values."""
    osma = [RunKey("fig2a", 2, r, "osma") for r in range(3)]
    with logs.open_log(root, osma[0], "osma") as w:  # warm-up run 0: 2 notifications in 0.02 s
        w.write(logs.publication(osma[0], "e1", 10.0))
        w.write(logs.notification(osma[0], "s0", "e1", 11.0))
        w.write(logs.notification(osma[0], "s0", "e2", 11.02))
        w.write(logs.run(osma[0], peers=2, subscriptions=1, events=2, started=9.0, finished=12.0,
                         expected_notifications=2))
    with logs.open_log(root, osma[1], "osma-publisher") as w:
        for event, t in (("e1", 20.0), ("e2", 20.5), ("e3", 21.0)):
            w.write(logs.publication(osma[1], event, t))
    with logs.open_log(root, osma[1], "osma-subscriber") as w:
        for event, t in (("e1", 20.5), ("e2", 21.0), ("e2", 21.3), ("e3", 22.5)):
            w.write(logs.notification(osma[1], "s0", event, t))
        w.write(logs.run(osma[1], peers=2, subscriptions=1, events=3, started=19.0, finished=23.0,
                         expected_notifications=3))
        w.write(logs.peer(osma[1], "A", {"quads": 10, "messages": 4}))
        w.write(logs.peer(osma[1], "B", {"quads": 20, "messages": 6}))
    with logs.open_log(root, osma[2], "osma") as w:
        w.write(logs.publication(osma[2], "e1", 30.0))
        w.write(logs.publication(osma[2], "e2", 30.2))
        w.write(logs.notification(osma[2], "s0", "e1", 30.4, published=30.1))
        w.write(logs.notification(osma[2], "s0", "e2", 30.9))
        w.write(logs.run(osma[2], peers=2, subscriptions=1, events=2, started=29.0, finished=31.0,
                         expected_notifications=3))
        w.write(logs.peer(osma[2], "A", {"quads": 6}))
        w.write(logs.peer(osma[2], "B", {"quads": 2, "messages": 8}))
    # CSMA: runs numbered 7 and 3, written in that order; run 3 is the warm-up to discard.
    late, early = RunKey("fig2a", 2, 7, "csma"), RunKey("fig2a", 2, 3, "csma")
    with logs.open_log(root, late, "csma") as w:
        for event, t in (("e1", 5.0), ("e1", 5.1), ("e1", 5.2), ("e2", 9.0)):
            w.write(logs.notification(late, "s0", event, t))
    with logs.open_log(root, early, "csma") as w:
        w.write(logs.notification(early, "s0", "e1", 1.0))
        w.write(logs.notification(early, "s0", "e2", 1.001))
    lonely = RunKey("fig2a", 4, 0, "csma")  # a single run: --discard 1 leaves nothing of it
    with logs.open_log(root, lonely, "csma") as w:
        w.write(logs.notification(lonely, "s0", "e1", 1.0))
    # Fig. 2(e): only run records; the end-to-end time is what matters.
    for algorithm, times in (("osma", (5.0, 2.0, 4.0)), ("csma", (9.0, 3.0, 5.0))):
        for r, seconds in enumerate(times):
            key = RunKey("fig2e", 1000, r, algorithm)
            with logs.open_log(root, key, algorithm) as w:
                w.write(logs.run(key, peers=25, subscriptions=0, events=1000, started=100.0,
                                 finished=100.0 + seconds, expected_notifications=0))
    with open(root / "fig2e" / "broken.jsonl", "w") as out:
        out.write('{"type": "run", "scenario": \n')


@pytest.mark.spark
def test_aggregate_matches_hand_computed_values(spark, tmp_path):
    write_hand_logs(tmp_path / "logs")
    out = agg.aggregate(spark, [tmp_path / "logs"], tmp_path / "out", discard=1)
    assert out.malformed == 1
    assert out.dropped == ["fig2a/csma/x=4"]
    with open(out.summary_csv, newline="") as f:
        rows = {(r["scenario"], r["algorithm"], float(r["x"])): r for r in csv.DictReader(f)}
    assert set(rows) == {("fig2a", "osma", 2.0), ("fig2a", "csma", 2.0),
                         ("fig2e", "osma", 1000.0), ("fig2e", "csma", 1000.0)}

    def value(key, column):
        text = rows[key][column]
        return None if text == "" else float(text)

    osma = ("fig2a", "osma", 2.0)
    # run 1: 3 distinct in 22.5 - 20.5 s → 1.5/s; latencies 0.5, 0.5, 1.5 → p50 0.5, p99 1.48.
    # run 2: 2 distinct in 0.5 s → 4/s; latencies 0.3 (own "published"), 0.7 → p50 0.5, p99 0.696.
    assert value(osma, "runs") == 2
    assert value(osma, "throughput") == pytest.approx((1.5 + 4.0) / 2)
    assert value(osma, "throughput_std") == pytest.approx(math.sqrt(2 * 1.25**2))
    assert value(osma, "latency_p50") == pytest.approx(0.5)
    assert value(osma, "latency_p99") == pytest.approx((1.48 + 0.696) / 2)
    assert value(osma, "duplicates") == pytest.approx(0.5)
    assert value(osma, "end_to_end") == pytest.approx((4.0 + 2.0) / 2)
    assert value(osma, "notifications") == pytest.approx(2.5)
    assert value(osma, "missing") == pytest.approx(0.5)
    assert value(osma, "publications") == pytest.approx(2.5)
    assert value(osma, "load_quads_sum") == pytest.approx((30 + 8) / 2)
    assert value(osma, "load_quads_max") == pytest.approx((20 + 6) / 2)
    assert value(osma, "load_quads_mean") == pytest.approx((15 + 4) / 2)
    assert value(osma, "load_messages_mean") == pytest.approx((5 + 8) / 2)

    csma = ("fig2a", "csma", 2.0)  # run 7 only: 2 distinct in 4 s, 2 duplicates, no latency known
    assert value(csma, "runs") == 1
    assert value(csma, "throughput") == pytest.approx(0.5)
    assert value(csma, "duplicates") == 2
    assert value(csma, "latency_p50") is None and value(csma, "end_to_end") is None

    assert value(("fig2e", "osma", 1000.0), "end_to_end") == pytest.approx(3.0)
    assert value(("fig2e", "csma", 1000.0), "end_to_end") == pytest.approx(4.0)
    assert value(("fig2e", "osma", 1000.0), "throughput") is None

    with open(out.runs_csv, newline="") as f:
        per_run = list(csv.DictReader(f))
    assert len(per_run) == 3 + 2 + 1 + 6
    csma_runs = {r["run"] for r in per_run if r["algorithm"] == "csma" and r["scenario"] == "fig2a" and r["x"] == "2"}
    assert csma_runs == {"3", "7"}

    table = out.summary_md.read_text()
    assert table.startswith("| scenario | algorithm | x | runs | throughput (CE/s)")
    assert "| fig2a | osma | 2 | 2 | 2.75 |" in table
    names = {p.name for p in out.plots}
    assert names == {"fig2a.png", "fig2a-latency.png", "fig2e.png"}
    for path in out.plots:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


@pytest.mark.spark
def test_aggregate_without_discard_keeps_every_run(spark, tmp_path):
    write_hand_logs(tmp_path / "logs")
    records = agg.read_logs(spark, [tmp_path / "logs" / "fig2a"])
    rows = agg.summarize(agg.run_metrics(records), discard=0).collect()
    points = {(r.algorithm, r.x): r for r in rows}
    assert set(points) == {("osma", 2.0), ("csma", 2.0), ("csma", 4.0)}
    assert points["osma", 2.0].runs == 3
    assert points["osma", 2.0].throughput == pytest.approx((100.0 + 1.5 + 4.0) / 3)
    assert points["csma", 2.0].throughput == pytest.approx((2 / 0.001 + 0.5) / 2)
    assert points["csma", 4.0].throughput is None and points["csma", 4.0].notifications == 1


def test_aggregate_cli_says_what_is_missing(tmp_path, capsys):
    with pytest.raises(SystemExit):
        agg.main([str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")])
    assert "no such log directory" in capsys.readouterr().err


# --- replay into a real cluster --------------------------------------------------------------


def _first_line(process: subprocess.Popen, timeout: float) -> str:
    """The cluster's first stdout line (its address); the rest is drained so it never blocks."""
    lines: queue.Queue[str] = queue.Queue()

    def drain() -> None:
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=drain, daemon=True).start()
    try:
        return lines.get(timeout=timeout).strip()
    except queue.Empty:
        return ""


@pytest.mark.processes
@pytest.mark.spark
def test_replay_into_cluster(spark, tmp_path):
    try:
        from eventcloud.client import connect
    except ImportError as error:
        pytest.skip(f"eventcloud.client (the SDK) cannot be imported yet: {error}")
    import trio

    command = shutil.which("eventcloud", path=str(Path(sys.executable).parent)) or shutil.which("eventcloud")
    if command is None:
        pytest.skip("the `eventcloud` command is not installed in this environment")
    directory = workloads.write(workloads.generate(events=50, subscriptions=1, seed=2), tmp_path / "wl")
    errors = open(tmp_path / "cluster.err", "w")
    cluster = subprocess.Popen(
        [command, "cluster", "--peers", "3", "--port", "0", "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE, stderr=errors, text=True,
    )
    try:
        address = _first_line(cluster, timeout=60)
        assert address, (
            f"`eventcloud cluster` printed no address (exit code {cluster.poll()}): "
            + (tmp_path / "cluster.err").read_text()[-2000:]
        )
        log = tmp_path / "replay.jsonl"
        stats = rp.replay(spark, directory, address, partitions=2, log=log, scenario="replay", run=0)
        assert (stats.events, stats.quads, stats.errors) == (50, 250, 0), stats.messages
        assert sum(1 for _ in logs.read_log(log)) == 50

        async def count() -> int:
            async with connect(address) as client:
                result = await client.query("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }")
            return int(result["results"]["bindings"][0]["n"]["value"])

        assert trio.run(count) == 250
    finally:
        cluster.send_signal(signal.SIGINT)
        try:
            cluster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cluster.kill()
            cluster.wait()
        errors.close()


def test_summary_rows_are_json_serialisable_for_other_tools():
    row = {"scenario": "fig2a", "algorithm": "osma", "x": 2.0, "throughput": None}
    assert json.loads(json.dumps(row)) == row
    assert agg.markdown_table([row]).splitlines()[2] == "| fig2a | osma | 2 | – |"
