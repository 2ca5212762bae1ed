"""Operators on a peer: loading them, and evaluating their calls off the event loop, once per event.

Loading (`load_operators`): the `eventcloud.operators` entry-point group (installed plugins, each
naming an `Operator`, an iterable of them, or a callable returning either) and the modules or
`Operator` objects of `PeerConfig.operators` (a module exposes `OPERATORS`); a configured one
replaces a plugin's under the same IRI. A module that cannot be imported or holds no operators
is an `OperatorLoadError`: the peer does not start.

Evaluating (`OperatorRunner`): matching is pure and synchronous; an operator call it cannot
answer raises NeedCall (eventcloud.sparql.filters.operators). The runner keeps one CallTable per
event (LRU), so every path that evaluates a subscription on this peer for that event (the
index's residual plan, OSMA's decision, CSMA's steps, reconstruction at the entry) shares one
result per distinct (operator, arguments). Cheap operators (declared cost at most
`inline_cost` µs) run in place, timed; the others run in a pool of `threads` worker threads
(at most `threads` in flight: a CapacityLimiter), the calling task looking every POLL seconds
whether the call is done, for at most `budget` seconds of real time. Polling rather than
sleeping until a thread reports keeps the budget a real-time one and, under a test's autojumping
MockClock, keeps virtual time in step with real time while a call runs (`_finished`). A
call that raises, returns garbage or runs past its budget is recorded as failed: the FILTER is
false for that event and `operator_errors` / `operator_timeouts` count it. A call past its
budget is abandoned (Python cannot stop a thread): it keeps its pool thread until it returns,
so at most `threads` runaway calls exist, and further calls wait at most `budget` before
failing too — never a stalled peer. An inline operator that ran past its budget is moved off
the loop from then on.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import time
from collections import Counter, OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, Callable, Iterable, TypeVar

import trio

from eventcloud.errors import EventCloudError, OperatorMismatch
from eventcloud.matching.residual import EventMatch
from eventcloud.matching.statistics import Statistics
from eventcloud.sparql.filters.operators import (
    FAILED, NO_OPERATORS, CallTable, NeedCall, Operator, OperatorSet, active, python_args, to_expression_value,
)
from eventcloud.sparql.filters.values import ExprError

log = logging.getLogger(__name__)

__all__ = ["ENTRY_POINT_GROUP", "OperatorLoadError", "load_operators", "OperatorRunner", "check_same_operators"]

ENTRY_POINT_GROUP = "eventcloud.operators"
TABLES = 4096   # events whose call results a peer keeps
POLL = 0.001    # seconds between looks at a call running in the pool
T = TypeVar("T")


class OperatorLoadError(EventCloudError):
    """Operators named at peer start that cannot be loaded (a module missing or without OPERATORS)."""


def _as_operators(found: Any, origin: str) -> list[Operator]:
    if callable(found) and not isinstance(found, Operator):
        found = found()
    if isinstance(found, Operator):
        return [found]
    if isinstance(found, OperatorSet):
        return list(found.values())
    try:
        items = list(found)
    except TypeError:
        raise OperatorLoadError(f"{origin} gives {type(found).__name__}, not operators") from None
    if not all(isinstance(op, Operator) for op in items):
        raise OperatorLoadError(f"{origin} gives something that is not an Operator")
    return items


def load_operators(configured: Iterable[Any] = (), *, plugins: bool = True,
                   entry_points: Callable[[], Iterable[Any]] | None = None) -> OperatorSet:
    """The peer's operator set: installed plugins (if `plugins`), then `configured` (module names
    exposing OPERATORS, or Operator objects) replacing plugins' operators of the same IRI."""
    by_iri: dict[str, Operator] = {}
    if plugins:
        points = entry_points() if entry_points is not None else importlib.metadata.entry_points(
            group=ENTRY_POINT_GROUP)
        for point in points:
            try:
                loaded = point.load()
            except Exception as exc:
                raise OperatorLoadError(f"operator plugin {point.name} ({point.value}) cannot be loaded: {exc}") from None
            for op in _as_operators(loaded, f"operator plugin {point.name}"):
                by_iri[op.iri] = op
    mine: dict[str, Operator] = {}
    for item in configured:
        if isinstance(item, Operator):
            ops = [item]
        elif isinstance(item, str):
            try:
                module = importlib.import_module(item)
            except ImportError as exc:
                raise OperatorLoadError(f"operator module {item!r} cannot be imported: {exc}") from None
            if not hasattr(module, "OPERATORS"):
                raise OperatorLoadError(f"operator module {item!r} has no OPERATORS")
            ops = _as_operators(module.OPERATORS, f"operator module {item!r}")
        else:
            ops = _as_operators(item, f"operator entry {item!r}")
        for op in ops:
            if op.iri in mine and mine[op.iri] is not op:
                raise OperatorLoadError(f"two configured operators are registered under {op.iri}")
            mine[op.iri] = op
    by_iri.update(mine)
    return OperatorSet(by_iri.values()) if by_iri else NO_OPERATORS


