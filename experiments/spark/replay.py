"""Spark job: replay a workload into a running overlay from Spark tasks.

    python experiments/spark/replay.py runs/wl --peer 127.0.0.1:7000 [--rate 500] [--partitions 4]

The workload is a directory written by experiments.workloads, an N-Quads file, or a Parquet file
of rows (graph, subject, predicate, object) whose terms are in N-Triples syntax. Quads are
partitioned by graph, so a compound event is never split across tasks; each task rebuilds its
events (quads in file order, events in order of first appearance), opens ONE SDK connection and
publishes them, at rate/partitions events per second when --rate is given. Each task returns
(events, quads, errors, seconds); the driver adds them up and prints the summary, and with --log
writes one `publication` record per event in the experiments.logs schema.

Publishing the same graph again is a retry for EventCloud, so a Spark task retry is harmless.
On a cluster (--master spark://…) the source path must be readable by every worker, and the
workers' Python needs the eventcloud package (install it, or ship it with --py-files).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from eventcloud.rdf.model import IRI, CompoundEvent, Term, make_quad, skolem_iri, term_from_n3  # noqa: E402
from experiments import logs  # noqa: E402
from experiments.spark import DEFAULT_MASTER, session  # noqa: E402

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import SparkSession

#: (graph, (split, position, subject, predicate, object)): a quad keyed by its event, with its
#: place in the source so that each event's quads keep their order after the shuffle.
KeyedQuad = tuple[str, tuple[int, int, str, str, str]]
COLUMNS = ("graph", "subject", "predicate", "object")
_MAX_MESSAGES = 5


class ReplayError(RuntimeError):
    """A workload that cannot be read or replayed."""


@dataclass
class Stats:
    """What one task (or, merged, the whole job) did; seconds is the slowest task's."""

    events: int = 0
    quads: int = 0
    errors: int = 0
    seconds: float = 0.0
    partitions: int = 1
    messages: list[str] = field(default_factory=list)

    def merge(self, other: "Stats") -> "Stats":
        return Stats(
            events=self.events + other.events,
            quads=self.quads + other.quads,
            errors=self.errors + other.errors,
            seconds=max(self.seconds, other.seconds),
            partitions=self.partitions + other.partitions,
            messages=(self.messages + [m for m in other.messages if m not in self.messages])[:_MAX_MESSAGES],
        )

    def note(self, error: BaseException) -> None:
        text = f"{type(error).__name__}: {error}"
        if text not in self.messages and len(self.messages) < _MAX_MESSAGES:
            self.messages.append(text)


def total(parts: Iterable[Stats]) -> Stats:
    """The driver-side sum of the tasks' stats."""
    result = Stats(partitions=0)
    for part in parts:
        result = result.merge(part)
    return result


def partition_rate(rate: float | None, partitions: int) -> float | None:
    """Events per second each task may publish so that all tasks together publish `rate`."""
    if rate is None:
        return None
    if rate <= 0 or partitions < 1:
        raise ReplayError(f"--rate must be > 0 and partitions ≥ 1 (got rate={rate}, partitions={partitions})")
    return rate / partitions


def due(index: int, rate: float | None) -> float:
    """Seconds after the task's start at which its `index`-th event may be published."""
    return 0.0 if rate is None else index / rate


def graph_partition(graph: str) -> int:
    """A hash of the graph that is stable across processes (unlike hash() of a str)."""
    return zlib.crc32(graph.encode("utf-8"))


# --- reading ------------------------------------------------------------------------------


def source_kind(source: str | Path) -> tuple[str, Path]:
    """("nquads" | "parquet", path) for a workload directory, an .nq file or a Parquet file."""
    path = Path(source)
    if not path.exists():
        raise ReplayError(f"{path} does not exist: give a workload directory, an .nq file or a Parquet file")
    if path.is_dir() and (path / "events.nq").is_file():
        return "nquads", path / "events.nq"
    if path.suffix == ".parquet" or (path.is_dir() and any(path.glob("*.parquet"))):
        return "parquet", path
    if path.is_file() and path.suffix in (".nq", ".nquads"):
        return "nquads", path
    raise ReplayError(
        f"{path} is neither a workload directory (with events.nq), an .nq file nor Parquet; "
        "write one with `python -m experiments.workloads --out DIR`"
    )


