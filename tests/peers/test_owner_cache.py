"""The entry peer's owner cache: publications go straight to the owners recent deliveries found,
and a stale or dead entry costs hops, never a misplaced quad or a lost publication."""

from __future__ import annotations

import pytest
import trio

from eventcloud.client import ClientError
from eventcloud.overlay import Zone
from eventcloud.testing import open_overlay
from peers.publish import OwnerCache
from tests.helpers import sample_events

FULL = 1 << 64


def zone(*bounds: tuple[int, int]) -> Zone:
    return Zone(tuple(bounds) + ((0, FULL),) * (4 - len(bounds)))


def test_it_answers_from_the_zones_reported_and_keeps_a_partition():
    cache = OwnerCache(limit=3)
    left, right = zone((0, 50)), zone((50, 100))
    cache.learn({"a:1": left, "b:1": right, "me:1": zone((100, 200))}, me="me:1")
    assert len(cache) == 2                                  # never itself
    assert cache.owner_of((10, 0, 0, 0)) == "a:1" and cache.owner_of((60, 0, 0, 0)) == "b:1"
    assert cache.owner_of((150, 0, 0, 0)) is None
    cache.learn({"c:1": zone((40, 60))}, me="me:1")         # overlaps both: they are stale
    assert cache.owner_of((10, 0, 0, 0)) is None and cache.owner_of((45, 0, 0, 0)) == "c:1"
    cache.learn({"d:1": zone((200, 210)), "e:1": zone((210, 220)), "f:1": zone((220, 230))}, me="me:1")
    assert len(cache) == 3 and cache.owner_of((45, 0, 0, 0)) is None   # the oldest went first
    cache.forget("f:1")
    assert cache.owner_of((225, 0, 0, 0)) is None


async def test_publications_go_straight_to_the_owners_once_known_and_survive_joins_and_a_death(autojump_clock):
    async with open_overlay(10, seed=5, replicas=1) as overlay:  # some owners are two hops away
        entry = overlay.peers[0]
        async with overlay.client(0) as client:
            events = sample_events(40)
            for event in events[:20]:
                await client.publish(event)
            assert len(entry.storage.owners) > 0
            hops_before = sum(p.counters["out:deliver"] for p in overlay.peers[1:])
            for event in events[:20]:                      # the same zones again: no peer forwards
                await client.publish(event)
            assert sum(p.counters["out:deliver"] for p in overlay.peers[1:]) == hops_before
            for _ in range(3):                              # zones split under the cache
                await overlay.add_peer()
            for event in events[20:]:
                await client.publish(event)
            assert await client.count() == sum(len(e) for e in events)
            for running in overlay.peers:                   # every quad at the owner of its point
                state = running.state
                for quad in running.storage.store.sync.find(None, None, None, None):
                    assert state.zone.contains(state.space.point(quad))
            # an owner the cache names dies: the others still publish, its zone fails clearly
            victim = next(p for p in overlay.peers[1:] if p.address in entry.storage.owners)
            victim.stop()
            await overlay.network.kill(victim.address)
            await trio.sleep(0.1)
            later = sample_events(60, source="after")
            touches = [any(victim.state.zone.contains(victim.state.space.point(q)) for q in e.quads) for e in later]
            await client.publish(later[touches.index(False)])
            with pytest.raises(ClientError, match="unreachable|unavailable"):
                await client.publish(later[touches.index(True)])
            assert victim.address not in entry.storage.owners     # forgotten
