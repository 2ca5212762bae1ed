"""Spark job: from the JSON-lines logs of many runs to the paper's Fig. 2 numbers and plots.

    python experiments/spark/aggregate.py runs/ --out results/ [--master spark://h:7077] [--discard 1]

Per run (scenario, algorithm, x, run) it computes, with DataFrame operations only:

- throughput: matching publications, i.e. distinct (subscription, event) notifications, divided
  by the time between the first and the last of their first arrivals (the paper's footnote 2);
- end_to_end: the run record's finished − started;
- latency_p50 / latency_p99: first arrival of each (subscription, event) minus its publication
  time — the notification's own ``published`` when present, else the publication record of the
  event; exact percentiles with linear interpolation (numpy's default);
- duplicates: notifications beyond the first per (subscription, event); missing: expected − got;
- load_<counter>_sum / _max / _mean: the peers' counters over the peers of the run.

Then it discards the first D runs (by run number) of each (scenario, algorithm, x) as warm-up
(the paper lays aside the first of 6 runs: --discard 1) and averages the rest. Only these small
tables reach the driver, to be written as runs.csv, summary.csv, summary.md, and per scenario
a Fig. 2-style PNG plus a latency PNG when latencies are known (see experiments/plots.py).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments import plots  # noqa: E402
from experiments.logs import format_x  # noqa: E402
from experiments.spark import DEFAULT_MASTER, session  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KEYS = ["scenario", "algorithm", "x", "run"]
GROUP = ["scenario", "algorithm", "x"]
#: Per-run metrics averaged in the summary, in output order (load_* columns follow).
METRICS = [
    "throughput", "end_to_end", "latency_p50", "latency_p99", "notifications",
    "expected_notifications", "missing", "duplicates", "publications", "events",
    "subscriptions", "peers",
]
#: Metrics whose spread across runs is reported too (as <metric>_std).
SPREAD = ["throughput", "end_to_end"]


class AggregateError(RuntimeError):
    """Logs that cannot be aggregated (none found, or not in the experiments.logs schema)."""


@dataclass
class Outputs:
    """What the job wrote, and the summary rows it plotted."""

    runs_csv: Path
    summary_csv: Path
    summary_md: Path
    plots: list[Path]
    summary: list[dict[str, Any]]
    malformed: int
    dropped: list[str]


def log_schema() -> Any:
    """The experiments.logs schema as a Spark schema: no inference pass over the files."""
    from pyspark.sql import types as T

    double, string, long = T.DoubleType(), T.StringType(), T.LongType()
    fields = [
        ("type", string), ("scenario", string), ("x", double), ("run", long),
        ("algorithm", string), ("event", string), ("subscription", string), ("time", double),
        ("published", double), ("peer", string), ("counters", T.MapType(string, double)),
        ("peers", long), ("subscriptions", long), ("events", long), ("started", double),
        ("finished", double), ("expected_notifications", long), ("_corrupt_record", string),
    ]
    return T.StructType([T.StructField(name, kind, True) for name, kind in fields])


def read_logs(spark: "SparkSession", paths: Sequence[str | Path]) -> "DataFrame":
    """All *.jsonl records under `paths` (directories are searched recursively)."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise AggregateError(f"no such log directory or file: {', '.join(missing)}")
    return (
        spark.read.schema(log_schema())
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt_record")
        .json([str(p) for p in paths])
    )


