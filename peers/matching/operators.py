"""Operator calls on a peer: evaluated once per event, off the event loop when expensive.

Which operators a peer has is peers/matching/operator_loading.py. Evaluating (`OperatorRunner`): matching is pure and synchronous; an operator call it cannot
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

import logging
import time
from collections import Counter, OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, Callable, TypeVar

import trio

from eventcloud.matching.residual import EventMatch
from eventcloud.matching.statistics import Statistics
from eventcloud.sparql.filters.operators import (
    FAILED, CallTable, NeedCall, Operator, OperatorSet, active, python_args, to_expression_value,
)
from eventcloud.sparql.filters.values import ExprError

log = logging.getLogger(__name__)

__all__ = ["OperatorRunner"]
TABLES = 4096   # events whose call results a peer keeps
POLL = 0.001    # seconds between looks at a call running in the pool
T = TypeVar("T")


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
