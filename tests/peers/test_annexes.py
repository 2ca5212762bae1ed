"""Annexes in the real daemon: a peer with too many neighbours hands the empty side of its zone
to another host, which runs it as one more peer (peers/membership/annexes.py).

In-process peers each have a process of their own (a host). With a neighbour limit of 3, the
crowded peers cut: each annex runs in another host's process, the peer that cut keeps exactly
the neighbours the cut promised, no quad moves and none is lost, tables stay exact, every
host stays within its cap, an empty annex is not moved by the rebalancer, and pub/sub still
matches the oracle for events published before and after. An annex asked for a zone that
changed, or for what is not one side of a cut, is refused and leaves no peer behind.
"""

from __future__ import annotations

import random

import pytest
import trio

from eventcloud.errors import ErrorCode, RemoteError
from eventcloud.overlay import CoordinateSpace, Zone, crowd_cut, data_ranges
from eventcloud.testing import open_overlay
from eventcloud.wire.messages import AdoptAnnex
from eventcloud.wire.ops import Op
from tests.helpers import (
    COUNT, assert_exact_neighbour_tables, check_delivered, count_of, oracle_solutions, random_pubsub_event,
    random_subscription, readings,
)

KNOBS = dict(neighbour_limit=3, host_neighbour_cap=14, annex_every=1e6)   # cuts only when the test says


def _host_of(overlay, ident: str):
    """The in-process peer whose process runs `ident` (itself, or one of its annexes)."""
    for peer in overlay.peers:
        if ident in peer.annexes.process.ids:
            return peer
    return None


def _annexes(peer) -> dict:
    """The annexes `peer`'s process runs (under its top-level peer, whichever peer adopted them)."""
    return peer.annexes.launcher.running


async def test_crowded_peers_hand_their_empty_side_to_another_host(autojump_clock):
    rng = random.Random(4)
    events = readings(60)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(10, space=CoordinateSpace(mapping="local-name"), seed=3, **KNOBS) as overlay:
        async with overlay.client(0, "loader") as client:
            for event in events:
                await client.publish(event)
            async with overlay.client(1, "subscriber") as subscriber:
                subs = [(text, await subscriber.subscribe(text, kind="bindings"))
                        for text in (random_subscription(rng) for _ in range(4))]
                before = await client.status()
                cuts = {}
                for peer in overlay.peers:
                    state = peer.state
                    held = await peer.current_store.find(None, None, None, None)
                    promised = crowd_cut(state.zone, state.neighbour_zones(),
                                         data_ranges(state.space.point(q) for q in held))
                    degree = len(state.neighbours)
                    annex = await peer.annexes.once()
                    if annex is not None:
                        assert promised is not None and len(state.neighbours) == promised.kept < degree
                        cuts[annex] = peer
                    elif degree <= KNOBS["neighbour_limit"]:
                        assert peer.counters["annexes_handed"] == 0
                assert len(cuts) >= 2, f"{len(cuts)} annexes (neighbours: {[len(p.neighbours) for p in before.peers]})"
                status = await client.status()
                assert len(status.peers) == 10 + len(cuts)
                assert_exact_neighbour_tables(status)
                quads = {p.id: p.quads for p in status.peers}
                assert sum(quads.values()) == total and count_of(await client.query(COUNT)) == total
                for annex, cut_from in cuts.items():
                    assert quads[annex] == 0                               # no data moved
                    adopter = _host_of(overlay, annex)
                    assert adopter is not None and adopter is not cut_from  # another host runs it
                    running = _annexes(adopter)[annex]
                    assert running.state.annex
                    assert await running.rebalancer.once() is None         # an empty annex stays put
                for peer in overlay.peers:                                 # hosts within their cap
                    assert len(peer.annexes.process.neighbours()) <= KNOBS["host_neighbour_cap"]
                # publications after the cuts land on annexes too, and match as before
                fresh = [random_pubsub_event(rng, i) for i in range(30)]
                for event in fresh:
                    await client.publish(event)
                total += sum(len(e.quads) for e in fresh)
                assert count_of(await client.query(COUNT)) == total == await client.count()
                for event in fresh[::5] + events[::9]:
                    assert set(await client.find(event.graph, None, None, None)) == set(event.quads)
                for text, sub in subs:
                    expected = {e.graph.value: oracle_solutions(text, e) for e in events + fresh}
                    await check_delivered(sub, {g: s for g, s in expected.items() if s}, text)


