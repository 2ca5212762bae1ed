"""What the matching benchmarks share: percentiles, timing an index on events, its memory, the naive baseline.

Times are wall-clock on one core, per event, with the garbage collector paused while timing
(as the other matching measurements). Memory is the tracemalloc delta of building an index,
the subscriptions themselves (held by a peer anyway) not counted. The naive baseline evaluates
every stored subscription separately with the exact evaluator (`matching.reference.matches`):
what a peer without a shared index does, and the ground truth the index must equal.
"""

from __future__ import annotations

import gc
import math
import subprocess
import time
import tracemalloc
from typing import Callable, Iterable, Sequence

from eventcloud.matching.index import SubscriptionIndex
from eventcloud.matching.reference import EventIndex, matches
from eventcloud.rdf.model import CompoundEvent
from eventcloud.sparql.subscription import Subscription

__all__ = ["percentile", "time_events", "time_interleaved", "memory_of", "index_memory", "baseline", "table",
           "stop_process"]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def time_events(index: SubscriptionIndex, events: Sequence[CompoundEvent], warm_up: int = 10,
                before: Callable[[], None] | None = None) -> tuple[list[float], list[list[str]]]:
    """Microseconds of `index.match_event` per event, and its answers (after a few warm-up events)."""
    return time_interleaved([index], events, warm_up, before)[0]


def time_interleaved(indexes: Sequence[SubscriptionIndex], events: Sequence[CompoundEvent], warm_up: int = 10,
                     before: Callable[[], None] | None = None) -> list[tuple[list[float], list[list[str]]]]:
    """`time_events` for several indexes, event by event in turn (so that they share the machine's moods)."""
    for event in events[:warm_up]:
        for index in indexes:
            index.match_event(event)
    results: list[tuple[list[float], list[list[str]]]] = [([], []) for _ in indexes]
    gc.collect()
    gc.disable()
    try:
        for event in events:
            for index, (times, answers) in zip(indexes, results):
                if before is not None:
                    before()
                started = time.perf_counter_ns()
                answer = index.match_event(event)
                times.append((time.perf_counter_ns() - started) / 1000)
                answers.append(answer)
    finally:
        gc.enable()
    return results


def memory_of(build: Callable[[], object]) -> tuple[int, object]:
    """Bytes allocated (and still held) by `build()`, and what it built."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        built = build()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, built
    finally:
        tracemalloc.stop()


def baseline(subs: Sequence[tuple[str, Subscription]], events: Iterable[CompoundEvent]
             ) -> tuple[list[float], list[list[str]]]:
    """Seconds per event evaluating every subscription separately, and the ids that match."""
    for _, sub in subs:
        sub.plan  # join plans are made on first use: make them before timing
    times, answers = [], []
    for event in events:
        started = time.perf_counter()
        shared = EventIndex(event)
        answers.append([ident for ident, sub in subs if matches(sub, shared)])
        times.append(time.perf_counter() - started)
    return times, answers


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table (numbers right-aligned)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def index_memory(subs: Sequence[tuple[str, Subscription]], sizes: Sequence[int], **options: object) -> dict[int, int]:
    """Bytes held by one index as it grows through `sizes` stored subscriptions (one tracemalloc run)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        index = SubscriptionIndex(**options)  # type: ignore[arg-type]
        held, done = {}, 0
        for n in sizes:
            for ident, sub in subs[done:n]:
                index.add(ident, sub)
            done = n
            gc.collect()
            held[n] = tracemalloc.get_traced_memory()[0] - base
        return held
    finally:
        tracemalloc.stop()


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it is still there after `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
