"""Ownership decided by the authority, in one process: partitions (peers cut off both ways, the
authority included) depose no healthy owner, split no zone, and lose nothing acknowledged.

Without the authority (`authority=None`) the first test fails: the cut-off replica, unable to
reach anyone, takes over the healthy owners whose copies it holds (docs/reliability.md)."""

from __future__ import annotations

import json

import pytest
import trio

from eventcloud.client import ClientError, connect
from eventcloud.errors import AuthorityUnreachable, ErrorCode, EventCloudError, Fenced
from eventcloud.overlay import heirs
from eventcloud.testing import open_overlay
from peers.authority import LocalAuthority, lease_ttl
from tests.helpers import ALGORITHMS, assert_exact_neighbour_tables, spread_events


async def _publish_all(publisher, events, acknowledged: list, refused: list, seconds: float) -> None:
    """Publish each event (the SDK retries what is refused as unavailable); note what was acknowledged."""
    for event in events:
        try:
            with trio.fail_after(seconds):
                await publisher.publish(event)
            acknowledged.append(event)
        except (ClientError, trio.TooSlowError) as exc:
            refused.append((event, exc))


async def _not_whole(client, events) -> list[str]:
    """The events not stored whole, exactly once (empty: all are)."""
    wrong = []
    for event in events:
        found = await client.find(event.graph)
        if len(found) != len(event):
            wrong.append(f"{event.graph.value}: {len(found)} of {len(event)} quads")
    return wrong


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_a_replica_cut_off_for_15_s_deposes_no_healthy_owner_and_nothing_acknowledged_is_lost(
        autojump_clock, algorithm):
    async with open_overlay(5, algorithm, seed=7, authority=LocalAuthority()) as overlay:
        acknowledged: list = []
        refused: list = []
        async with overlay.client(0, "sub") as subscriber, overlay.client(0, "pub") as publisher:
            sub = await subscriber.subscribe("SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }", kind="signal")
            await _publish_all(publisher, spread_events(10, "before"), acknowledged, refused, 30)
            with trio.fail_after(30):   # every zone has its copy (made once its owner has data)
                while sum(len(p.replicas.held()) for p in overlay.peers) < len(overlay.peers):
                    await trio.sleep(0.5)
            victim = max(overlay.peers[1:], key=lambda p: len(p.replicas.held()))
            owners = set(victim.replicas.held())
            assert owners
            await overlay.cut(victim)
            started = trio.current_time()
            await _publish_all(publisher, spread_events(20, "during"), acknowledged, refused, 30)
            await trio.sleep(max(0.0, 15 - (trio.current_time() - started)))
            overlay.heal(victim)
            await _publish_all(publisher, spread_events(10, "after"), acknowledged, refused, 30)
            await trio.sleep(20)   # the victim learns its own zone moved on, steps down, rejoins
            assert not refused, refused

            # the cut-off replica tried and was refused; no healthy owner was deposed
            assert victim.counters["takeovers"] == 0
            assert victim.counters["takeovers_unclaimed"] > 0
            for peer in overlay.peers:
                if peer.id in owners:
                    assert peer.counters["superseded"] == 0 and peer.counters["deposed_by_authority"] == 0, peer.id
            # its own zone moved to its replica (it was unreachable to all), and it stepped down
            assert sum(p.counters["takeovers"] for p in overlay.peers if p is not victim) == 1
            assert victim.counters["deposed_by_authority"] + victim.counters["superseded"] >= 1

            assert await _not_whole(publisher, acknowledged) == []
            assert await publisher.count() == sum(len(e) for e in acknowledged)
            got: set[str] = set()
            with trio.move_on_after(30):
                async for note in sub:
                    assert note.event not in got, "a pair notified twice"
                    got.add(note.event)
                    if len(got) == len(acknowledged):
                        break
            assert got == {e.graph.value for e in acknowledged}