def _everyone(overlay) -> list:
    """Every peer running: the overlay's and their processes' annexes."""
    return [r for peer in overlay.peers for r in (peer, *_annexes(peer).values())]


async def test_a_host_over_its_cap_hands_an_empty_annex_on_and_joins_climb_by_host_load(autojump_clock):
    """16 hosts with a generous cap: some host gathers annexes. Its load (`load`) is that of all
    its peers, which joins compare. Then the cap is set below that host's neighbours: its most
    crowded empty annex, alone, leaves to its sibling (no replica takes anything over, no quad
    moves), and that sibling, crowded again, cuts it off for a host at its next look."""
    events = readings(60)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(16, space=CoordinateSpace(mapping="local-name"), seed=3,
                            **{**KNOBS, "host_neighbour_cap": 30}) as overlay:
        async with overlay.client(0) as client:
            for event in events:
                await client.publish(event)
            for _ in range(2):
                for peer in _everyone(overlay):
                    await peer.annexes.once()
            crowded = max(overlay.peers, key=lambda p: len(p.annexes.process.neighbours()))
            process = crowded.annexes.process
            assert len(_annexes(crowded)) >= 2
            load = crowded.rebalancer.survey.load()
            held = {r.address: r.current_store.held() for r in (crowded, *_annexes(crowded).values())}
            assert load.host_quads == sum(held.values()) and held[load.host_busiest] == max(held.values())
            for annex in _annexes(crowded).values():   # an annex answers for its host too
                assert annex.rebalancer.survey.load().host_quads == load.host_quads
            for peer in overlay.peers[:4]:   # a joiner's climb ends at the busiest peer of the host it found
                found = await peer.rebalancer.survey.busiest(peer.state.space, by_host=True, look_around=True)
                host = _host_of(overlay, found.id)
                held_there = [r.current_store.held() for r in (host, *_annexes(host).values())]
                assert found.quads == max(held_there) and found.host_quads == sum(held_there) > 0
            before = await client.status()
            over = len(process.neighbours())
            for peer in _everyone(overlay):
                peer.annexes.cap, peer.annexes.headroom = over - 1, 0
            chosen = process.most_crowded_empty_annex()
            looking = list(_annexes(crowded).values())
            handed = sum(r.counters["annexes_handed"] for r in _everyone(overlay) if r.id != chosen)
            for annex in looking:   # each looks: the chosen one goes, the others may cut as usual
                await annex.annexes.once()
            await trio.sleep(5)
            assert [r.id for r in looking if r.counters["annexes_handed_on"]] == [chosen]
            assert chosen not in process.ids
            cuts = sum(r.counters["annexes_handed"] for r in _everyone(overlay)) - handed
            status = await client.status()
            assert len(status.peers) == len(before.peers) - 1 + cuts and chosen not in {p.id for p in status.peers}
            assert not any(p.down for p in status.peers)
            assert sum(r.counters["takeovers"] for r in _everyone(overlay)) == 0
            assert_exact_neighbour_tables(status)
            assert sum(p.quads for p in status.peers) == total == count_of(await client.query(COUNT))
            recut = [await peer.annexes.once() for peer in _everyone(overlay)]
            assert any(recut)
            status = await client.status()
            assert_exact_neighbour_tables(status)
            assert sum(p.quads for p in status.peers) == total


