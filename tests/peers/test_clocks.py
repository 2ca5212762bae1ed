"""Wall clocks never decide correctness (issue 44.6): a peer whose clock is far off is refused,
and a clock that jumps while its peer runs lapses nothing and stops that peer.

Leases are wall-clock times set by one peer and compared by another. Before, a peer two hours
ahead dropped every subscription it stored as lapsed ("subscriptions_lapsed" was the only
trace) and missed the notifications of the events it owned; one two hours behind set leases
every other peer found over. In-process overlays under a virtual clock; a peer's clock is the
trio clock plus a skew the test sets.
"""

from __future__ import annotations

import pytest
import trio

from eventcloud.errors import ClockOffset
from eventcloud.testing import open_overlay
from tests.helpers import collect, spread_events

HOURS_2 = 2 * 3600 * 1000
EVERYTHING = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"


def _offset_error(exc: BaseException) -> ClockOffset | None:
    if isinstance(exc, ClockOffset):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _offset_error(inner)
        if found is not None:
            return found
    return None


@pytest.mark.parametrize("skew", [HOURS_2, -HOURS_2])
async def test_a_peer_whose_clock_is_two_hours_off_is_refused_at_join(autojump_clock, skew):
    autojump_clock.jump(3 * 3600)   # the virtual clock starts at 0: a wall clock 2 h behind it is a real time
    async with open_overlay(3, seed=4) as overlay:
        with pytest.raises(BaseException) as refused:
            await overlay.add_peer(skew_ms=skew)
        error = _offset_error(refused.value)
        assert error is not None, refused.value
        side = "ahead of" if skew > 0 else "behind"
        assert f"7,200.0 s {side} the clock of the peer at {overlay.peers[0].address}" in error.message
        assert "set this host's time right" in error.message and "30 s" in error.message
        assert len(overlay.peers) == 3
        # a clock off by less than the bound joins as before
        await overlay.add_peer(skew_ms=20_000)
        assert len(overlay.peers) == 4


@pytest.mark.parametrize("algorithm", ["osma", "csma"])
async def test_a_clock_that_jumps_two_hours_lapses_nothing_and_its_peer_stops(autojump_clock, algorithm):
    """One peer's clock jumps two hours ahead while it stores a subscription: it lapses nothing
    (it finds its clock disagrees with its neighbours' before dropping anything), stops serving
    once it has sampled them, its replica takes its zone over, and every event published after
    subscribe returned is notified once."""
    jump = [0]
    async with open_overlay(5, algorithm, seed=7, failure_timeout=3.0) as overlay:
        jumper = await overlay.add_peer(skew_ms=lambda: jump[0])
        async with overlay.client(0, "subscriber") as subscriber, overlay.client(1, "publisher") as publisher:
            sub = await subscriber.subscribe(EVERYTHING, kind="signal")
            assert jumper.subscriptions.get(sub.id) is not None   # the whole space: stored everywhere
            jump[0] = HOURS_2
            await trio.sleep(5)   # lease checks run every second: before, the jumper dropped it here
            assert jumper.counters["subscriptions_lapsed"] == 0
            assert jumper.counters["clock_disagreements"] >= 1
            with trio.fail_after(120):
                while not overlay.clock_stops:
                    await trio.sleep(1)
            assert "ahead of the clock of the peer" in overlay.clock_stops[0].message
            assert all(p.counters["subscriptions_lapsed"] == 0 for p in overlay.peers)
            events = spread_events(30, "after-jump")
            for event in events:
                await publisher.publish(event)
            got: list = []
            await collect(sub, len(events), got, seconds=120)
            graphs = [n.event for n in got]
            assert sorted(graphs) == sorted(e.graph.value for e in events), (len(graphs), len(events))
