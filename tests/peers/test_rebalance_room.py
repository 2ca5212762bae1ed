"""An empty peer whose make-room round failed does not make its neighbours move again for nothing.

On a real cluster two empty peers that could not leave asked their loaded neighbours to step
aside round after round for minutes (each round moving their data twice) and never got room.
After a failed round a peer makes room again only once its neighbourhood changed and a
back-off (every, 4×, 16×, …) has passed; a round that succeeds resets both."""

from __future__ import annotations

import random
from collections import Counter

import trio

from eventcloud.overlay import CoordinateSpace, Neighbour, Zone
from peers.rebalancer import Rebalancer
from peers.state import PeerState

SPACE = CoordinateSpace(mapping="identity")
EVERY = 5.0


def rebalancer(outcomes: list[bool]) -> tuple[Rebalancer, list[float]]:
    """A rebalancer whose rounds of making room answer `outcomes` in turn; the times they ran."""
    lower, upper = Zone(SPACE.whole_space()).split()
    state = PeerState(id="empty", address="h:1", zone_or_none=lower, neighbours={"n1": Neighbour("h:2", upper)},
                      space=SPACE)
    balancer = Rebalancer(state, None, None, None, None, Counter(), every=EVERY, ratio=4.0,  # type: ignore[arg-type]
                          min_quads=1, make_room=True, rng=random.Random(1), ready=trio.Event(), step_down=None)  # type: ignore[arg-type]
    rounds: list[float] = []

    async def make_room(busiest: int) -> bool:
        rounds.append(trio.current_time())
        return outcomes[len(rounds) - 1]

    balancer._make_room = make_room  # type: ignore[method-assign]
    return balancer, rounds


def change_neighbourhood(balancer: Rebalancer, name: str) -> None:
    balancer.state.neighbours[name] = Neighbour(f"h:{len(balancer.state.neighbours) + 2}",
                                                next(iter(balancer.state.neighbours.values())).zone)


async def test_a_failed_round_is_not_repeated_in_the_same_neighbourhood_and_backs_off(autojump_clock):
    balancer, rounds = rebalancer([False, False, False])
    assert not await balancer._make_room_once(100)
    assert len(rounds) == 1
    await trio.sleep(10 * EVERY)
    assert not await balancer._make_room_once(100)  # same neighbours: it would fail again
    assert len(rounds) == 1 and balancer.counters["rebalance_room_skipped"] == 1

    change_neighbourhood(balancer, "n2")
    assert not await balancer._make_room_once(100)  # changed, and the first back-off (EVERY) is over
    assert len(rounds) == 2
    change_neighbourhood(balancer, "n3")
    await trio.sleep(EVERY)
    assert not await balancer._make_room_once(100)  # changed, but the second back-off is 4 × EVERY
    assert len(rounds) == 2
    await trio.sleep(3 * EVERY)
    assert not await balancer._make_room_once(100)
    assert len(rounds) == 3 and rounds[2] - rounds[1] >= 4 * EVERY
    assert balancer.counters["rebalance_room_failed"] == 3


async def test_a_round_that_makes_room_resets_the_back_off(autojump_clock):
    balancer, rounds = rebalancer([False, True, False, False])
    assert not await balancer._make_room_once(100)
    change_neighbourhood(balancer, "n2")
    await trio.sleep(EVERY)
    assert await balancer._make_room_once(100)
    assert not await balancer._make_room_once(100)  # room again needed later: tried at once
    change_neighbourhood(balancer, "n3")
    await trio.sleep(EVERY)                          # one failure since the success: back-off EVERY again
    assert not await balancer._make_room_once(100)
    assert len(rounds) == 4
