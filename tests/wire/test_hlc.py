"""The hybrid logical clock: monotone, merging remote time, never trusting wall clocks to agree."""

from __future__ import annotations

import pytest

from eventcloud.wire.hlc import HybridClock, pack, unpack


def test_hybrid_clock_is_monotone_and_merges_remote_time():
    wall = [1000]
    clock = HybridClock(lambda: wall[0])
    a = clock.now()
    b = clock.now()
    assert b > a and unpack(b) == (1000, 1)
    remote = pack(5000, 3)
    merged = clock.observe(remote)
    assert merged > remote
    wall[0] = 10  # the wall clock goes backwards: timestamps do not
    assert clock.now() > merged
    wall[0] = 9000
    assert unpack(clock.now()) == (9000, 0)
    with pytest.raises(ValueError):
        clock.observe(-1)


def test_a_remote_time_far_in_the_future_is_clamped_and_a_bad_saved_clock_too():
    wall = [1000]
    clock = HybridClock(lambda: wall[0], max_ahead_ms=60_000)
    merged = clock.observe((1 << 64) - 1)  # a hostile frame's clock
    assert unpack(merged)[0] <= 1000 + 60_000 and clock.clamped == 1
    assert clock.now() < (1 << 63)  # the next message still fits msgpack's range
    restored = HybridClock(lambda: wall[0], last=(1 << 64) - 3000, max_ahead_ms=60_000)
    assert unpack(restored.last)[0] <= 61_000
