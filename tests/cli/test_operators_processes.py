"""Registered operators through real peer processes over TCP, under both algorithms: peers load an
operator module named at start (`--operators`), subscriptions with heavy overlap (identical,
contained, partially overlapping) call them, and every notification is what evaluating each
subscription alone gives, while each peer evaluates each distinct (operator, arguments) pair at
most once per event (the operators log every call to a file of their process)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
import trio

from eventcloud.client import connect
from eventcloud.testing.logged_operators import LOG_VARIABLE
from eventcloud.testing.operator_workload import overlapping_workload, reading
from peers.supervisor import LocalCluster
from tests.helpers import ALGORITHMS, expected_of, notification_solutions

pytestmark = pytest.mark.processes


def _calls(directory: Path) -> dict[str, list[str]]:
    return {log.stem: log.read_text(encoding="utf-8").splitlines() for log in sorted(directory.glob("*.log"))}


async def _settled(directory: Path, quiet: float = 0.5, seconds: float = 20) -> dict[str, list[str]]:
    """The call logs once no peer has written to them for `quiet` seconds (at most `seconds`)."""
    last = _calls(directory)
    with trio.move_on_after(seconds):
        while True:
            await trio.sleep(quiet)
            now = _calls(directory)
            if now == last:
                break
            last = now
    return last


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_operators_loaded_by_real_peers_are_shared_and_notifications_exact(tmp_path, monkeypatch, algorithm):
    log_dir = tmp_path / "calls"
    log_dir.mkdir()
    monkeypatch.setenv(LOG_VARIABLE, str(log_dir))
    rng = random.Random(41 if algorithm == "osma" else 43)
    texts = overlapping_workload(rng, 16)
    events = [reading(random.Random(700 + i), i) for i in range(10)]
    expected = expected_of(texts, events)
    assert sum(len(e) for e in expected) >= 10  # the workload does match
    with LocalCluster(3, data_dir=tmp_path / "c", algorithm=algorithm, seed=7,
                      extra=["--operators", "eventcloud.testing.logged_operators"]) as cluster:
        async with connect(cluster.addresses[0], source="sub") as subscriber, \
                connect(cluster.addresses[2], source="pub") as publisher:
            subs = [await subscriber.subscribe(text, kind="bindings") for text in texts]
            got: list[list] = [[] for _ in subs]

            async def receive(i: int) -> None:
                async for note in subs[i]:
                    got[i].append(note)

            per_event: list[dict[str, Counter]] = []
            async with trio.open_nursery() as nursery:
                for i in range(len(subs)):
                    nursery.start_soon(receive, i)
                seen = await _settled(log_dir)
                for event in events:
                    await publisher.publish(event)
                    graph = event.graph.value
                    with trio.move_on_after(30):
                        while any(graph in want and not any(n.event == graph for n in mine)
                                  for want, mine in zip(expected, got)):
                            await trio.sleep(0.05)
                    now = await _settled(log_dir)
                    per_event.append({pid: Counter(lines[len(seen.get(pid, [])):]) for pid, lines in now.items()})
                    seen = now
                await trio.sleep(1)  # any extra (wrong) notification arrives too
                nursery.cancel_scope.cancel()
            status = (await publisher.status()).to_wire()
        for text, want, mine in zip(texts, expected, got):
            graphs = [n.event for n in mine]
            assert len(graphs) == len(set(graphs)), f"duplicate notification for {text}"
            assert set(graphs) == set(want), f"wrong events for {text}"
            for note in mine:
                assert notification_solutions(note) == want[note.event], text
    calls = sum(sum(c.values()) for chunk in per_event for c in chunk.values())
    assert calls > 0
    repeated = [(pid, line, n) for chunk in per_event for pid, counts in chunk.items()
                for line, n in counts.items() if n > 1]
    assert not repeated, f"a peer evaluated the same operator call twice for one event: {repeated[:3]}"
    # the peers' own counters agree with what the operators saw
    assert sum(p["counters"].get("operator_calls", 0) for p in status["peers"]) == \
        sum(len(lines) for lines in _calls(log_dir).values())