def run_metrics(records: "DataFrame", counters: Sequence[str] | None = None) -> "DataFrame":
    """One row per (scenario, algorithm, x, run) with the per-run metrics and load_* columns.

    Every record kind is turned into "fact" rows of one wide shape and grouped once per run,
    which costs far fewer Spark stages than joining one table per metric. `counters` are the
    peer counter names to report (default: all that occur, found with one small job).
    """
    from pyspark.sql import functions as F

    def of(kind: str) -> "DataFrame":
        return records.filter(F.col("type") == kind)

    published = of("publication").groupBy(*KEYS, "event").agg(F.min("time").alias("pub_time"))
    pairs = (
        of("notification")
        .groupBy(*KEYS, "subscription", "event")
        .agg(
            F.min("time").alias("first"),
            F.count(F.lit(1)).alias("copies"),
            F.min("published").alias("published"),
        )
        .join(published, [*KEYS, "event"], "left")
        .select(
            *KEYS, "first", "copies",
            (F.col("first") - F.coalesce("published", "pub_time")).alias("latency"),
        )
    )
    publications = published.select(*KEYS, F.lit(1).alias("publication"))
    runs = of("run").select(
        *KEYS, "peers", "subscriptions", "events", "expected_notifications", "started", "finished"
    )
    peers = of("peer").select(*KEYS, F.explode("counters").alias("counter", "value"))
    peers = peers.withColumn("counter", F.regexp_replace("counter", "[^A-Za-z0-9_]", "_"))
    if counters is None:
        counters = sorted(row.counter for row in peers.select("counter").distinct().collect())
    facts = (
        pairs.unionByName(publications, allowMissingColumns=True)
        .unionByName(runs, allowMissingColumns=True)
        .unionByName(peers, allowMissingColumns=True)
    )
    delivered = F.count("first")
    span = F.max("first") - F.min("first")
    loads = []
    for name in counters:
        value = F.when(F.col("counter") == name, F.col("value"))
        loads += [
            F.sum(value).alias(f"load_{name}_sum"),
            F.max(value).alias(f"load_{name}_max"),
            F.avg(value).alias(f"load_{name}_mean"),
        ]
    table = facts.groupBy(*KEYS).agg(
        F.when(span > 0, delivered / span).alias("throughput"),
        (F.max("finished") - F.min("started")).alias("end_to_end"),
        F.expr("percentile(latency, array(0.5, 0.99))").alias("latency"),
        delivered.alias("notifications"),
        F.max("expected_notifications").alias("expected_notifications"),
        (F.max("expected_notifications") - delivered).alias("missing"),
        F.coalesce(F.sum(F.col("copies") - 1), F.lit(0)).alias("duplicates"),
        F.when(F.count("publication") > 0, F.count("publication")).alias("publications"),
        F.max("events").alias("events"),
        F.max("subscriptions").alias("subscriptions"),
        F.max("peers").alias("peers"),
        *loads,
    )
    table = table.withColumn("latency_p50", F.col("latency")[0]).withColumn("latency_p99", F.col("latency")[1])
    return table.select(*KEYS, *METRICS, *sorted(c for c in table.columns if c.startswith("load_")))


