"""The zone guard: a zone change waits for the stores under way and holds new ones off."""

from __future__ import annotations

import pytest
import trio

from eventcloud.errors import ErrorCode, Unavailable
from peers.store import ZoneGuard


async def test_a_change_waits_for_stores_under_way_and_new_stores_wait_for_it(autojump_clock):
    guard = ZoneGuard()
    log: list[str] = []

    async def store(name: str, seconds: float) -> None:
        async with guard.store():
            log.append(f"{name} in")
            await trio.sleep(seconds)
            log.append(f"{name} out")

    async def change() -> None:
        async with guard.change():
            log.append("change in")
            await trio.sleep(1)
            log.append("change out")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(store, "a", 2)
        await trio.sleep(0.1)
        nursery.start_soon(change)
        await trio.sleep(0.1)
        nursery.start_soon(store, "b", 1)  # arrives while the change waits: goes after it
    assert log == ["a in", "a out", "change in", "change out", "b in", "b out"]


async def test_a_cancelled_change_lets_stores_through_again(autojump_clock):
    guard = ZoneGuard()
    await guard.acquire_store()
    with trio.move_on_after(1):
        await guard.acquire_change()  # waits for the store above, then gives up
    with trio.fail_after(1):
        async with guard.store():     # not held off by the change that gave up
            pass
    guard.release_store()
    with trio.fail_after(1):
        async with guard.change():    # nothing under way: at once
            pass


async def test_store_within_waits_for_a_change_at_most_that_long_and_refuses_a_zone_handed_over(autojump_clock):
    guard = ZoneGuard()
    assert await guard.store_within(1)  # no change under way: at once
    guard.release_store()
    held = trio.Event()

    async def handed_over() -> None:  # a leave: takes the gate and ends without giving it back
        await guard.acquire_change()
        held.set()
        await trio.sleep(5)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(handed_over)
        await held.wait()
        started = trio.current_time()
        assert not await guard.store_within(2)  # the change outlasts the wait
        assert trio.current_time() - started == 2
    assert not await guard.store_within(2)  # its task ended holding the gate: handed over for good


async def test_a_zone_change_after_the_zone_was_handed_over_is_refused_as_unavailable(autojump_clock):
    """A join split reaching a peer whose leave ended holding the gate: a typed refusal the
    joiner retries elsewhere (it was trio's BrokenResourceError, an internal error, before)."""
    guard = ZoneGuard()

    async def handed_over() -> None:
        await guard.acquire_change()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(handed_over)
    with pytest.raises(Unavailable, match="handed its zone over") as info:
        async with guard.change():
            pass
    assert info.value.code is ErrorCode.UNAVAILABLE
