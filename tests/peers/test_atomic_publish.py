"""A compound event is visible whole or not at all, and matched only once it is decided."""

from __future__ import annotations

import pytest
import trio

from eventcloud.client import ClientError
from eventcloud.errors import ErrorCode
from eventcloud.testing import open_overlay
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, event_graph, make_quad
from peers.store import add
from tests.helpers import ALGORITHMS, EXO, sample_events

ACCEPT_ALL = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"


ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def spread_events(n: int, source: str) -> list[CompoundEvent]:
    """Events whose quads have subjects and predicates across the alphabet: they land on several peers."""
    events = []
    for i in range(n):
        g = event_graph(source, 1_000 + i, i)
        events.append(CompoundEvent(g, tuple(
            make_quad(g, IRI(f"{EXO}{ALNUM[(17 * j + i) % 62]}s"), IRI(f"{EXO}{ALNUM[(29 * j) % 62]}p"),
                      Literal(str(j), XSD + "integer")) for j in range(6))))
    return events


def owners_of(overlay, event):
    return {i for i, p in enumerate(overlay.peers)
            for q in event.quads if p.state.zone.contains(p.state.space.point(q))}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_a_publication_that_cannot_complete_is_invisible_and_never_notified(autojump_clock, algorithm):
    async with open_overlay(5, algorithm, seed=3, replicas=1) as overlay:  # no copy: the zone stays down
        async with overlay.client(0, "sub") as client:
            sub = await client.subscribe(ACCEPT_ALL, kind="signal")
            events = spread_events(60, "t")
            # a victim (not the entry) and an event with quads both there and elsewhere
            split, victim_index = next((e, i) for e in events for i in range(1, 5)
                                       if i in owners_of(overlay, e) and len(owners_of(overlay, e)) > 1)
            victim = overlay.peers[victim_index]
            alive = [p for i, p in enumerate(overlay.peers) if i != victim_index]
            victim.stop()
            await overlay.network.kill(victim.address)
            with pytest.raises(ClientError) as info:
                await client.publish(split)
            assert info.value.code in (ErrorCode.UNREACHABLE, ErrorCode.UNAVAILABLE)
            assert "nothing of it is visible" in info.value.message
            # nothing of it is visible (the live owners hold pending quads only)...
            pending = sum(p.storage.store.sync.pending_quads for p in alive)
            assert pending > 0
            for peer in alive:  # (a whole-overlay find cannot answer: the victim's zone is down, R = 1)
                assert await peer.queries._mine((split.graph, None, None, None)) == []
            # ... and the owners drop them once they learn the attempt was aborted
            await trio.sleep(10)
            assert sum(p.storage.store.sync.pending_quads for p in alive) == 0
            with trio.move_on_after(5):
                note = await sub.receive()
                raise AssertionError(f"notified of an event that was never acknowledged: {note}")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_owners_that_miss_the_commit_resolve_it_and_readers_see_it_whole_meanwhile(
        autojump_clock, algorithm, monkeypatch):
    async with open_overlay(5, algorithm, seed=4) as overlay:
        entry = overlay.peers[1]

        async def lost(owners, graphs):  # the entry decides, then its commit messages are lost
            return None

        monkeypatch.setattr(entry.storage, "_send_commits", lost)
        async with overlay.client(0, "sub") as subscriber, overlay.client(1, "pub") as publisher:
            sub = await subscriber.subscribe(ACCEPT_ALL, kind="signal")
            (event,) = spread_events(1, "lost")
            await publisher.publish(event)
            pending = sum(p.storage.store.sync.pending_quads for p in overlay.peers)
            assert len(owners_of(overlay, event)) > 1
            assert pending == 6  # every owner still holds it pending
            assert len(await publisher.find(event.graph)) == 6  # yet readers see it whole: it is decided
            assert await publisher.count() == 6
            with trio.fail_after(30):  # the owners resolve it, commit, match: one notification
                note = await sub.receive()
            assert note.event == event.graph.value
            await trio.sleep(entry.storage.resolve_after * 2)  # every owner resolves on its own round
            assert sum(p.storage.store.sync.pending_quads for p in overlay.peers) == 0
            with trio.move_on_after(10):
                extra = await sub.receive()
                raise AssertionError(f"a second notification {extra}")


async def test_a_pending_event_nobody_decided_is_aborted_after_a_while(autojump_clock):
    async with open_overlay(3, seed=5) as overlay:
        (event,) = sample_events(1, quads=4, source="orphan")
        owner = overlay.peers[2]
        corner = [format(lo, "x") for lo, _ in overlay.peers[0].state.zone.bounds]
        # a prepare whose entry never decided (it died): only the owner's resolver can end it
        await owner.storage.store.write([add(event.graph.value, event.quads, 4, owner.state.clock,
                                             committed=False, tx=(f"{overlay.peers[0].id}:1", corner))])
        async with overlay.client(0) as client:
            assert await client.find(event.graph) == []
            await trio.sleep(owner.storage.abort_after + 10)
            assert owner.storage.store.sync.pending_quads == 0
            assert overlay.peers[0].storage.store.sync.decision(f"{overlay.peers[0].id}:1") == "abort"
