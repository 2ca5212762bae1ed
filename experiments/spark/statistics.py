"""Spark job: offline statistics for the evaluation order of expensive operators and subscription merging.

    python experiments/spark/statistics.py --history events.nq --subscriptions subs.txt \\
        [--operators MODULE ...] [--notifications runs/] --out statistics.json [--master spark://h:7077]

From the stored history (N-Quads, one compound event per named graph: what the overlay stores,
e.g. exported with `eventcloud find`) and the subscriptions (a file with one SPARQL text per
line, or a blank-line separated block per subscription), every task rebuilds a shared index of
the subscriptions (with the operators of the named modules) and, for each event of its
partition, evaluates *every* residual predicate of every candidate (not only those an order would
pick: the counts must not depend on the order), timing each operator call. The driver then
aggregates with DataFrame operations:

* per template (a FILTER conjunct up to variable names): evaluated, true — its selectivity;
* per operator IRI: calls, microseconds — its cost;
* from the notification logs (experiments.logs `notification` records, any number of JSON-lines
  files or directories): per pair of subscriptions, the events that notified both — co-matching.

The result is written in `eventcloud.matching.statistics` form; peers start from it with
`--statistics FILE` (PeerConfig.statistics_file), and experiments/operators_bench.py --part stats
shows Sub-Order with and without it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from eventcloud.matching.statistics import FORMAT  # noqa: E402
from experiments.spark import DEFAULT_MASTER, session  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["predicate_counts", "operator_costs", "comatching", "evaluate_partition", "read_subscriptions", "main"]


def read_subscriptions(path: str | Path) -> list[str]:
    """Subscription texts: blank-line separated blocks, or one per line when there is no blank line."""
    text = Path(path).read_text()
    blocks = [b.strip() for b in text.split("\n\n") if b.strip()]
    if len(blocks) == 1:
        blocks = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return blocks


def evaluate_partition(events: Iterable[Any], texts: list[str], modules: list[str]) -> Iterator[dict[str, Any]]:
    """In a task: every residual predicate of every candidate subscription on each event, and
    every operator call with its microseconds, as records ("template", text, value) / ("call", iri, µs)."""
    from eventcloud.matching.index import SubscriptionIndex
    from eventcloud.sparql.filters.operators import CallTable, active, call_operator
    from eventcloud.sparql.filters.values import ExprError
    from eventcloud.sparql.subscription import parse_subscription
    from peers.matching import load_operators

    operators = load_operators(modules, plugins=False)
    index = SubscriptionIndex(order="naive", containment=False)
    for i, text in enumerate(texts):
        index.add(f"s{i}", parse_subscription(text, operators=operators))
    calls: list[dict[str, Any]] = []

    def timed(op, values):
        started = time.perf_counter()
        try:
            return call_operator(op, values)
        except ExprError:
            raise
        finally:
            calls.append({"kind": "call", "name": op.iri, "value": None,
                          "micros": (time.perf_counter() - started) * 1e6})

    for event in events:
        table = CallTable(timed, lambda op: True)
        with active(table):
            found = index.match(event)
            keys = list(dict.fromkeys(k for owner in found.plan._owners.values()
                                      for clause in owner.clauses for k in (p.key for p in clause.preds)))
            for key in keys:
                yield {"kind": "template", "name": key[0].text, "value": bool(found.evaluate(key)), "micros": None}
        yield from calls
        calls.clear()


def predicate_counts(frame: "DataFrame", events: int = 0) -> dict[str, Any]:
    """A DataFrame of (template, value) rows -> the statistics document's `templates` part."""
    from pyspark.sql import functions as F

    rows = frame.groupBy("template").agg(F.count("*").alias("evaluated"),
                                         F.sum(F.col("value").cast("int")).alias("true")).collect()
    return {"format": FORMAT, "events": events,
            "templates": {r["template"]: {"evaluated": int(r["evaluated"]), "true": int(r["true"] or 0)} for r in rows}}


def operator_costs(frame: "DataFrame") -> dict[str, dict[str, float]]:
    """A DataFrame of (name, micros) call rows -> per operator: calls and total microseconds."""
    from pyspark.sql import functions as F

    rows = frame.groupBy("name").agg(F.count("*").alias("calls"), F.sum("micros").alias("micros")).collect()
    return {r["name"]: {"calls": int(r["calls"]), "micros": float(r["micros"] or 0.0)} for r in rows}


def comatching(notifications: "DataFrame") -> list[list[Any]]:
    """Notification records (subscription, event) -> [a, b, events notifying both], a < b."""
    from pyspark.sql import functions as F

    pairs = notifications.select("subscription", "event").distinct()
    left, right = pairs.alias("l"), pairs.alias("r")
    joined = left.join(right, (F.col("l.event") == F.col("r.event")) & (F.col("l.subscription") < F.col("r.subscription")))
    rows = joined.groupBy(F.col("l.subscription").alias("a"), F.col("r.subscription").alias("b")).count().collect()
    return sorted([r["a"], r["b"], int(r["count"])] for r in rows)


def _events_of(path: str) -> list[Any]:
    from eventcloud.rdf.files import read_events

    return list(read_events(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", required=True, help="N-Quads file of stored events")
    parser.add_argument("--subscriptions", required=True, help="file of subscription texts")
    parser.add_argument("--operators", action="append", default=[], metavar="MODULE")
    parser.add_argument("--notifications", action="append", default=[], metavar="PATH",
                        help="JSON-lines notification logs (files or directories; repeatable)")
    parser.add_argument("--out", required=True, help="statistics JSON to write")
    parser.add_argument("--master", default=DEFAULT_MASTER)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args(argv)

    texts = read_subscriptions(args.subscriptions)
    events = _events_of(args.history)
    spark = session("eventcloud-statistics", args.master)
    try:
        sc = spark.sparkContext
        shared_texts, modules = sc.broadcast(texts), sc.broadcast(list(args.operators))
        records = sc.parallelize(events, max(1, args.partitions)).mapPartitions(
            lambda part: evaluate_partition(part, shared_texts.value, modules.value))
        frame = spark.createDataFrame(records.map(lambda r: (r["kind"], r["name"], r["value"], r["micros"])),
                                      "kind string, name string, value boolean, micros double").cache()
        document = predicate_counts(frame.where("kind = 'template'").withColumnRenamed("name", "template"),
                                    events=len(events))
        document["operators"] = operator_costs(frame.where("kind = 'call'"))
        paths = [str(p) for root in args.notifications for p in
                 (Path(root).rglob("*.jsonl") if Path(root).is_dir() else [Path(root)])]
        if paths:
            logs = spark.read.json(paths).where("type = 'notification'")
            document["comatch"] = comatching(logs)
        else:
            document["comatch"] = []
    finally:
        spark.stop()
    Path(args.out).write_text(json.dumps(document, indent=1, sort_keys=True))
    print(f"statistics of {len(document['templates'])} predicate templates, {len(document['operators'])} operators "
          f"and {len(document['comatch'])} co-matching pairs over {len(events)} events -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