async def test_annexes_come_back_with_their_host(autojump_clock, tmp_path):
    """Peers with data directories: a host running annexes stops and starts again from its
    directory before any replica notices; its annexes come back from `<data-dir>/annexes/`
    with the same ids and zones, and nothing is lost."""
    events = readings(60)
    total = sum(len(e.quads) for e in events)
    async with open_overlay(1, space=CoordinateSpace(mapping="local-name"), seed=3, failure_timeout=600.0,
                            **KNOBS) as overlay:   # replicas wait long: the restart is what is tested
        for index in range(1, 10):
            await overlay.add_peer(data_dir=tmp_path / f"p{index}")
        async with overlay.client(0) as client:
            for event in events:
                await client.publish(event)
            for peer in list(overlay.peers):
                await peer.annexes.once()
            hosts = [p for p in overlay.peers[1:] if _annexes(p)]
            assert hosts, "no host on disk runs an annex"
            host = hosts[0]
            annexes = {ident: r.state.zone for ident, r in _annexes(host).items()}
            on_disk = list((tmp_path / f"p{overlay.peers.index(host)}" / "annexes").glob("*/peer.json"))
            assert len(on_disk) == len(annexes)
            host.stop()
            for address in [host.address] + [r.address for r in _annexes(host).values()]:
                await overlay.network.kill(address)
            await trio.sleep(0.5)
            again = await overlay.add_peer(data_dir=tmp_path / f"p{overlay.peers.index(host)}")
            assert again.id == host.id
            await trio.sleep(2)
            assert {ident: r.state.zone for ident, r in _annexes(again).items()} == annexes
            status = await client.status()
            assert not any(p.down for p in status.peers) and set(annexes) <= {p.id for p in status.peers}
            assert sum(r.counters["takeovers"] for r in _everyone(overlay) if not r.stopped.is_set()) == 0
            assert_exact_neighbour_tables(status)
            assert sum(p.quads for p in status.peers) == total == count_of(await client.query(COUNT))


