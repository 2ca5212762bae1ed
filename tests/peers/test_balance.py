"""Balanced joins in the real daemon: data published first, peers joining afterwards split it evenly.

Peers join an overlay whose only peer already holds all the data; each joiner probes a few
random owners, climbs to the busiest and has it cut its zone at the median of its quads
(docs/overlay.md, "Balanced joins"). Afterwards the busiest peer holds at most 3× the mean, no
peer is empty, every quad is still found, and publish/subscribe still matches the oracle.
"""

from __future__ import annotations

import random
import statistics

import pytest

from eventcloud.errors import ErrorCode, RequestError
from eventcloud.overlay import CoordinateSpace
from eventcloud.testing import open_overlay
from eventcloud.wire.frames import Kind, Message, encode
from eventcloud.wire.codec import point_from_wire
from eventcloud.wire.messages import Decision, Handover
from eventcloud.wire.ops import Op
from tests.helpers import (
    COUNT, check_delivered, count_of, oracle_solutions, random_pubsub_event, random_subscription, readings,
)


@pytest.mark.parametrize(("algorithm", "mapping"), [("osma", "identity"), ("csma", "local-name")])
async def test_peers_joining_after_the_data_split_it_evenly(autojump_clock, algorithm, mapping):
    events = readings(120)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(1, algorithm, space=CoordinateSpace(mapping=mapping), seed=5) as overlay:
        async with overlay.client(0, "loader") as client:
            for event in events:
                await client.publish(event)
        for _ in range(7):
            await overlay.add_peer()
        async with overlay.client(5, "checker") as client:
            status = await client.status()
            loads = [p.quads for p in status.peers]
            assert len(loads) == 8 and sum(loads) == total
            mean = statistics.mean(loads)
            assert min(loads) > 0, f"an empty peer: {loads}"
            assert max(loads) <= 3 * mean, f"busiest {max(loads)} > 3 × mean {mean:.0f}: {loads}"
            assert count_of(await client.query(COUNT)) == total
            for event in events[::17]:
                assert set(await client.find(event.graph, None, None, None)) == set(event.quads)
            for running in overlay.peers:  # each quad on the owner of its point
                state = running.state
                for quad in running.storage.store.sync.find(None, None, None, None):
                    assert state.zone.contains(state.space.point(quad))

        rng = random.Random(11)
        async with overlay.client(2, "subscriber") as subscriber, overlay.client(6, "publisher") as publisher:
            subs = []
            for _ in range(6):
                text = random_subscription(rng)
                subs.append((text, await subscriber.subscribe(text, kind="bindings")))
            fresh = [random_pubsub_event(rng, i) for i in range(20)]
            for event in fresh:
                await publisher.publish(event)
            for text, sub in subs:
                expected = {e.graph.value: oracle_solutions(text, e) for e in fresh}
                await check_delivered(sub, {g: s for g, s in expected.items() if s}, text)


async def test_joins_into_an_empty_overlay_keep_the_midpoint_rule(autojump_clock):
    """With no data anywhere a joiner splits the owner of its first random point at the midpoint,
    exactly as before balanced joins (the probes find nothing to climb to)."""
    async with open_overlay(4, seed=2) as overlay:
        whole = overlay.peers[0].state.space.whole_space()
        for running in overlay.peers:
            zone = running.state.zone
            for dim, ((lo, hi), (wlo, whi)) in enumerate(zip(zone.bounds, whole)):
                width = hi - lo
                assert (whi - wlo) % width == 0 and lo % width == 0, (dim, zone)  # dyadic pieces of the axis


async def test_a_join_hands_a_large_zone_over_in_chunks(autojump_clock, monkeypatch):
    import peers.membership.handover
    monkeypatch.setattr(peers.membership.handover, "HANDOVER_CHUNK", 2000)  # bytes of text: a few quads a chunk
    events = readings(60)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(1, seed=9) as overlay:
        async with overlay.client(0, "loader") as client:
            for event in events:
                await client.publish(event)
        for _ in range(3):
            await overlay.add_peer()
        async with overlay.client(2, "checker") as client:
            status = await client.status()
            assert sum(p.quads for p in status.peers) == total and min(p.quads for p in status.peers) > 0
            assert count_of(await client.query(COUNT)) == total
            for event in events[::7]:
                assert set(await client.find(event.graph, None, None, None)) == set(event.quads)
        fetched = sum(p.counters["in:join_data"] for p in overlay.peers)
        assert fetched > 3 * 5, f"the handovers were not chunked ({fetched} join_data requests)"


FRAME = 64 * 1024


async def _loaded_pair(overlay, events):
    """Peer 0 loaded with `events`, then peer 1 joined (it takes about half); peer 1's quads."""
    async with overlay.client(0, "loader") as client:
        for event in events:
            await client.publish(event)
    await overlay.add_peer()
    leaving = overlay.peers[1]
    quads = list(leaving.storage.store.sync.find(None, None, None, None))
    whole = encode(Message(Kind.REQUEST, Op.TAKE_OVER, 1, body={"data": Handover(tuple(quads)).to_wire()}), 1 << 30)
    assert len(whole) > FRAME, "the test needs a zone larger than a frame"
    return leaving, quads


def _only_own_quads(overlay) -> None:
    for running in overlay.peers:
        state = running.state
        for quad in running.storage.store.sync.find(None, None, None, None):
            assert state.zone.contains(state.space.point(quad)), f"{running.id} holds a quad outside its zone"


