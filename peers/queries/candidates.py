"""A gathered query's candidate quads, fetched to the entry peer pattern by pattern.

A query that is one basic graph pattern (with OPTIONAL groups after it) is fetched as
`eventcloud.sparql.bind_joins` plans it: each pattern estimated at the peers first (no quads
move), the smallest required one fetched whole, the others bound to the values the earlier
ones found wherever that moves fewer quads, each OPTIONAL group after the required patterns.
Any other query fetches every pattern whole, as the candidates of its evaluation at the entry
peer.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from functools import partial
from typing import Awaitable, Callable, Sequence

import trio

from eventcloud.rdf.model import Quad
from eventcloud.sparql.bind_joins import LOOKUP_QUADS, BindPlanner, JoinShape, box_of
from eventcloud.sparql.query_plan import EVERYTHING, Pattern
from peers.tasks import gather

log = logging.getLogger(__name__)

__all__ = ["QueryCandidates", "LOOKUPS_PER_TREE"]

#: Patterns a query may have for its fetches to be planned (more: each fetched whole).
MAX_PLANNED = 32
#: Estimates (multicasts) one query asks for at once.
ESTIMATES_AT_ONCE = 8
#: Bound lookups carried by one multicast tree (over their boxes' hull; each peer runs those
#: meeting its zone).
LOOKUPS_PER_TREE = 256


class QueryCandidates:
    def __init__(self, find: Callable[[Pattern], Awaitable[list[Quad]]],
                 find_each: Callable[[list[Pattern]], Awaitable[list[list[Quad]]]],
                 count: Callable[[Pattern], Awaitable[int]], counters: Counter[str], *,
                 per_tree: int = LOOKUPS_PER_TREE, lookup_quads: int = LOOKUP_QUADS) -> None:
        self.find = find
        self.find_each = find_each
        self.count = count
        self.counters = counters
        self.per_tree = per_tree
        self.lookup_quads = lookup_quads   # what one lookup is worth in quads moved (bind_joins.LOOKUP_QUADS)

    async def gather(self, patterns: Sequence[Pattern], shape: JoinShape | None) -> set[Quad]:
        """The quads the query's evaluation needs: a `shape` (its required patterns and OPTIONAL
        groups, with variables) is planned as bind joins, the required patterns first, each
        group after them; without one, each of `patterns` is fetched whole."""
        gathered: set[Quad] = set()
        if shape is None or not 2 <= len(shape) <= MAX_PLANNED or any(box_of(p) == EVERYTHING for p in shape.patterns()):
            # (a pattern matching everything fetches it all once: the others are in it)
            for pattern in patterns:
                gathered.update(await self.find(pattern))
            return gathered
        limiter = trio.CapacityLimiter(ESTIMATES_AT_ONCE)

        async def estimate(pattern: Pattern) -> int:
            async with limiter:
                return await self.count(pattern)

        counts = await gather([partial(estimate, box_of(p)) for p in shape.patterns()])
        steps: list[str] = [f"counted {counts}"]
        required = BindPlanner(shape.required, counts[:len(shape.required)], lookup_quads=self.lookup_quads)
        await self._run(required, gathered, steps)
        at = len(shape.required)
        for group in shape.optional:
            planner = BindPlanner(group, counts[at:at + len(group)], lookup_quads=self.lookup_quads,
                                  known=required.known)
            at += len(group)
            steps.append("optional:")
            await self._run(planner, gathered, steps)
        log.info("a join's candidates: %s", "; ".join(steps))
        return gathered

    async def _run(self, planner: BindPlanner, gathered: set[Quad], steps: list[str]) -> None:
        """Fetch what `planner` says until it is done, adding to `gathered`."""
        while (step := planner.next()) is not None:
            began = time.perf_counter()
            if step.whole:
                found = await self.find(box_of(planner.patterns[step.index]))
            else:
                self.counters["sparql_patterns_bound"] += 1
                self.counters["sparql_bound_lookups"] += len(step.lookups)
                found = await self._lookups(list(step.lookups))
            planner.learn(step.index, found)
            gathered.update(found)
            steps.append(f"pattern {step.index} {'whole' if step.whole else f'bound ({len(step.lookups)} lookups)'}: "
                         f"{len(found)} quads in {time.perf_counter() - began:.3f} s")

    async def _lookups(self, lookups: list[Pattern]) -> list[Quad]:
        """The bound patterns' quads: `per_tree` lookups in each multicast tree, the trees one
        after another (a pattern bound to a thousand values is a thousand small boxes)."""
        found: list[Quad] = []
        for at in range(0, len(lookups), self.per_tree):
            for quads in await self.find_each(lookups[at:at + self.per_tree]):
                found.extend(quads)
        return found