def load_quads(spark: "SparkSession", source: str | Path, partitions: int) -> "RDD[KeyedQuad]":
    """The source's quads keyed by graph, in `partitions` partitions holding whole events."""
    kind, path = source_kind(source)
    if kind == "nquads":
        lines = spark.sparkContext.textFile(str(path.resolve()), minPartitions=partitions)
        keyed = lines.mapPartitionsWithIndex(_parse_nquads)
    else:
        frame = spark.read.parquet(str(path.resolve()))
        absent = [c for c in COLUMNS if c not in frame.columns]
        if absent:
            raise ReplayError(
                f"{path} lacks column(s) {', '.join(absent)}: expected {', '.join(COLUMNS)} "
                "as N-Triples terms"
            )
        keyed = frame.select(*COLUMNS).rdd.mapPartitionsWithIndex(_keyed_rows)
    return keyed.partitionBy(partitions, graph_partition)


def _parse_nquads(split: int, lines: Iterator[str]) -> Iterator[KeyedQuad]:
    import pyoxigraph as ox

    text = "\n".join(lines).encode("utf-8")
    for position, quad in enumerate(ox.parse(text, format=ox.RdfFormat.N_QUADS)):
        if not isinstance(quad.graph_name, ox.NamedNode):
            raise ReplayError(f"quad {quad} is in the default graph, so it belongs to no compound event")
        graph = str(quad.graph_name)
        yield graph, (split, position, str(quad.subject), str(quad.predicate), str(quad.object))


def _keyed_rows(split: int, rows: Iterator[Any]) -> Iterator[KeyedQuad]:
    for position, row in enumerate(rows):
        yield row[0], (split, position, row[1], row[2], row[3])


def partition_events(items: Iterable[KeyedQuad]) -> list[CompoundEvent]:
    """Group one partition's quads into compound events, restoring the source order."""
    grouped: dict[str, list[tuple[int, int, str, str, str]]] = {}
    for graph, quad in items:
        grouped.setdefault(graph, []).append(quad)
    events: list[tuple[tuple[int, int], CompoundEvent]] = []
    for graph_text, quads in grouped.items():
        quads.sort(key=lambda q: (q[0], q[1]))
        graph = term_from_n3(graph_text)
        if not isinstance(graph, IRI):
            raise ReplayError(f"graph {graph_text} is not an IRI")
        built = tuple(
            make_quad(graph, _term(graph, s), _term(graph, p), _term(graph, o)) for _, _, s, p, o in quads
        )
        events.append(((quads[0][0], quads[0][1]), CompoundEvent(graph, built)))
    events.sort(key=lambda pair: pair[0])
    return [event for _, event in events]


def _term(graph: IRI, text: str) -> Term:
    """An N-Triples term; blank nodes become the event's skolem IRIs, as the SDK does."""
    if text.startswith("_:"):
        return skolem_iri(graph, text[2:])
    return term_from_n3(text)


# --- publishing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Publisher:
    """The task body: publish one partition's events over one connection (picklable)."""

    peer: str
    rate: float | None
    record: bool

    def __call__(self, items: Iterator[KeyedQuad]) -> Iterator[tuple[Stats, list[tuple[str, float]]]]:
        import trio

        events = partition_events(items)
        if not events:
            yield Stats(), []
            return
        yield trio.run(publish_events, self.peer, events, self.rate, self.record)


async def publish_events(
    peer: str, events: Sequence[CompoundEvent], rate: float | None, record: bool
) -> tuple[Stats, list[tuple[str, float]]]:
    """Publish `events` in order through one connection, at most `rate` per second."""
    import trio

    from eventcloud.client import ClientError, connect

    stats = Stats()
    published: list[tuple[str, float]] = []
    started = trio.current_time()
    try:
        async with connect(peer) as client:
            for index, event in enumerate(events):
                if rate is not None:
                    await trio.sleep_until(started + due(index, rate))
                try:
                    await client.publish(event)
                except ClientError as error:
                    stats.errors += 1
                    stats.note(error)
                    continue
                stats.events += 1
                stats.quads += len(event)
                if record:
                    published.append((event.graph.value, time.time()))
    except (ClientError, OSError) as error:
        stats.note(error)
        stats.errors = len(events) - stats.events
    stats.seconds = trio.current_time() - started
    return stats, published


