"""The overlay's class taxonomy (RDFS subclass edges for is-a constraints), held whole by every peer.

Is-a constraints (`?x rdf:type/rdfs:subClassOf* ex:C`, the is-a FILTER functions) are decided
on whichever peer matches, so every peer holds the whole taxonomy: a handful of edges for any
real vocabulary, so a copy per peer is the replication (losing any set of peers loses nothing
while one holds it).

* **Versions.** `schema_load` (an admin operation where the overlay has a token) asks every
  peer for its version, stamps the new taxonomy with one above all of them and above the entry
  peer's hybrid clock, and sends it to every peer. Two loads racing are ordered by (version,
  digest), so every peer ends with the same one.
* **Atomic on a peer.** A peer writes a newer version to `schema.json` in its data directory
  (fsynced, replaced whole) and then, in one step of the event loop, swaps its subscriptions'
  index to it: the subscriptions that read the taxonomy are re-bound, nothing is re-parsed,
  and an event is matched wholly with the old taxonomy or wholly with the new one on that
  peer. Peers switch one after the other: during a load, an event matched on two peers (a
  CSMA chain) may meet both versions.
* **Catching up.** A peer that missed a load (down, unreachable, restored from a replica) gets
  it from a neighbour: each peer asks one random neighbour every `sync_every` seconds, and at
  once after joining (from the peer it joined through) or restarting. The version is in
  `schema` (`eventcloud schema show`), per peer.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from eventcloud.errors import EventCloudError
from eventcloud.net.rpc import RpcConnection
from eventcloud.sparql.taxonomy import Taxonomy, TaxonomyError
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Empty, PeerSchema, SchemaInfo, SchemaLoad, SchemaNewer, SchemaOffer
from eventcloud.wire.ops import Op
from peers.net import Router
from peers.store import Offload, PeerState, write_atomically
from peers.matching.registry import Subscriptions

__all__ = ["Schema", "load_taxonomy"]

log = logging.getLogger(__name__)
FILE = "schema.json"


def load_taxonomy(data_dir: Path | None) -> Taxonomy | None:
    """The taxonomy saved in `data_dir` (None: none saved); an unreadable file is reported, not fatal:
    the peer gets the taxonomy again from a neighbour."""
    if data_dir is None or not (data_dir / FILE).exists():
        return None
    try:
        return Taxonomy.from_wire(json.loads((data_dir / FILE).read_text()))
    except (OSError, ValueError, TaxonomyError) as exc:
        log.warning("the saved taxonomy %s is unreadable (%s); a neighbour's copy will replace it",
                    data_dir / FILE, exc)
        return None


def _newer(candidate: Taxonomy, current: Taxonomy) -> bool:
    return (candidate.version, candidate.digest) > (current.version, current.digest)


class Schema:
    def __init__(self, state: PeerState, router: Router, clock: HybridClock, subscriptions: Subscriptions,
                 counters: Counter[str], *, data_dir: Path | None, offload: Offload, sync_every: float,
                 rng: random.Random) -> None:
        self.state = state
        self.router = router
        self.clock = clock
        self.subscriptions = subscriptions
        self.counters = counters
        self.data_dir = data_dir
        self.offload = offload
        self.sync_every = sync_every
        self.rng = rng
        self._lock = trio.Lock()   # one install at a time: the file and the index move together

    @property
    def taxonomy(self) -> Taxonomy:
        return self.subscriptions.taxonomy

    def handlers(self) -> dict[Op, Any]:
        return {Op.SCHEMA: self._on_schema, Op.SCHEMA_LOAD: self._on_load, Op.SCHEMA_FETCH: self._on_fetch}

    def routed(self) -> dict[Op, Any]:
        return {Op.SCHEMA_SET: self._local_set, Op.SCHEMA_LOCAL: self._local_info}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Ask a random neighbour for a newer taxonomy now and every `sync_every` seconds."""
        task_status.started()
        while True:
            neighbours = [n.address for n in self.state.neighbours.values()]
            if neighbours:
                await self.sync_from(self.rng.choice(neighbours))
            await trio.sleep(self.sync_every)

    async def sync_from(self, address: str) -> bool:
        """Take `address`'s taxonomy if it is newer; False if it is not or the peer did not answer."""
        try:
            offer = SchemaOffer.from_wire(await self.router.call(address, Op.SCHEMA_FETCH,
                                                                 SchemaNewer(self.taxonomy.version)), trusted=True)
        except EventCloudError as exc:
            log.debug("peer %s: no taxonomy from %s: %s", self.state.id, address, exc)
            return False
        if offer.taxonomy is None:
            return False
        installed = await self.install(offer.taxonomy)
        if installed:
            self.counters["schema_caught_up"] += 1
            log.info("peer %s: taxonomy version %d caught up from %s", self.state.id, offer.taxonomy.version, address)
        return installed

    async def install(self, taxonomy: Taxonomy) -> bool:
        """Use `taxonomy` from now on if it is newer than ours: saved first, then swapped in at once."""
        async with self._lock:
            if not _newer(taxonomy, self.taxonomy):
                return False
            if self.data_dir is not None:
                data = json.dumps(taxonomy.to_wire()).encode()
                await self.offload.run(write_atomically, self.data_dir / FILE, data)
            rebound = self.subscriptions.set_taxonomy(taxonomy)
            self.counters["schema_version"] = taxonomy.version
            self.counters["schema_rebound"] += len(rebound)
            return True

    # --- handlers -----------------------------------------------------------------------------------

    def _mine(self) -> PeerSchema:
        return PeerSchema(self.state.id, self.taxonomy.version, self.taxonomy.digest)

    async def _local_info(self, body: Empty) -> dict[str, Any]:
        return self._mine().to_wire()

    async def _local_set(self, body: SchemaLoad) -> dict[str, Any]:
        await self.install(body.taxonomy)
        return self._mine().to_wire()

    async def _on_fetch(self, conn: RpcConnection, body: SchemaNewer) -> SchemaOffer:
        mine = self.taxonomy
        return SchemaOffer(mine if mine.version > body.version else None)

    async def _everyone(self, op: Op, body: Any) -> tuple[list[PeerSchema], list[str]]:
        results, down = await self.router.multicast_partial(self.state.space.whole_space(), op, body)
        peers = sorted((PeerSchema.from_wire(r, trusted=True) for r in results), key=lambda p: p.id)
        return peers, sorted(ident for ident, _ in down)

    async def _on_schema(self, conn: RpcConnection, body: Empty) -> SchemaInfo:
        peers, down = await self._everyone(Op.SCHEMA_LOCAL, Empty())
        return SchemaInfo(self.taxonomy, tuple(peers), tuple(down))

    async def _on_load(self, conn: RpcConnection, body: SchemaLoad) -> SchemaInfo:
        peers, _ = await self._everyone(Op.SCHEMA_LOCAL, Empty())
        highest = max([p.version for p in peers] + [self.taxonomy.version])
        version = max(self.clock.now(), highest + 1)
        taxonomy = body.taxonomy.with_version(version)
        peers, down = await self._everyone(Op.SCHEMA_SET, SchemaLoad(taxonomy))
        self.counters["schema_loads"] += 1
        log.info("peer %s: taxonomy version %d (%d edges) loaded on %d peers, %d to catch up", self.state.id,
                 version, len(taxonomy.edges), len(peers), len(down))
        return SchemaInfo(taxonomy, tuple(peers), tuple(down))