def summarize(runs: "DataFrame", discard: int = 0) -> "DataFrame":
    """Average each metric over the runs of (scenario, algorithm, x) after the first `discard`."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if discard < 0:
        raise AggregateError(f"--discard must be ≥ 0, got {discard}")
    order = Window.partitionBy(*GROUP).orderBy("run")
    kept = runs.withColumn("_rank", F.dense_rank().over(order)).filter(F.col("_rank") > discard)
    metrics = [c for c in runs.columns if c not in KEYS]
    aggregates = [F.countDistinct("run").alias("runs")]
    for name in metrics:
        aggregates.append(F.avg(name).alias(name))
        if name in SPREAD:
            aggregates.append(F.stddev_samp(name).alias(f"{name}_std"))
    return kept.groupBy(*GROUP).agg(*aggregates).orderBy("scenario", "x", "algorithm")


def aggregate(
    spark: "SparkSession", paths: Sequence[str | Path], out: str | Path, *, discard: int = 0
) -> Outputs:
    """Read the logs under `paths`, write runs.csv, summary.csv, summary.md and plots to `out`."""
    from pyspark.sql import functions as F

    records = read_logs(spark, paths).cache()
    try:
        malformed = records.filter(F.col("_corrupt_record").isNotNull()).count()
        valid = records.filter(
            F.col("_corrupt_record").isNull()
            & F.col("type").isin("publication", "notification", "peer", "run")
            & F.col("scenario").isNotNull() & F.col("algorithm").isNotNull()
            & F.col("x").isNotNull() & F.col("run").isNotNull()
        )
        per_run = run_metrics(valid).orderBy(*KEYS).cache()
        run_rows = [row.asDict() for row in per_run.collect()]
        if not run_rows:
            raise AggregateError(
                f"no log records under {', '.join(map(str, paths))}: expected *.jsonl files "
                "written with experiments.logs (see docs/experiments.md)"
            )
        summary_rows = [row.asDict() for row in summarize(per_run, discard).collect()]
        per_run.unpersist()
    finally:
        records.unpersist()
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    runs_csv = _write_csv(target / "runs.csv", run_rows)
    summary_csv = _write_csv(target / "summary.csv", summary_rows)
    summary_md = target / "summary.md"
    summary_md.write_text(markdown_table(summary_rows), encoding="utf-8")
    pngs = plots.plot_summary(summary_rows, target)
    kept = {(r["scenario"], r["algorithm"], r["x"]) for r in summary_rows}
    dropped = sorted(
        f"{s}/{a}/x={format_x(x)}" for s, a, x in {(r["scenario"], r["algorithm"], r["x"]) for r in run_rows} - kept
    )
    return Outputs(runs_csv, summary_csv, summary_md, pngs, summary_rows, malformed, dropped)


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else KEYS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(v) for k, v in row.items()})
    return path


def _csv_value(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return value


_HEADINGS = {
    "throughput": "throughput (CE/s)", "end_to_end": "end-to-end (s)",
    "latency_p50": "latency p50 (s)", "latency_p99": "latency p99 (s)",
}
_TABLE_COLUMNS = [
    "scenario", "algorithm", "x", "runs", "throughput", "throughput_std", "end_to_end",
    "latency_p50", "latency_p99", "notifications", "duplicates", "missing",
]


def markdown_table(rows: Iterable[dict[str, Any]]) -> str:
    """The headline columns of the summary as a Markdown table (load_* stay in the CSV)."""
    rows = list(rows)
    columns = [c for c in _TABLE_COLUMNS if any(c in row for row in rows)] or _TABLE_COLUMNS
    lines = [
        "| " + " | ".join(_HEADINGS.get(c, c.replace("_", " ")) for c in columns) + " |",
        "|" + "|".join("---" if c in ("scenario", "algorithm") else "---:" for c in columns) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    return str(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.spark.aggregate",
        description="Aggregate experiment JSON-lines logs into summary.csv, summary.md and Fig. 2-style plots.",
    )
    parser.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="directories (or files) of *.jsonl logs")
    parser.add_argument("--out", required=True, help="directory for summary.csv, summary.md, runs.csv and PNGs")
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master (default %(default)s)")
    parser.add_argument(
        "--driver-memory", default="512m", help="driver heap, in local mode the tasks' too (default %(default)s)"
    )
    parser.add_argument("--discard", type=int, default=0, help="warm-up runs to drop per point (paper: 1)")
    args = parser.parse_args(argv)
    if args.discard < 0:
        parser.error("--discard must be ≥ 0")
    missing = [d for d in args.logdirs if not Path(d).exists()]
    if missing:
        parser.error(f"no such log directory: {', '.join(missing)} (give the --out of a scenario run)")
    started = time.monotonic()
    spark = session("eventcloud-aggregate", args.master, driver_memory=args.driver_memory)
    try:
        outputs = aggregate(spark, args.logdirs, args.out, discard=args.discard)
    except AggregateError as error:
        print(f"aggregate: {error}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    if outputs.malformed:
        print(f"aggregate: skipped {outputs.malformed} malformed log lines", file=sys.stderr)
    if outputs.dropped:
        print(
            f"aggregate: --discard {args.discard} left no run for {', '.join(outputs.dropped)}; "
            "run more repetitions or lower --discard",
            file=sys.stderr,
        )
    print(markdown_table(outputs.summary), end="")
    print(
        f"wrote {outputs.summary_csv}, {outputs.summary_md}, {outputs.runs_csv} and "
        f"{len(outputs.plots)} plots in {time.monotonic() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
