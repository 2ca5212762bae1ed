"""The JSON-lines log schema every experiment scenario writes, and small writers for it.

Why a fixed schema: scenarios run as separate processes (publisher, subscriber, peers), maybe
on several hosts, and the Spark aggregation (`experiments/spark/aggregate.py`) reads all their
files at once. Each process appends JSON objects, one per line, to its own file in the run's
directory::

    <out>/<scenario>/x=<value>/run=<r>/<name>.jsonl     e.g. runs/fig2a/x=25/run=3/osma-subscriber.jsonl

Every record carries the run key ``scenario`` (str, e.g. "fig2a"), ``x`` (the number on the
figure's x axis: peers, publications or subscriptions), ``run`` (int, 0-based; the aggregation
can discard the first D as warm-up) and ``algorithm`` ("csma", "osma", …), plus by ``type``:

``publication``   ``event`` (the event's graph IRI, without <>), ``time`` — wall clock (float
                  seconds since the epoch) when ``publish`` returned.
``notification``  ``subscription`` (the workload's subscription name, e.g. "s0"), ``event``,
                  ``time`` — wall clock when the application received it, ``published`` — the
                  publication time carried by the notification if the system reports one, else
                  absent/null (the aggregation then joins on the publication record of ``event``).
                  Write one record per notification received, duplicates included: the
                  aggregation counts them.
``peer``          ``peer`` (its id or address), ``counters`` (a flat object name → number, e.g.
                  {"quads": 1200, "messages_in": 5300}); one record per peer at the end of a run.
``run``           ``peers``, ``subscriptions``, ``events`` (counts), ``started``/``finished``
                  (wall clock around the measured part), ``expected_notifications``.

Times are wall clocks of possibly different hosts: run them with NTP, or derive latency only from
records written on one host. Scenario names starting "fig2a" … "fig2e" get the plot style of
that panel of the paper's Fig. 2 (see `experiments/plots.py`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

RECORD_TYPES = ("publication", "notification", "peer", "run")
KEY_FIELDS = ("scenario", "x", "run", "algorithm")
FIELDS: dict[str, tuple[str, ...]] = {
    "publication": ("event", "time"),
    "notification": ("subscription", "event", "time"),
    "peer": ("peer", "counters"),
    "run": ("peers", "subscriptions", "events", "started", "finished", "expected_notifications"),
}


class LogError(ValueError):
    """A record that does not follow the schema."""


@dataclass(frozen=True)
class RunKey:
    """Identifies one run of one algorithm at one point of one figure."""

    scenario: str
    x: int | float
    run: int
    algorithm: str

    def fields(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "x": self.x, "run": self.run, "algorithm": self.algorithm}

    def directory(self, out: str | Path) -> Path:
        return run_dir(out, self.scenario, self.x, self.run)


def format_x(x: int | float) -> str:
    """The x value as it appears in directory names: 3000 rather than 3000.0."""
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def run_dir(out: str | Path, scenario: str, x: int | float, run: int) -> Path:
    return Path(out) / scenario / f"x={format_x(x)}" / f"run={run}"


def publication(key: RunKey, event: str, time: float) -> dict[str, Any]:
    return {"type": "publication", **key.fields(), "event": event, "time": time}


def notification(
    key: RunKey, subscription: str, event: str, time: float, published: float | None = None
) -> dict[str, Any]:
    return {
        "type": "notification",
        **key.fields(),
        "subscription": subscription,
        "event": event,
        "time": time,
        "published": published,
    }


def peer(key: RunKey, peer_id: str, counters: Mapping[str, float]) -> dict[str, Any]:
    return {"type": "peer", **key.fields(), "peer": peer_id, "counters": dict(counters)}


def run(
    key: RunKey,
    *,
    peers: int,
    subscriptions: int,
    events: int,
    started: float,
    finished: float,
    expected_notifications: int,
) -> dict[str, Any]:
    return {
        "type": "run",
        **key.fields(),
        "peers": peers,
        "subscriptions": subscriptions,
        "events": events,
        "started": started,
        "finished": finished,
        "expected_notifications": expected_notifications,
    }


def validate(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return `record` if it follows the schema, else raise LogError saying what is wrong."""
    kind = record.get("type")
    if kind not in FIELDS:
        raise LogError(f"record type {kind!r} is not one of {', '.join(RECORD_TYPES)}: {record}")
    missing = [name for name in KEY_FIELDS + FIELDS[kind] if record.get(name) is None]
    if missing:
        raise LogError(f"{kind} record lacks {', '.join(missing)}: {record}")
    if not isinstance(record["x"], (int, float)) or isinstance(record["x"], bool):
        raise LogError(f"x must be a number (the figure's x axis), got {record['x']!r}")
    if not isinstance(record["run"], int):
        raise LogError(f"run must be an integer, got {record['run']!r}")
    for name in ("time", "published", "started", "finished"):
        value = record.get(name)
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
            raise LogError(f"{name} must be seconds as a finite number, got {value!r}")
    if kind == "peer" and not (
        isinstance(record["counters"], Mapping)
        and all(isinstance(v, (int, float)) for v in record["counters"].values())
    ):
        raise LogError(f"peer counters must be an object of numbers: {record['counters']}")
    return record


class LogWriter:
    """Appends validated records to one JSON-lines file (a context manager; not thread-safe).

    It appends, so that a process can reopen its file; delete a run's directory to redo the run.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")
        self.count = 0

    def write(self, record: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(validate(record), separators=(",", ":")) + "\n")
        self.count += 1

    def write_all(self, records: Iterator[Mapping[str, Any]] | list[Mapping[str, Any]]) -> None:
        for record in records:
            self.write(record)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "LogWriter":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def open_log(out: str | Path, key: RunKey, name: str) -> LogWriter:
    """The writer for `<out>/<scenario>/x=<x>/run=<r>/<name>.jsonl`, e.g. name="osma-subscriber"."""
    if not name or "/" in name:
        raise LogError(f"log name {name!r} must be a plain file name without extension")
    return LogWriter(key.directory(out) / f"{name}.jsonl")


def read_log(path: str | Path) -> Iterator[dict[str, Any]]:
    """Records of one file, validated; for small checks in Python (Spark reads the big ones)."""
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    yield dict(validate(json.loads(line)))
                except (json.JSONDecodeError, LogError) as error:
                    raise LogError(f"{path}:{number}: {error}") from None