async def test_a_minority_cut_off_refuses_writes_and_the_overlay_converges_with_one_owner_per_zone(autojump_clock):
    async with open_overlay(6, seed=11, authority=LocalAuthority()) as overlay:
        minority = overlay.peers[4:]
        acknowledged: list = []
        refused: list = []
        async with overlay.client(0) as publisher:
            await _publish_all(publisher, spread_events(10, "before"), acknowledged, refused, 30)
            for peer in minority:
                await overlay.cut(peer)
            # the minority's owners acknowledge nothing once their leases may have lapsed: a write
            # there is refused as unavailable (fenced, or no replica reachable), never acknowledged
            await trio.sleep(lease_ttl(overlay.config.failure_timeout) + 1)
            for peer in minority:
                with trio.fail_after(30), pytest.raises(EventCloudError) as refusal:
                    await peer.current_store.write([["abort", "http://example.org/minority-write"]])
                assert refusal.value.code is ErrorCode.UNAVAILABLE, refusal.value
            # the majority's writes go on, but for a zone both of whose copies are in the minority
            # (nobody can serve it): those wait, and may stay unacknowledged
            during: list = []
            await _publish_all(publisher, spread_events(20, "during"), acknowledged, during, 10)
            await trio.sleep(15)
            for peer in minority:
                overlay.heal(peer)
            await _publish_all(publisher, spread_events(10, "after"), acknowledged, refused, 30)
            await trio.sleep(20)
            assert not refused, refused
            landed = 0
            for event, _ in during:      # not acknowledged: whole or absent, never partial
                found = len(await publisher.find(event.graph))
                assert found in (0, len(event)), f"{event.graph.value}: {found} of {len(event)} quads"
                landed += found
            # one owner per zone: every peer serving is one the authority knows, each id once
            epochs = {e.key.rsplit("/", 1)[1]: int(e.value) for e in await overlay.authority.scan("eventcloud/")
                      if "/epoch/" in e.key}
            status = await publisher.status()
            assert not any(p.down for p in status.peers)
            ids = [p.id for p in status.peers]
            assert len(ids) == len(set(ids))
            for ident in ids:
                assert ident in epochs, f"peer {ident} serves a zone the authority does not know"
            assert await _not_whole(publisher, acknowledged) == []
            assert await publisher.count() == sum(len(e) for e in acknowledged) + landed


async def test_a_first_peer_with_no_data_starts_no_second_overlay_beside_one_the_authority_knows(autojump_clock):
    from dataclasses import replace

    from peers.runtime import run_peer
    from peers.store import StateError

    async with open_overlay(2, seed=3, authority=LocalAuthority()) as overlay:
        wiped = replace(overlay.config, join=None, seed=99)   # the first peer's command, its data gone
        with pytest.raises(StateError, match=f"--join ({overlay.peers[0].address}|{overlay.peers[1].address})"):
            await run_peer(wiped, overlay.network.endpoint(), authority=overlay.authority)
    async with open_overlay(1, seed=3, authority=LocalAuthority()) as alone:   # the first one of all starts
        assert alone.peers[0].current.has_zone


async def test_a_split_whose_owner_lost_its_lease_is_undone_never_left_to_nobody(autojump_clock):
    """The fault simulation's seed 56: a peer split its zone for a newcomer, then lost its lease
    (cut off from the authority) before the newcomer committed. The commit ended the split,
    then the drop of the quads handed over was fenced, and the newcomer, told its join failed,
    gave its half up: served by nobody, its quads gone. A peer that may not write now refuses
    the commit before the split stands (a fenced answer, which decides nothing: the newcomer
    asks again), and takes its zone back at the join timeout; the newcomer, refused then, gives
    up and its keys at the authority go with it."""
    async with open_overlay(2, authority=LocalAuthority()) as overlay:
        events = spread_events(20, "split")
        async with overlay.client(0, "loader") as client:
            await client.publish_batch(events)

        def fenced() -> None:
            raise Fenced("lease lapsed (the test's)")

        real = {peer.id: peer.membership.store.fence for peer in overlay.peers}
        for peer in overlay.peers:
            peer.membership.store.fence = fenced
        with pytest.raises(EventCloudError, match="timed out and was undone"):
            await overlay.add_peer()
        for peer in overlay.peers:
            peer.membership.store.fence = real[peer.id]
        # the newcomer's keys went with it: the copy it made of its half can never be claimed
        # (simulation seed 12: a replica took such a zone over, and two peers served it)
        keys = [e.key.split("/") for e in await overlay.authority.scan("eventcloud/")]
        assert {k[3] for k in keys if k[2] in ("epoch", "replica")} == {p.id for p in overlay.peers}
        await trio.sleep(40)   # past the join timeout: the split is undone
        async with overlay.client(0, "reader") as client:
            assert await client.count() == sum(len(e) for e in events)
            assert await _not_whole(client, events) == []
            status = await client.status()
        assert len(status.peers) == 2 and not any(p.down for p in status.peers)


