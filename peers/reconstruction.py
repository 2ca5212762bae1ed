"""Completing a CSMA notification: the chain's last peer knows *that* an event matched, not its
bindings nor all its quads. Whoever delivers it (the entry peer, or a durable subscription's
home) gathers the event's quads (g, ?, ?, ?) until all `size` are there, then evaluates the
subscription on the whole event for the exact solutions."""

from __future__ import annotations

from collections import Counter

import trio

from eventcloud.matching.reference import MAX_SOLUTIONS, project, solutions
from eventcloud.rdf.model import IRI, CompoundEvent
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.messages import Notification
from peers.operators import OperatorRunner
from peers.queries import Queries
from peers.subscriptions import Stored

__all__ = ["reconstruct"]


async def reconstruct(queries: Queries, stored: Stored, graph: str, size: int, published: int, *,
                      deadline: float, counters: Counter[str], taxonomy: Taxonomy,
                      runner: OperatorRunner | None = None) -> Notification | None:
    """The complete notification; one carrying an error if the quads did not all appear within
    `deadline` seconds; None when the whole event does not match after all. Is-a tests read
    `taxonomy` (this peer's); operator calls go through `runner` (this peer's, once per event)."""
    give_up = trio.current_time() + deadline
    delay = 0.02
    while True:
        quads = await queries.find((IRI(graph), None, None, None))
        if len(quads) >= size or trio.current_time() > give_up:
            break
        await trio.sleep(delay)
        delay = min(delay * 2, 0.5)
    kind = stored.record.kind
    if len(quads) < size:
        counters["reconstruction_failures"] += 1
        return Notification(stored.id, graph, kind, published,
                            error=f"could not reconstruct event {graph}: {len(quads)} of {size} quads found "
                                  f"after {deadline:g} s")
    event = CompoundEvent(IRI(graph), tuple(quads))
    if kind == "bindings":
        sub = stored.sub.with_taxonomy(taxonomy)
        if runner is not None and sub.uses_operators:
            found = await runner.run(graph, lambda: solutions(sub, event, MAX_SOLUTIONS))
        else:
            found = solutions(sub, event, MAX_SOLUTIONS)
        if not found:
            counters["reconstruction_mismatch"] += 1
            return None
        return Notification(stored.id, graph, kind, published, solutions=tuple(project(sub, found)),
                            truncated=len(found) >= MAX_SOLUTIONS)
    return Notification(stored.id, graph, kind, published, quads=event.quads)