def check_same_operators(mine: Iterable[str], overlay: Iterable[str], where: str) -> None:
    """Raise OperatorMismatch naming the differences if a joiner's operators are not the overlay's."""
    mine, overlay = set(mine), set(overlay)
    if mine == overlay:
        return
    missing, extra = tuple(sorted(overlay - mine)), tuple(sorted(mine - overlay))
    parts = []
    if missing:
        parts.append(f"the joining peer lacks the overlay's operator(s) {', '.join(missing)}")
    if extra:
        parts.append(f"the overlay lacks the joining peer's operator(s) {', '.join(extra)}")
    raise OperatorMismatch(f"cannot join through {where}: every peer of an overlay must have the same operators; "
                           + "; ".join(parts) + " (load them with --operators MODULE or as installed plugins)",
                           missing, extra)


def _invoke(op: Operator, values: tuple) -> tuple[bool, Any, float]:
    """(ok, value or error text, seconds): one call, in whatever thread runs it."""
    started = time.perf_counter()
    try:
        value = to_expression_value(op.function(*python_args(values)))
        return True, value, time.perf_counter() - started
    except Exception as exc:  # ExprError included: an operator's failure is its FILTER's error
        return False, f"{type(exc).__name__}: {exc}", time.perf_counter() - started


async def _finished(future: Future, deadline: float) -> bool:
    """Whether `future` finished before `deadline` (real time), looking every POLL seconds.

    Under a test's autojumping MockClock a `trio.sleep(POLL)` takes no real time, so polling
    alone would let the trio clock run far ahead of the thread (RPC deadlines and the test's own
    waits expiring while the call is still computing). When the trio clock is ahead of real time
    since the wait began, the loop waits on the call itself (GIL released) for the difference, so
    a call costs virtual time what it costs in real time. Under a real clock both clocks advance
    alike and that wait never happens."""
    real_start, trio_start = time.monotonic(), trio.current_time()
    while not future.done():
        if time.monotonic() > deadline:
            return False
        await trio.sleep(POLL)
        ahead = (trio.current_time() - trio_start) - (time.monotonic() - real_start)
        if ahead > POLL / 10:
            wait_futures([future], timeout=min(ahead, POLL))
    return True