async def test_a_commit_fenced_for_a_while_is_asked_again_and_the_join_completes(autojump_clock):
    """The fault harness's minority partition: a peer rejoining after the heal split the zone of
    a peer still without its lease, whose fence refused the commit. The newcomer took that for a
    refusal, retired its keys and rejoined under another id, while the splitter, its lease back,
    committed the split when the newcomer's replica asked on its behalf: a zone nobody could
    claim (its epoch gone from the authority), served by nobody for good. A fenced answer
    decides nothing: the newcomer asks again until the splitter answers."""
    async with open_overlay(2, authority=LocalAuthority()) as overlay:
        events = spread_events(20, "split")
        async with overlay.client(0, "loader") as client:
            await client.publish_batch(events)
        real = {peer.id: peer.membership.store.fence for peer in overlay.peers}
        refused = []

        def fenced_at_first(peer_id: str):
            def fence() -> None:
                if len(refused) < 3:   # the splitter's lease is back after a few attempts
                    refused.append(peer_id)
                    raise Fenced("lease lapsed (the test's)")
                real[peer_id]()
            return fence

        for peer in overlay.peers:
            peer.membership.store.fence = fenced_at_first(peer.id)
        newcomer = await overlay.add_peer()
        for peer in overlay.peers[:2]:
            peer.membership.store.fence = real[peer.id]
        assert len(refused) == 3 and newcomer.state.joining is None
        await trio.sleep(40)   # past the join timeout: the split stands
        async with overlay.client(2, "reader") as client:
            assert await client.count() == sum(len(e) for e in events)
            assert await _not_whole(client, events) == []
            status = await client.status()
        assert len(status.peers) == 3 and not any(p.down for p in status.peers)
        assert_exact_neighbour_tables(status)
        keys = [e.key.split("/") for e in await overlay.authority.scan("eventcloud/")]
        assert {k[3] for k in keys if k[2] == "epoch"} == {p.id for p in overlay.peers}


async def test_where_a_peer_serves_is_asked_of_the_authority_first(autojump_clock):
    """A splitter or newcomer that moved (a restart on another port, a stand-in) is looked for
    where the authority says its server registered, before the neighbours' tables."""
    from peers.net import addresses_of

    async with open_overlay(3, authority=LocalAuthority()) as overlay:
        asker, sought = overlay.peers[0], overlay.peers[2]
        found = await addresses_of(asker.router, asker.state, sought.id, "gone:1", 2.0,
                                   locate=asker.membership.locate)
        assert found[:2] == ["gone:1", sought.address]
        alone = await addresses_of(asker.router, asker.state, sought.id, "gone:1", 2.0)
        assert alone[0] == "gone:1" and set(alone[1:]) <= {sought.address}


async def test_where_a_zone_is_served_is_answered_from_the_watched_zone_map_without_asking(autojump_clock):
    """Routing never waits on the authority: once a peer's watch has listed the zone map, where a
    zone is served is answered from it, even while the authority would not answer a read."""
    authority = LocalAuthority()
    async with open_overlay(3, authority=authority) as overlay:
        asker, sought = overlay.peers[0], overlay.peers[2]
        await trio.sleep(1)   # the watches have listed

        async def unreachable(key: str):
            raise AuthorityUnreachable("the test's authority does not answer reads")

        authority.get = unreachable
        assert await asker.membership.locate(sought.id) == (sought.address, sought.state.incarnation)
        assert await asker.membership.locate("no-such-zone") is None
        assert asker.counters["servers_located_from_watch"] == 2