@pytest.mark.parametrize("what", ["changed", "not-a-side"])
async def test_an_annex_for_a_zone_that_changed_or_no_side_of_it_is_refused(autojump_clock, what):
    async with open_overlay(3, seed=5, **KNOBS) as overlay:
        owner, adopter = overlay.peers[0], overlay.peers[1]
        zone = owner.state.zone
        lower, upper = zone.split_at(1, (zone.bounds[1][0] + zone.bounds[1][1]) // 2)
        if what == "changed":
            of, side = Zone(owner.state.space.whole_space()), upper
        else:
            of, side = zone, upper.split_at(2, (upper.bounds[2][0] + upper.bounds[2][1]) // 2)[0]
        with pytest.raises(RemoteError) as refused:
            await overlay.peers[2].router.call(adopter.address, Op.ANNEX_ADOPT, AdoptAnnex(owner.address, of, side))
        assert refused.value.code is (ErrorCode.NOT_FOUND if what == "changed" else ErrorCode.BAD_REQUEST)
        assert ("changed since" if what == "changed" else "not one side") in refused.value.message
        await trio.sleep(1)
        assert _annexes(adopter) == {} and owner.state.zone == zone
        async with overlay.client(0) as client:
            status = await client.status()
        assert len(status.peers) == 3
        assert_exact_neighbour_tables(status)


@pytest.mark.processes
async def test_real_peer_processes_run_annexes_and_lose_nothing_when_one_is_killed(tmp_path):
    """`eventcloud peer --neighbour-limit 2` processes over TCP: annexes start as extra peers in
    other processes (on ports of their own, kept in `<data-dir>/annexes/`). Then a process
    running one is killed (-9): its peers' replicas take their zones over, and every
    acknowledged quad is still counted once; restarted, it rejoins and nothing is doubled."""
    import json
    import signal

    from eventcloud.client import ClientError, connect
    from peers.supervisor import LocalCluster

    events = readings(200)
    total = sum(len(e.quads) for e in events)
    cluster = LocalCluster(4, data_dir=tmp_path, seed=3, mapping="local-name",
                           extra=["--neighbour-limit", "2", "--host-neighbour-cap", "10", "--annex-every", "1"])
    await trio.to_thread.run_sync(cluster.start)

    def annexes() -> dict[str, int]:
        """Annex id -> the index of the process that runs it (from the data directories)."""
        found = {}
        for index in range(4):
            for path in (tmp_path / f"peer-{index}").glob("**/annexes/*/peer.json"):
                state = json.loads(path.read_text())
                if state.get("zone") is not None:
                    found[state["id"]] = index
        return found

    async def settled(client, why: str, check, seconds: float = 90):
        """The status once every peer answers, the same peers did twice in a row 3 s apart, and
        `check(status)` finds nothing wrong (None). Membership changes go on for a while (annexes
        cut and handed on; after the restart, the process's peers rejoining as new ones), and a
        status taken in the middle of one may list an annex whose join has not reached every
        table yet, or count a zone's quads on both sides of a split. So the checks run on a quiet
        overlay; what stays wrong for `seconds` fails, naming the last thing found wrong."""
        previous, last = None, "nothing yet"
        with trio.move_on_after(seconds):
            while True:
                await trio.sleep(3)
                try:
                    status = await client.status()
                except ClientError as exc:
                    previous, last = None, f"status refused: {exc.message}"
                    continue
                ids = frozenset(p.id for p in status.peers)
                down = [p.id for p in status.peers if p.down]
                quiet, previous = ids == previous and not down, ids
                if not quiet:
                    last = f"{len(ids)} peers, down {down}"
                    continue
                wrong = await check(status)
                if wrong is None:
                    return status
                last = wrong
        raise AssertionError(f"{why}: not settled within {seconds} s ({last})")

    async def counted_once(status) -> str | None:
        """Every acknowledged quad counted exactly once, by the peers' loads and by COUNT(*)."""
        held, counted = sum(p.quads for p in status.peers), await client.count()
        if held == total == counted:
            return None
        return f"{held} quads held and {counted} counted of {total} acknowledged"

    async def exact(status) -> str | None:
        """Neighbour tables exact, and every quad counted once."""
        try:
            assert_exact_neighbour_tables(status)
        except AssertionError:
            return "neighbour tables not exact"
        return await counted_once(status)

    running: dict[str, int] = {}

    async def annexes_served(status) -> str | None:
        """The annexes on disk are exactly the peers beside the 4 first ones, on ports of their own."""
        running.clear()
        running.update(annexes())
        ids = {p.id for p in status.peers}
        if not running:
            return "no annex started"
        if len(ids) != 4 + len(running) or not set(running) <= ids:
            return f"{len(ids)} peers for 4 and {len(running)} annexes on disk"
        if not {p.address for p in status.peers if p.id in running}.isdisjoint(cluster.addresses):
            return "an annex serves on a first peer's port"
        return await exact(status)

    try:
        async with connect(cluster.addresses, source="annexes") as client:
            for at in range(0, len(events), 50):
                await client.publish_batch(events[at:at + 50])
            with trio.move_on_after(60):
                while not annexes():
                    await trio.sleep(1)
            await settled(client, "after the annexes started", annexes_served)
            victim = next(iter(running.values()))
            print(f"{len(running)} annexes in processes {sorted(set(running.values()))}; killing process {victim}")
            cluster.stop_peer(victim, signal.SIGKILL)
            await settled(client, "after the kill", counted_once)
            await trio.to_thread.run_sync(cluster.start_peer, victim)
            await settled(client, "after the restart", exact)
            for event in events[::17]:
                assert set(await client.find(event.graph, None, None, None)) == set(event.quads)
    finally:
        await trio.to_thread.run_sync(cluster.stop)
