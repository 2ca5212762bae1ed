"""Status totals count each event and each subscription once, though an event's quads and a
subscription are held by several peers (the dashboard showed 6,016 events where COUNT(DISTINCT
?g) gave 4,392, and 45 subscriptions for 15)."""

from __future__ import annotations

from eventcloud.testing import open_overlay
from eventcloud.web.status import status_json
from tests.helpers import spread_events


async def test_totals_count_each_event_and_subscription_once(autojump_clock):
    async with open_overlay(6) as overlay:
        async with overlay.client() as client:
            events = spread_events(40, "totals")
            for event in events:
                await client.publish(event)
            texts = [f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s ?p{i} ?o }} }}" for i in range(12)]
            await client.subscribe_many(texts, kind="signal")
            status = await client.status()
            assert sum(p.events for p in status.peers) > 40            # held: an event on several peers
            assert sum(p.subscriptions for p in status.peers) > 12     # stored on every peer of its box
            assert sum(p.events_claimed for p in status.peers) == 40
            assert sum(p.subscriptions_homed for p in status.peers) == 12
            totals = status_json(status, {})["totals"]
            assert totals["events"] == 40 and totals["subscriptions"] == 12
            await client.delete(events[0].graph)
            status = await client.status()
            assert sum(p.events_claimed for p in status.peers) == 39