def replay(
    spark: "SparkSession",
    source: str | Path,
    peer: str,
    *,
    rate: float | None = None,
    partitions: int | None = None,
    log: str | Path | None = None,
    scenario: str = "replay",
    x: int | float | None = None,
    run: int = 0,
    algorithm: str = "unknown",
) -> Stats:
    """Publish the workload at `source` into the overlay entered at `peer`; return the totals.

    With `log`, append a publication record per published event to that file, keyed by
    (scenario, x, run, algorithm); x defaults to the number of events published.
    """
    parts = partitions or spark.sparkContext.defaultParallelism
    publisher = Publisher(peer, partition_rate(rate, parts), log is not None)
    from pyspark.errors import PythonException

    try:
        results = load_quads(spark, source, parts).mapPartitions(publisher).collect()
    except PythonException as error:  # a task raised: say what, without the JVM's stack
        lines = [line for line in str(error).splitlines() if line.strip()]
        cause = next((line for line in reversed(lines) if "Error" in line or "Exception" in line), lines[-1])
        raise ReplayError(f"a replay task failed on {source}: {cause.strip()}") from None
    stats = total(s for s, _ in results)
    if log is not None:
        key = logs.RunKey(scenario, stats.events if x is None else x, run, algorithm)
        with logs.LogWriter(log) as writer:
            for _, published in results:
                for graph, when in published:
                    writer.write(logs.publication(key, graph, when))
    return stats


def _number(text: str) -> int | float:
    """--x as written: 3000 stays an int, so log records and directory names agree."""
    value = float(text)
    return int(value) if value.is_integer() else value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.spark.replay",
        description="Replay a workload (directory, .nq or Parquet) into a running EventCloud overlay.",
    )
    parser.add_argument("workload", metavar="WORKLOAD", help="workload directory, .nq file or Parquet file")
    parser.add_argument("--peer", required=True, metavar="HOST:PORT", help="entry peer of the overlay")
    parser.add_argument("--rate", type=float, help="total events per second (default: as fast as possible)")
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master (default %(default)s)")
    parser.add_argument(
        "--driver-memory", default="512m", help="driver heap, in local mode the tasks' too (default %(default)s)"
    )
    parser.add_argument("--partitions", type=int, help="tasks, hence connections (default: Spark's parallelism)")
    parser.add_argument("--log", metavar="FILE", help="write publication records (experiments.logs) here")
    parser.add_argument("--scenario", default="replay", help="scenario name in the log records")
    parser.add_argument("--x", type=_number, help="x value in the log records (default: events published)")
    parser.add_argument("--run", type=int, default=0, help="run number in the log records")
    parser.add_argument("--algorithm", default="unknown", help="algorithm name in the log records")
    args = parser.parse_args(argv)
    host, _, port = args.peer.rpartition(":")
    if not host or not port.isdigit():
        parser.error(f"--peer must be HOST:PORT (the address `eventcloud cluster` prints), got {args.peer!r}")
    if args.rate is not None and args.rate <= 0:
        parser.error("--rate must be > 0 events per second")
    if args.partitions is not None and args.partitions < 1:
        parser.error("--partitions must be ≥ 1")
    try:
        source_kind(args.workload)
    except ReplayError as error:
        parser.error(str(error))
    try:
        importlib.import_module("eventcloud.client")
    except ImportError as error:
        parser.error(f"the EventCloud SDK (eventcloud.client) is not importable here: {error}")
    started = time.monotonic()
    spark = session("eventcloud-replay", args.master, driver_memory=args.driver_memory)
    try:
        stats = replay(
            spark, args.workload, args.peer, rate=args.rate, partitions=args.partitions, log=args.log,
            scenario=args.scenario, x=args.x, run=args.run, algorithm=args.algorithm,
        )
    except ReplayError as error:
        print(f"replay: {error}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    wall = time.monotonic() - started
    print(
        f"replayed {stats.events} events ({stats.quads} quads) over {stats.partitions} partitions: "
        f"slowest task {stats.seconds:.2f} s, {stats.events / stats.seconds if stats.seconds else 0:.1f} "
        f"events/s, {stats.errors} errors; {wall:.1f} s with Spark start-up"
    )
    for message in stats.messages:
        print(f"  error: {message}", file=sys.stderr)
    if stats.errors:
        print(f"replay: {stats.errors} events were not published; is the overlay at {args.peer} up?",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