async def test_a_leaver_killed_after_its_heir_merged_is_not_taken_over_by_its_replica(autojump_clock):
    """A leave is one heir's check at the authority (`Ownership.absorb`: both epochs as expected,
    the leaver's copy marked absorbed) before the zones merge. A leaver cut off for good right
    after the merge, before it dropped its replica and retired its keys, was taken over by that
    replica: its zone served twice, by the heir (merged) and by the stand-in, whenever routing
    did not show the keeper the heir first (`ReplicaKeeper._served_by`, made to find nobody here)."""
    async with open_overlay(4, seed=5, authority=LocalAuthority()) as overlay:
        async with overlay.client(0) as client:
            events = spread_events(24, "leave")
            for event in events:
                await client.publish(event)
            with trio.fail_after(30):   # every zone has its copy
                while sum(len(p.replicas.held()) for p in overlay.peers) < len(overlay.peers):
                    await trio.sleep(0.5)
        leaver = next(p for p in overlay.peers[1:] if p.current.replica is not None
                      and heirs(p.current.zone, p.current.neighbours))
        keeper = next(p for p in overlay.peers if p.id == leaver.current.replica[0])
        leaver_zone = leaver.current.zone

        async def killed_before_dropping_its_replica() -> None:
            await overlay.cut(leaver)   # as if killed: nobody, the authority included, hears it again
            await trio.sleep_forever()

        async def nobody_found(copy) -> None:
            return None   # routing to the zone finds nobody (the heir's announcement has not spread)

        leaver.membership.replication.drop = killed_before_dropping_its_replica
        keeper.replicas._served_by = nobody_found   # only the authority stands between it and a claim
        async with trio.open_nursery() as nursery:
            async def leave() -> None:
                async with connect(leaver.address, transport=overlay.network) as own:
                    with trio.move_on_after(5):
                        with pytest.raises(ClientError, match="lost"):   # cut off before it answers
                            await own.leave()
            nursery.start_soon(leave)
            await trio.sleep(60)   # past the failure timeout and the lease's TTL many times over
            nursery.cancel_scope.cancel()
        others = [p for p in overlay.peers if p is not leaver]
        assert sum(p.counters["takeovers"] for p in others) == 0
        assert keeper.counters["takeovers_refused"] > 0
        heir = next(p for p in others if p.current.zone.covers(leaver_zone))
        assert heir.counters.get("takeovers", 0) == 0
        async with overlay.client(overlay.peers.index(heir)) as client:
            assert await client.count() == sum(len(e) for e in events)
            assert await _not_whole(client, events) == []


async def _closes_at_once(stream: trio.abc.Stream) -> None:
    await stream.aclose()


async def test_a_takeover_a_cut_off_neighbour_missed_is_learnt_from_the_watched_zone_map(autojump_clock):
    """The stand-in's announcement cannot reach a neighbour cut off at that moment, and no
    stabilisation round comes: that neighbour learns where the zone is served now from its watch
    of the authority's zone map once it reaches the authority again (the stream the cut broke
    resumes from the revision it reached), and checks it with the stand-in itself. Without the
    watch its table names the dead address until a round (checked: it does)."""
    async with open_overlay(5, seed=4, authority=LocalAuthority(), stabilise_every=100_000.0,
                            lease_ttl=30) as overlay:
        async with overlay.client(0, "pub") as publisher:
            for event in spread_events(20, "w"):
                await publisher.publish(event)
        with trio.fail_after(30):   # every zone has its copy
            while sum(len(p.replicas.held()) for p in overlay.peers) < len(overlay.peers):
                await trio.sleep(0.5)
        victim, watcher = next((v, w) for v in overlay.peers[1:] for w in overlay.peers
                               if w.id in v.state.neighbours and v.state.replica and w.address != v.state.replica[1]
                               and w is not v)
        old, key = victim.address, f"eventcloud/{victim.state.overlay}/owner/{victim.id}"
        assert watcher.state.neighbours[victim.id].address == old
        await overlay.cut(watcher)
        victim.stop()
        await overlay.network.kill(old)
        # its host stays down (whatever answers there closes at once): the stand-in serves on
        # another port, as it would on another host
        await overlay.nursery.start(overlay.network.serve, old, _closes_at_once)
        with trio.fail_after(60):   # the victim's replica takes it over: a stand-in serves it elsewhere
            while (entry := await overlay.authority.get(key)) is None or json.loads(entry.value)["address"] in ("", old):
                await trio.sleep(0.5)
        standin = json.loads(entry.value)["address"]
        await trio.sleep(2)
        assert watcher.state.neighbours[victim.id].address == old   # it heard nothing, cut off
        overlay.heal(watcher)
        with trio.fail_after(10):
            while watcher.state.neighbours[victim.id].address != standin:
                await trio.sleep(0.2)
        assert watcher.counters["neighbours_learned_from_zone_map"] >= 1
        assert watcher.counters["servers_located_from_watch"] >= 0
        assert watcher.counters["deposed_by_authority"] == 0 and watcher.counters["superseded"] == 0