async def test_a_leave_hands_a_zone_larger_than_a_frame_over_in_chunks(autojump_clock, monkeypatch):
    """A leave sent its whole zone in one `take_over`: with 8 real peers on CityBench, peers
    holding 34 and 45 MB could never leave or make room (refused at the 32 MiB frame limit).
    The heir now fetches the quads past the first chunk with `leave_data`."""
    import peers.membership.handover
    import peers.replication.owner
    monkeypatch.setattr(peers.membership.handover, "HANDOVER_CHUNK", 4000)
    monkeypatch.setattr(peers.replication.owner, "CHUNK_QUADS", 50)   # a replica's copy fits the small frames too
    events = readings(240)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(1, seed=9, max_frame=FRAME) as overlay:
        leaving, _ = await _loaded_pair(overlay, events)
        heir = await leaving.membership.leave()
        assert heir == overlay.peers[0].id
        assert leaving.counters["in:leave_data"] >= 3
        leaving.stop()
        await overlay.network.kill(leaving.address)
        async with overlay.client(0, "checker") as client:
            status = await client.status()
            assert [p.quads for p in status.peers] == [total]
            assert count_of(await client.query(COUNT)) == total
            for event in events[::9]:
                assert set(await client.find(event.graph, None, None, None)) == set(event.quads)


async def test_a_take_over_whose_fetch_fails_leaves_the_zone_with_its_owner_and_nothing_at_the_heir(
        autojump_clock, monkeypatch):
    """The leaver stops serving chunks halfway: the heir drops what it installed and refuses,
    the leaver keeps its zone and data, every quad is counted once, and a later leave works."""
    import peers.membership.handover
    import peers.replication.owner
    monkeypatch.setattr(peers.membership.handover, "HANDOVER_CHUNK", 4000)
    monkeypatch.setattr(peers.replication.owner, "CHUNK_QUADS", 50)
    events = readings(240)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(1, seed=9, max_frame=FRAME) as overlay:
        leaving, quads = await _loaded_pair(overlay, events)
        zone = leaving.state.zone
        served = []

        chunk = peers.membership.handover.Outgoing.chunk

        def failing_chunk(outgoing, offset):
            served.append(offset)
            if len(served) > 3:   # the first chunk, then two fetched: the leave "ended"
                raise RequestError("the leave ended", ErrorCode.NOT_FOUND)
            return chunk(outgoing, offset)

        monkeypatch.setattr(peers.membership.handover.Outgoing, "chunk", failing_chunk)
        with pytest.raises(RequestError) as refused:
            await leaving.membership.leave()
        assert refused.value.code is ErrorCode.CANNOT_LEAVE
        assert leaving.state.zone == zone and not leaving.membership.leaving
        assert set(leaving.storage.store.sync.find(None, None, None, None)) == set(quads)
        _only_own_quads(overlay)
        async with overlay.client(0, "checker") as client:
            assert count_of(await client.query(COUNT)) == total
            assert sum(p.quads for p in (await client.status()).peers) == total
        monkeypatch.setattr(peers.membership.handover.Outgoing, "chunk", chunk)
        assert await leaving.membership.leave() == overlay.peers[0].id
        leaving.stop()
        await overlay.network.kill(leaving.address)
        async with overlay.client(0, "checker") as client:
            assert count_of(await client.query(COUNT)) == total


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_peer_joining_where_probes_find_no_data_climbs_to_it(autojump_clock, seed):
    """Eight peers started before the data (midpoint zones): the readings' points fill a small
    part of the space, so a joiner's 4 random probes often all land on empty zones. It climbs
    from there to the data and splits it (it split an empty zone at random before: the
    rebalancer's movers made new empty peers that way)."""
    events = readings(60)
    async with open_overlay(8, "osma", space=CoordinateSpace(mapping="identity"), seed=seed) as overlay:
        async with overlay.client(0, "loader") as client:
            for event in events:
                await client.publish(event)
        for _ in range(4):
            newcomer = await overlay.add_peer()
            assert newcomer.storage.store.held() > 0, f"peer {newcomer.state.id} joined an empty zone"


async def test_a_zone_whose_decisions_outgrow_a_frame_is_still_split_copied_and_handed_over(
        autojump_clock, monkeypatch):
    """A zone keeps the decision of every publication attempt made in it, for good: a join's
    grant, a take-over and a replica's copy each carried all of them in one message, which a
    long-running zone outgrows (about 200 bytes each). They go in chunks now, like the quads."""
    import peers.membership.handover
    import peers.replication.owner
    monkeypatch.setattr(peers.membership.handover, "HANDOVER_CHUNK", 2000)
    monkeypatch.setattr(peers.replication.owner, "CHUNK_QUADS", 5)
    frame = 6 * 1024
    events = readings(240)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(1, seed=9, max_frame=frame) as overlay:
        async with overlay.client(0, "loader") as client:
            for event in events:
                await client.publish(event)
        decisions = overlay.peers[0].storage.store.sync.decisions()
        whole = encode(Message(Kind.REQUEST, Op.TAKE_OVER, 1, body={"data": Handover(decisions=tuple(
            Decision(k, d, point_from_wire(p)) for k, (d, p) in decisions.items())).to_wire()}), 1 << 30)
        assert len(whole) > 2 * frame, "the test needs decisions larger than two frames"
        await overlay.add_peer()    # a grant, and each peer's copy of its zone to its replica
        leaving, heir = overlay.peers
        assert await leaving.replication.ensure()   # its whole zone copied to the other
        assert await leaving.membership.leave() == heir.id   # the decisions all go to the heir
        leaving.stop()
        await overlay.network.kill(leaving.address)
        assert heir.storage.store.sync.decisions().keys() >= decisions.keys()
        async with overlay.client(1, "checker") as client:
            assert count_of(await client.query(COUNT)) == total
