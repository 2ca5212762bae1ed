"""Leaves decided at the ownership authority (peers/membership/merges.py): whatever the heir's
crash loses (its answer, its saved merge, its question), the leaver's zone ends with exactly one
server and every acknowledged quad in it, once.

Before, the leaver and its heir decided between them: an heir that saved its merge and crashed
before answering came back serving the leaver's zone beside the leaver, which took the lost
answer for a failed leave and kept its zone (the first test fails so)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from eventcloud.client import connect
from eventcloud.overlay import heirs
from eventcloud.testing import open_overlay
from peers.authority import LocalAuthority, zone_map
from tests.helpers import spread_events


async def _crash(overlay, peer) -> None:
    """As if killed: gone from the network at once, its runtime ended (its state file stays)."""
    peer.stop()
    await overlay.network.kill(peer.address)


async def _restart(overlay, index: int, data_root: Path):
    peer = overlay.peers[index]
    with trio.fail_after(60):
        await peer.stopped.wait()
    overlay.peers[index] = await overlay.add_peer(data_dir=data_root / f"peer-{index}")
    overlay.peers.pop()   # add_peer appended it: it takes the crashed one's place
    return overlay.peers[index]


async def _published(overlay) -> list:
    events = spread_events(24, "leave")
    async with overlay.client(0) as client:
        for event in events:
            await client.publish(event)
    return events


async def _each_event_whole_once(client, events) -> None:
    assert await client.count() == sum(len(e) for e in events)
    for event in events:
        assert len(await client.find(event.graph)) == len(event), event.graph


def _asks_late(heir) -> tuple[trio.Event, trio.Event]:
    """The heir's transaction waits (`asking` set) until the test sets `go_on`."""
    asking, go_on = trio.Event(), trio.Event()
    real = heir.membership.merges.decisions

    class Late:
        async def absorb(self, *args, **kwargs) -> None:
            asking.set()
            await go_on.wait()
            await real.absorb(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(real, name)
    heir.membership.merges.decisions = Late()
    return asking, go_on


async def assert_zone_map_is_what_is_served(overlay, client) -> None:
    """The authority's zone map (written only by the transactions that decide foundings, splits
    and leaves) names exactly the zones the peers serve, box for box."""
    status = await client.status()
    served = {p.id: p.zone for p in status.peers}
    assert await zone_map(overlay.authority, overlay.peers[0].current.overlay) == served


async def _servers(client, zone) -> list[str]:
    """The peers `status` lists as serving any part of `zone` (stand-ins included)."""
    status = await client.status()
    return [p.id for p in status.peers if p.zone.intersects(zone.bounds)]


@pytest.mark.parametrize("crash", ["after saving the merge", "after the authority's yes", "before asking"])
async def test_a_leave_whose_heir_crashes_ends_with_one_server_of_the_zone(autojump_clock, tmp_path, crash):
    async with open_overlay(4, seed=5, authority=LocalAuthority(), data_root=tmp_path) as overlay:
        events = await _published(overlay)
        leaver = next(p for p in overlay.peers[1:] if heirs(p.current.zone, p.current.neighbours))
        zone = leaver.current.zone
        candidates = heirs(zone, leaver.current.neighbours)
        index = next(i for i, p in enumerate(overlay.peers) if p.id == candidates[0] and i > 0)
        heir = overlay.peers[index]
        merges = heir.membership.merges

        if crash == "after saving the merge":   # merged and saved; the answer never leaves
            async def crash_now(*args, **kwargs) -> None:
                await _crash(overlay, heir)
                await trio.sleep_forever()
            merges.announce = crash_now
        else:
            real = merges.decisions

            class Crashing:
                async def absorb(self, *args, **kwargs) -> None:
                    if crash == "after the authority's yes":
                        await real.absorb(*args, **kwargs)
                    await _crash(overlay, heir)
                    await trio.sleep_forever()

                def __getattr__(self, name):
                    return getattr(real, name)
            merges.decisions = Crashing()

        outcome: list = []

        async def leave() -> None:
            async with connect(leaver.address, transport=overlay.network) as own:
                try:
                    outcome.append(await own.leave())
                except Exception as exc:   # noqa: BLE001 - a refused leave is an outcome here
                    outcome.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(leave)
            await trio.sleep(20)   # the leaver's tries to reach its heir are over: it decided
            await _restart(overlay, index, tmp_path)
            await trio.sleep(20)   # the restarted heir settles its saved merge, tables repair
        assert outcome, "the leave neither returned nor failed"
        kept = crash == "before asking"
        if kept:
            assert isinstance(outcome[0], Exception) and not leaver.stopped.is_set()
            assert leaver.current.zone == zone
        else:
            assert not isinstance(outcome[0], Exception), outcome[0]
            assert leaver.counters["leaves_decided_by_authority"] == 1
            await leaver.stopped.wait()
        async with overlay.client(0) as client:
            servers = await _servers(client, zone)
            assert servers == ([leaver.id] if kept else [heir.id]), servers
            await assert_zone_map_is_what_is_served(overlay, client)
            await _each_event_whole_once(client, events)


async def test_a_leaver_restarted_before_it_saved_its_leave_serves_nothing_of_its_old_zone(autojump_clock, tmp_path):
    """Killed after its heir took the zone and before it saved its end, the leaver comes back
    with its old zone in its state file; the authority's mark sends it to rejoin as a new peer
    (before, nothing in the authority told it: the epoch was unchanged, and its neighbours'
    tables no longer named it, so it served the zone again beside the heir)."""
    async with open_overlay(4, seed=5, authority=LocalAuthority(), data_root=tmp_path) as overlay:
        events = await _published(overlay)
        index, leaver = next((i, p) for i, p in enumerate(overlay.peers)
                             if i > 0 and heirs(p.current.zone, p.current.neighbours))
        zone = leaver.current.zone

        async def killed_before_it_saved_its_end() -> None:
            await _crash(overlay, leaver)
            await trio.sleep_forever()

        leaver.membership.replication.drop = killed_before_it_saved_its_end
        async with trio.open_nursery() as nursery:
            async def leave() -> None:
                async with connect(leaver.address, transport=overlay.network) as own:
                    with trio.move_on_after(5):
                        try:
                            await own.leave()
                        except Exception:   # noqa: BLE001 - cut off before it answers
                            pass
            nursery.start_soon(leave)
            await trio.sleep(2)
        restarted = await _restart(overlay, index, tmp_path)
        await trio.sleep(20)
        assert restarted.id != leaver.id   # rejoined as a new peer
        async with overlay.client(0) as client:
            servers = await _servers(client, zone)
            assert leaver.id not in servers and len(servers) >= 1
            await assert_zone_map_is_what_is_served(overlay, client)
            await _each_event_whole_once(client, events)


async def test_a_leaver_stopped_mid_leave_withdraws_it_when_restarted_and_its_heir_then_takes_nothing(
        autojump_clock, tmp_path):
    """Stopped while its heir was still asking the authority, the leaver comes back serving its
    zone; its restart withdraws the attempt first, so the heir's late transaction fails and the
    heir drops what it received (else both would serve the zone)."""
    async with open_overlay(4, seed=5, authority=LocalAuthority(), data_root=tmp_path) as overlay:
        events = await _published(overlay)
        index, leaver = next((i, p) for i, p in enumerate(overlay.peers)
                             if i > 0 and heirs(p.current.zone, p.current.neighbours))
        zone = leaver.current.zone
        heir = next(p for p in overlay.peers if p.id == heirs(zone, leaver.current.neighbours)[0])
        asking, go_on = _asks_late(heir)
        async with trio.open_nursery() as nursery:
            async def leave() -> None:
                async with connect(leaver.address, transport=overlay.network) as own:
                    with trio.move_on_after(5):
                        try:
                            await own.leave()
                        except Exception:   # noqa: BLE001 - stopped before it answers
                            pass
            nursery.start_soon(leave)
            with trio.fail_after(30):
                await asking.wait()
            await _crash(overlay, leaver)
            restarted = await _restart(overlay, index, tmp_path)
            assert restarted.id == leaver.id and restarted.current.zone == zone
            go_on.set()
            await trio.sleep(20)
        assert heir.current.merging is None and not heir.current.zone.covers(zone)
        assert heir.counters["merges_refused"] == 1
        async with overlay.client(0) as client:
            assert await _servers(client, zone) == [leaver.id]
            await assert_zone_map_is_what_is_served(overlay, client)
            await _each_event_whole_once(client, events)


async def test_a_leave_whose_caller_goes_away_is_withdrawn_and_its_heir_then_takes_nothing(autojump_clock):
    """`eventcloud leave` interrupted (its connection closed while the heir still asks the
    authority): the leaver's handler is cancelled; it withdraws the attempt before it serves its
    zone again, so the heir's late transaction fails and only the leaver serves the zone (before,
    it served on with the attempt still open, and the heir took the zone as well)."""
    async with open_overlay(4, seed=5, authority=LocalAuthority()) as overlay:
        events = await _published(overlay)
        leaver = next(p for p in overlay.peers[1:] if heirs(p.current.zone, p.current.neighbours))
        zone = leaver.current.zone
        heir = next(p for p in overlay.peers if p.id == heirs(zone, leaver.current.neighbours)[0])
        asking, go_on = _asks_late(heir)
        async with connect(leaver.address, transport=overlay.network) as own:
            async with trio.open_nursery() as nursery:
                async def leave() -> None:
                    with pytest.raises(Exception):   # noqa: B017 - cut short, any error
                        await own.leave()
                nursery.start_soon(leave)
                with trio.fail_after(30):
                    await asking.wait()
                nursery.cancel_scope.cancel()
        await trio.sleep(5)
        go_on.set()
        await trio.sleep(20)
        assert not leaver.stopped.is_set() and leaver.current.zone == zone
        assert heir.current.merging is None and not heir.current.zone.covers(zone)
        async with overlay.client(0) as client:
            assert await _servers(client, zone) == [leaver.id]
            await assert_zone_map_is_what_is_served(overlay, client)
            await _each_event_whole_once(client, events)
