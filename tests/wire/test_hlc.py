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
