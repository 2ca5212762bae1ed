"""Publication decisions: what makes a compound event visible whole or not at all.

Publishing is a two-phase commit whose coordinator is the entry peer:

1. *prepare*: the event's quads are stored at their owners as **pending** (durably, with the
   attempt's key `entry-id:t_P` and the point where its decision will be kept, a point of
   the entry's zone); pending quads are invisible to queries and not matched;
2. *decide*: the entry writes `commit` for the attempt, durably, at that point (if phase 1
   failed, `abort`); the first decision for a key stands;
3. *commit*: the entry tells the owners, which make the quads visible and match the event.

Whoever meets a pending event can learn its fate here (`resolve`): queries count a pending
event as visible iff its decision is `commit` (so two readers never disagree on an event's
visibility, even while commit messages travel), and an owner left with a pending event
(the entry died, a commit message was lost) resolves it in the background: committed, it
commits; aborted, or unknown for too long (then recorded as aborted, so a late commit
cannot happen), it drops it.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import partial
from typing import Any

from eventcloud.errors import BadRequest, EventCloudError
from eventcloud.wire.codec import point_from_wire, point_to_wire
from eventcloud.wire.messages import Resolve
from eventcloud.wire.ops import Op
from peers.net import Router
from peers.store import AsyncStore, EventInfo, PeerState, decide
from peers.tasks import gather

log = logging.getLogger(__name__)

__all__ = ["Commits", "COMMIT", "ABORT", "UNKNOWN"]

COMMIT, ABORT, UNKNOWN = "commit", "abort", "unknown"

#: Attempts asked about in one `resolve` request at most.
RESOLVE_BATCH = 512


class Commits:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, counters: Counter[str]) -> None:
        self.state = state
        self.router = router
        self.store = store
        self.counters = counters

    def routed(self) -> dict[Op, Any]:
        return {Op.RESOLVE: self._local_resolve}

    def attempt(self, published: int) -> tuple[str, list[str]]:
        """(key, decision point) of a publication attempt entered here at time `published`."""
        corner = tuple(lo for lo, _ in self.state.zone.bounds)
        return f"{self.state.id}:{published}", point_to_wire(corner)  # type: ignore[arg-type]

    async def decide(self, attempts: list[tuple[str, list[str]]], decision: str) -> list[str]:
        """Record decisions durably here; the decision that stands for each (an earlier one wins)."""
        return await self.store.write([decide(key, decision, point) for key, point in attempts])

    async def _local_resolve(self, body: Resolve) -> list[str]:
        if len(body.keys) > RESOLVE_BATCH:
            raise BadRequest(f"resolve: {len(body.keys)} keys, at most {RESOLVE_BATCH} per request")
        answers = [self.store.sync.decision(key) for key in body.keys]
        unknown = [key for key, known in zip(body.keys, answers) if known is None]
        if unknown and body.abort_if_unknown:
            # Nobody decided them in all this time: decide abort, so that a late commit cannot happen.
            point = point_to_wire(tuple(lo for lo, _ in self.state.zone.bounds))  # type: ignore[arg-type]
            stood = dict(zip(unknown, await self.store.write([decide(key, ABORT, point) for key in unknown])))
            self.counters["attempts_aborted_by_resolution"] += len(unknown)
            log.info("peer %s: %d attempts nobody decided in time recorded as aborted: %s", self.state.id,
                     len(unknown), ", ".join(unknown[:5]))
            answers = [known or stood[key] for key, known in zip(body.keys, answers)]
        return [known or UNKNOWN for known in answers]

    async def resolve_many(self, infos: list[EventInfo], *, abort_if_unknown: bool = False) -> list[str]:
        """The decisions on pending events, in order: commit if any of an event's attempts was
        decided commit, abort if all were decided abort, else unknown (also when the peer keeping
        a decision cannot be reached). One request per peer keeping some (per decision point,
        `RESOLVE_BATCH` keys at most), all at once."""
        answers = [COMMIT if info.committed else UNKNOWN for info in infos]
        asks: dict[tuple[str, ...], list[tuple[int, str]]] = {}
        for i, info in enumerate(infos):
            if info.tx and not info.committed:
                for key, point in info.tx:
                    asks.setdefault(tuple(point), []).append((i, key))
        decided: dict[tuple[int, str], str] = {}

        async def ask(point: tuple[str, ...], asked: list[tuple[int, str]]) -> None:
            keys = tuple(key for _, key in asked)
            try:
                result = await self.router.route(point_from_wire(list(point)), Op.RESOLVE,
                                                 Resolve(keys, abort_if_unknown))
            except EventCloudError as exc:
                log.info("peer %s: cannot resolve %d attempts yet: %s", self.state.id, len(keys), exc)
                return
            if not isinstance(result, list) or len(result) != len(keys):
                return
            for pair, decision in zip(asked, result):
                if decision in (COMMIT, ABORT):
                    decided[pair] = decision

        steps = [partial(ask, point, asked[at:at + RESOLVE_BATCH])
                 for point, asked in asks.items() for at in range(0, len(asked), RESOLVE_BATCH)]
        if steps:
            await gather(steps)
        for i, info in enumerate(infos):
            if info.tx and not info.committed:
                found = [decided.get((i, key), UNKNOWN) for key, _ in info.tx]
                answers[i] = COMMIT if COMMIT in found else ABORT if all(d == ABORT for d in found) else UNKNOWN
        return answers
