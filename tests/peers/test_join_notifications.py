"""A join that splits a peer while events are still being matched there loses no notification.

Found by the chaos test (about one run in ten): an event committed at a peer just as a newcomer
split its zone was matched there *after* the zone shrank, so the peer skipped the quads it no
longer owned and marked the event notified; the newcomer then received that mark with the
quads, and nobody notified for them. The handed-over states are now read before the zone
changes. This test makes the interleaving happen every time: every match at the split peer
waits until its zone has shrunk.
"""

from __future__ import annotations

import trio

from eventcloud.rdf.model import IRI, CompoundEvent, Literal, event_graph, make_quad
from eventcloud.testing import open_overlay

EX = "http://example.org/join/"
QUERY = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}value> ?v }} }}"


def reading(i: int) -> CompoundEvent:
    g = event_graph("split", i, i)
    # subjects spread over the alphabet, so a split of the busiest zone moves some of them
    return CompoundEvent(g, (make_quad(g, IRI(f"{EX}{'abcdefghijklmnopqrstuvwxyz'[i % 26]}{i}"), IRI(f"{EX}value"),
                                       Literal(str(i))),))


def hold_matching_until_the_zone_shrinks(peers) -> list[int]:
    """Every match at these peers waits until one of them has shrunk its zone for a join (its
    state is persisted after the zone changed); then all of them run. The list holds one entry
    per match waiting."""
    gate = trio.Event()
    waiting: list[int] = []
    for peer in peers:
        match = peer.matcher._match

        async def held(work, match=match):
            waiting.append(1)
            await gate.wait()
            await match(work)
            waiting.pop()
        peer.matcher._match = held
        persist = peer.membership.persist

        async def shrink_then_match(persist=persist):
            gate.set()       # the zone has just shrunk: the held matches run now
            with trio.fail_after(30):
                while waiting or any(p.matcher.backlog for p in peers):
                    await trio.sleep(0.01)
            await persist()
        peer.membership.persist = shrink_then_match
    return waiting


async def test_events_matched_while_a_join_splits_the_zone_are_notified_by_the_newcomer(autojump_clock):
    async with open_overlay(2, seed=3, replicas=1) as overlay:
        async with overlay.client(0, "sub") as subscriber, overlay.client(1, "pub") as publisher:
            sub = await subscriber.subscribe(QUERY, kind="signal")
            old = list(overlay.peers)
            waiting = hold_matching_until_the_zone_shrinks(old)
            events = [reading(i) for i in range(40)]
            for event in events:
                await publisher.publish(event)
            await trio.sleep(2)   # every commit arrived; the matches wait at the gate
            assert waiting
            newcomer = await overlay.add_peer()
            assert newcomer.storage.store.count() > 0, "the join moved some of the held events"
            got: set[str] = set()
            with trio.move_on_after(60):
                while len(got) < len(events):
                    got.add((await sub.receive()).event)
            assert got == {e.graph.value for e in events}


async def test_a_split_undone_after_its_newcomer_died_rematches_what_was_matched_meanwhile(autojump_clock):
    """The newcomer never commits (it died mid-join): the split peer takes its zone back after
    `join_timeout`. Events it matched meanwhile, with the smaller zone, skipped the quads of
    the half it gave away; it matches them again, so none is lost (repeats are dropped)."""
    from eventcloud.wire.ops import Op

    async with open_overlay(2, seed=3, replicas=1, join_timeout=3.0) as overlay:
        async with overlay.client(0, "sub") as subscriber, overlay.client(1, "pub") as publisher:
            sub = await subscriber.subscribe(QUERY, kind="signal")
            old = list(overlay.peers)
            waiting = hold_matching_until_the_zone_shrinks(old)
            for peer in old:
                async def never_answer(conn, body):   # the newcomer's commit never arrives
                    await trio.sleep_forever()
                peer.router.dispatcher._requests[Op.JOIN_COMMIT] = never_answer
            events = [reading(i) for i in range(40)]
            for event in events:
                await publisher.publish(event)
            await trio.sleep(2)
            assert waiting
            async with trio.open_nursery() as nursery:
                nursery.start_soon(overlay.add_peer)
                await trio.sleep(1)                # it took its data, and waits for the commit...
                nursery.cancel_scope.cancel()      # ... when it dies (before matching any of it)
            await trio.sleep(10)                   # past join_timeout: the split is undone
            assert sum(p.counters["rematched_after_undone_join"] for p in old) > 0
            got: set[str] = set()
            with trio.move_on_after(60):
                while len(got) < len(events):
                    got.add((await sub.receive()).event)
            assert got == {e.graph.value for e in events}
