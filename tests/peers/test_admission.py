"""Admission control: publications wait while the owners' matching queues run long, so what is
accepted is notified soon after instead of queueing behind a growing backlog (issue 12)."""

from __future__ import annotations

import trio

from eventcloud.testing import open_overlay
from eventcloud.wire.messages import Delivered
from tests.helpers import sample_events

ACCEPT_ALL = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"


async def test_a_publication_waits_while_the_owners_report_a_long_matching_queue(autojump_clock):
    async with open_overlay(3, seed=5, admit_backlog=100) as overlay:
        entry = overlay.peers[0]
        async with overlay.client(0, "pub") as publisher, overlay.client(1, "sub") as subscriber:
            sub = await subscriber.subscribe(ACCEPT_ALL, kind="signal")
            events = sample_events(3)
            began = trio.current_time()
            await publisher.publish(events[0])                 # queues short: no wait
            assert trio.current_time() - began < 0.5 and entry.counters["publications_held"] == 0
            entry.storage._backlog = 250                       # as if a delivery had met 250 queued steps
            began = trio.current_time()
            await publisher.publish(events[1])                 # waits 250 / (4 x 100) s first
            assert trio.current_time() - began >= 0.6 and entry.counters["publications_held"] == 1
            entry.storage._backlog = 10_000
            began = trio.current_time()
            await publisher.publish(events[2])                 # never more than a second
            assert 1.0 <= trio.current_time() - began < 1.5
            got = set()
            with trio.fail_after(30):
                while len(got) < 3:                            # nothing held back is lost
                    got.add((await sub.receive()).event)
            assert got == {e.graph.value for e in events}


async def test_deliveries_report_the_longest_matching_queue_among_their_owners(autojump_clock):
    async with open_overlay(4, seed=6, admit_backlog=0) as overlay:  # 0: reported, never waited on
        entry, others = overlay.peers[0], overlay.peers[1:]
        for n, peer in enumerate(others):
            peer.storage.backlog = lambda queued=100 * (n + 1): queued
        async with overlay.client(0, "pub") as publisher:
            for event in sample_events(6):
                await publisher.publish(event)
        held = {p.state.address for p in others if p.storage.store.events()}  # pending or committed
        assert held  # some quads went to other peers
        longest = max(100 * (n + 1) for n, p in enumerate(others) if p.state.address in held)
        assert entry.storage._backlog == longest
        assert all(p.counters["publications_held"] == 0 for p in overlay.peers)
    assert Delivered.from_wire({"owners": ["a"]}).backlog == 0          # older peers: nothing reported


async def test_csma_chain_steps_running_at_a_peer_count_in_its_backlog(autojump_clock):
    """A CSMA step another peer handed over is matching work waiting here too: while it runs,
    the backlog this peer reports (and admission reads) counts it."""
    from tests.helpers import EXO as EX, PS_PREDICATES as PREDICATES, PS_SUBJECTS as SUBJECTS
    from eventcloud.rdf.model import CompoundEvent, event_graph, make_quad

    query = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p0> ?o . ?o <{EX}p1> ?x }} }}"
    async with open_overlay(4, "csma", seed=2, admit_backlog=0) as overlay:
        release, seen = trio.Event(), []
        for peer in overlay.peers:
            matcher = peer.matcher
            step = matcher._csma_step

            async def held(body, matcher=matcher, step=step):
                seen.append(matcher.backlog)
                await release.wait()
                return await step(body)
            matcher._csma_step = held
        async with overlay.client(0, "both") as client:
            sub = await client.subscribe(query, kind="signal")
            g = event_graph("steps", 1, 1)
            await client.publish(CompoundEvent(g, (make_quad(g, SUBJECTS[0], PREDICATES[0], SUBJECTS[1]),
                                                   make_quad(g, SUBJECTS[1], PREDICATES[1], SUBJECTS[2]))))
            with trio.fail_after(30):
                while not seen:
                    await trio.sleep(0.1)
            assert min(seen) >= 1
            release.set()
            with trio.fail_after(30):
                assert (await sub.receive()).event == g.value
            assert all(p.matcher.backlog == 0 for p in overlay.peers)