class OperatorRunner:
    """Per-event call tables and the off-loop evaluation of expensive operator calls."""

    def __init__(self, operators: OperatorSet, counters: Counter[str], statistics: Statistics, *,
                 budget: float, threads: int, inline_cost: float) -> None:
        self.operators = operators
        self.counters = counters
        self.statistics = statistics
        self.budget = budget
        self.inline_cost = inline_cost
        self.limiter = trio.CapacityLimiter(threads)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="operator")
        self._tables: OrderedDict[str, CallTable] = OrderedDict()
        self._off_loop: set[str] = set()   # inline operators that overran: threads from now on
        self._inflight: dict[tuple[int, tuple], trio.Event] = {}  # calls running, by (table, call)

    def _inline(self, op: Operator) -> bool:
        return op.cost <= self.inline_cost and op.iri not in self._off_loop

    def table(self, graph: str) -> CallTable:
        """The call results of one event on this peer (shared by every evaluation of it here)."""
        found = self._tables.get(graph)
        if found is None:
            found = self._tables[graph] = CallTable(self._run_inline, self._inline)
            if len(self._tables) > TABLES:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(graph)
        return found

    def forget(self, graph: str) -> None:
        self._tables.pop(graph, None)

    def _outcome(self, op: Operator, ok: bool, value: Any, seconds: float) -> Any:
        self.counters["operator_calls"] += 1
        self.statistics.observe_call(op.iri, seconds * 1e6)
        if not ok:
            self.counters["operator_errors"] += 1
            log.debug("operator %s failed: %s", op.name, value)
            return FAILED
        return value

    def _run_inline(self, op: Operator, values: tuple) -> Any:
        ok, value, seconds = _invoke(op, values)
        if seconds > self.budget:
            self.counters["operator_timeouts"] += 1
            self._off_loop.add(op.iri)
            log.warning("operator %s ran %.3f s on the event loop (budget %.3f s): it runs in a thread from now on",
                        op.name, seconds, self.budget)
            self.statistics.observe_call(op.iri, seconds * 1e6)
            self.counters["operator_calls"] += 1
            return FAILED
        return self._outcome(op, ok, value, seconds)

    async def call(self, table: CallTable, need: NeedCall) -> None:
        """Evaluate one missing call in the pool and record its outcome in `table`."""
        op, values = need.op, need.values
        if need.key in table.results:
            return
        flight = (id(table), need.key)
        running = self._inflight.get(flight)
        if running is not None:  # another task of this peer asked for the same call: wait for its result
            await running.wait()
            return
        self._inflight[flight] = trio.Event()
        try:
            table.put(need.key, await self._evaluate_call(op, values))
        finally:
            self._inflight.pop(flight).set()

    async def _evaluate_call(self, op: Operator, values: tuple) -> Any:
        done: tuple[bool, Any, float] | None = None
        async with self.limiter:
            try:
                future = self._pool.submit(_invoke, op, values)
            except RuntimeError:  # the pool was shut down: the peer is stopping
                future = None
            if future is not None:
                if await _finished(future, time.monotonic() + self.budget):
                    done = future.result()
                else:
                    future.cancel()
        if done is None:
            self.counters["operator_calls"] += 1
            self.counters["operator_timeouts"] += 1
            self.statistics.observe_call(op.iri, self.budget * 1e6)
            log.info("operator %s ran past its budget of %.3f s: its FILTER is false for this event", op.name,
                     self.budget)
            return FAILED
        return self._outcome(op, *done)

    def close(self) -> None:
        """Stop the operator threads (calls still running are left to finish on their own)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def run(self, graph: str, step: Callable[[], T]) -> T:
        """Run a pure evaluation step for event `graph` with its call table; the calls it needs are
        evaluated (off the loop when expensive) and the step run again until it completes."""
        table = self.table(graph)
        while True:
            try:
                with active(table):
                    return step()
            except NeedCall as need:
                await self.call(table, need)

    async def settle(self, graph: str, found: EventMatch, direct: Callable[[Any], bool]) -> list[str]:
        """Drive an event's residual plan to its end; `direct(member)` evaluates one alone."""
        if not len(found.plan) and not found.direct:
            return found.result()
        table = self.table(graph)
        while (key := found.next()) is not None:
            found.record(key, await self._evaluate(table, found, key))
        for member in found.direct:
            found.settle(member, await self.run(graph, lambda: direct(member)))
        self.counters["predicate_evaluations"] += found.evaluations
        return found.result()

    async def _evaluate(self, table: CallTable, found: EventMatch, key: Any) -> bool:
        while True:
            try:
                with active(table):
                    return found.evaluate(key)
            except NeedCall as need:
                await self.call(table, need)
            except ExprError:  # not raised by a FILTER (errors make it false), but never fatal
                return False
