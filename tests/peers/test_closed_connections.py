"""A disconnected client leaves nothing behind: its subscriptions are removed from every peer in
batches within seconds, retried until done (one multicast each, cut off after 5 s, left 7,020
of 8,000 behind for their whole lease), and a subscription its entry does not hold (a ghost:
the entry restarted, a removal lost) is dropped by the first peer that would notify it."""

from __future__ import annotations

import trio

from eventcloud.rdf.model import IRI, CompoundEvent, Literal, make_quad
from eventcloud.testing import open_overlay
from eventcloud.wire.messages import StoreSubscription, SubscriptionRecord
from eventcloud.wire.ops import Op
from eventcloud.wire.parsed import subscription_to_wire
from peers.matching import parse_cached

EX = "http://closed.example/"


async def test_a_closed_connections_subscriptions_are_gone_from_every_peer_within_seconds(autojump_clock):
    async with open_overlay(4) as overlay:
        texts = [f'SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p{i % 50}> "{i}" }} }}' for i in range(3000)]
        async with overlay.client(1) as client:
            for start in range(0, len(texts), 500):
                await client.subscribe_many(texts[start:start + 500], kind="signal")
            assert sum(len(p.subscriptions) for p in overlay.peers) >= 3000
        began = trio.current_time()
        with trio.fail_after(60):
            while sum(len(p.subscriptions) for p in overlay.peers):
                await trio.sleep(0.5)
        assert trio.current_time() - began < 30
        assert overlay.peers[1].counters["closed_subscriptions_removed"] == 3000


async def test_a_ghost_subscription_is_dropped_by_the_peer_that_would_notify_it(autojump_clock):
    async with open_overlay(3) as overlay:
        entry = overlay.peers[0]
        text = f'SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p> "ghost" }} }}'
        sub = parse_cached(text)
        record = SubscriptionRecord("ghost-1", text, "signal", entry.address, 1, parsed=subscription_to_wire(sub))
        # stored on the peers of its box as if its entry had taken it, though no client holds it there
        await entry.router.multicast(entry.state.space.pattern_box(sub.pattern_terms(0)), Op.STORE_SUB,
                                     StoreSubscription(record))
        assert any(p.subscriptions.get("ghost-1") for p in overlay.peers)
        g = IRI(f"{EX}g1")
        async with overlay.client(2) as client:
            await client.publish(CompoundEvent(g, (make_quad(g, IRI(f"{EX}s"), IRI(f"{EX}p"), Literal("ghost")),)))
            await trio.sleep(5)
        assert entry.counters["notifications_unknown_subscription"] == 1   # nothing was pushed to anyone
        assert sum(p.counters["ghost_subscriptions_dropped"] for p in overlay.peers) == 1
        notifier = [p for p in overlay.peers if p.counters["ghost_subscriptions_dropped"]][0]
        assert notifier.subscriptions.get("ghost-1") is None
