"""`status` answers with a peer down, whichever peer it is."""

from __future__ import annotations

from eventcloud.cli.render import partition_report
from eventcloud.overlay import NeighboursLearned
from eventcloud.testing import open_overlay
from tests.helpers import sample_events


async def test_status_lists_the_peer_holding_the_spaces_lowest_corner_as_down(autojump_clock):
    """A status multicast starts at the owner of the space's lowest corner (an overlay's first
    peer, as a rule). With that peer down, status failed ("… unreachable; retried for 5 s")
    until its replica took its zone over; with any other peer down it listed it as down. The
    peers are now asked one by one along their tables when the multicast cannot start."""
    async with open_overlay(5, seed=1, failure_timeout=600.0) as overlay:
        async with overlay.client(1) as client:
            for event in sample_events(20):
                await client.publish(event)
        whole = overlay.peers[0].state.space.whole_space()
        root = next(p for p in overlay.peers if p.state.zone.contains(tuple(lo for lo, _ in whole)))
        other = next(i for i, p in enumerate(overlay.peers) if p is not root)
        held = len(list(root.storage.store.sync.find(None, None, None, None)))
        assert held > 0
        root.stop()
        await overlay.network.kill(root.address)
        async with overlay.client(other) as client:
            status = await client.status()
            assert {p.id for p in status.peers} == {p.id for p in overlay.peers}
            assert [p.id for p in status.peers if p.down] == [root.id]
            assert sum(p.quads for p in status.peers if not p.down) == 100 - held
            ok, report = partition_report(status)
            assert ok, report


async def test_status_crawling_the_tables_asks_a_stale_entry_once(autojump_clock):
    """The fault simulation's seed 56 spun for ever (virtual time stood still): crawling the
    tables, an entry whose address another peer answers now (a peer that rejoined there under a
    new id) was answered by that peer, so the entry itself was neither answered nor silent,
    and was asked again, and again."""
    from eventcloud.overlay import Neighbour

    async with open_overlay(5, seed=1, failure_timeout=600.0) as overlay:
        whole = overlay.peers[0].state.space.whole_space()
        root = next(p for p in overlay.peers if p.state.zone.contains(tuple(lo for lo, _ in whole)))
        others = [i for i, p in enumerate(overlay.peers) if p is not root]
        entry, live = overlay.peers[others[0]], overlay.peers[others[1]]
        entry.state.step(NeighboursLearned({**entry.state.neighbours, "rejoined-since": Neighbour(live.address, live.state.zone, 0)}))
        real_call, calls = entry.router.call, []

        async def counted(address, op, *args, **kwargs):
            calls.append(op)
            assert len(calls) < 500, "the crawl asks the same peers again and again"
            return await real_call(address, op, *args, **kwargs)

        entry.router.call = counted
        root.stop()
        await overlay.network.kill(root.address)
        async with overlay.client(others[0]) as client:
            status = await client.status()
        assert {p.id for p in status.peers} == {p.id for p in overlay.peers}
        assert [p.id for p in status.peers if p.down] == [root.id]
