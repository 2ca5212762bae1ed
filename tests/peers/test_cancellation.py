"""A task that is cancelled stops alone: work it carried for other tasks (a group write, a
mailbox's writing) is finished or failed with a typed error for them, never with its
trio.Cancelled, and no service of a peer ends quietly.

The bug these pin down: an acknowledgement being forwarded when its subscriber's connection
closed was the leader of a group write; the matcher's write in the same group was handed the
leader's Cancelled, the matcher's nursery ended quietly on it, and the peer went on storing
events it never matched again (tests/web/test_live.py failed so, now and then)."""

from __future__ import annotations

from collections import Counter

import msgpack
import pytest
import trio
import trio.testing

from eventcloud.client import connect
from eventcloud.errors import ErrorCode, EventCloudError
from eventcloud.testing import open_overlay, trio_ms
from eventcloud.wire.messages import Notification
from peers.store import AsyncStore, PeerStore, StoreError, commit, decide
from peers.delivery.homes import _Pending
from peers.matching.work_queue import WorkQueue
from peers.runtime.peer_runtime import _for_the_peers_lifetime
from peers.runtime import dump_tasks


class _SlowStore(AsyncStore):
    """A group commit that takes a while (as replication does), so that it can be cancelled."""

    async def _commit(self, jobs):  # type: ignore[no-untyped-def]
        await trio.sleep(1)
        return await AsyncStore._commit(self, jobs)


async def test_a_group_write_whose_leader_is_cancelled_fails_the_others_with_a_typed_error(autojump_clock):
    store = _SlowStore(PeerStore(None), offload=False)
    outcomes: dict[str, object] = {}
    leader_scope = trio.CancelScope()

    async def leader() -> None:
        with leader_scope:
            await store.write([commit("http://e.example/1")])
        outcomes["leader"] = "cancelled" if leader_scope.cancelled_caught else "written"

    async def follower() -> None:
        try:
            outcomes["follower"] = await store.write([commit("http://e.example/2")])
        except EventCloudError as exc:
            outcomes["follower"] = exc

    async with trio.open_nursery() as nursery:
        async with store._writing:   # both queue first: the leader then carries both writes
            nursery.start_soon(leader)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(follower)
            await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(0.5)         # inside the group commit
        leader_scope.cancel()
    assert outcomes["leader"] == "cancelled"
    error = outcomes["follower"]
    assert isinstance(error, StoreError) and error.code is ErrorCode.UNAVAILABLE, error
    assert "retry" in error.message
    assert await store.write([commit("http://e.example/3")]) == [False]   # the store goes on


ACCEPT_ALL = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"


async def test_a_cancelled_caller_does_not_stop_a_mailboxs_writing_for_the_others(autojump_clock):
    async with open_overlay(1, "osma", seed=1) as overlay:
        peer = overlay.peers[0]
        async with connect([peer.address], transport=overlay.network, physical_ms=trio_ms) as client:
            sub = await client.subscribe(ACCEPT_ALL, kind="signal", durable=True)
            homes = peer.homes
            first_scope = trio.CancelScope()
            kept: list[str] = []

            async def keep(graph: str, scope: trio.CancelScope | None = None) -> None:
                with scope or trio.CancelScope():
                    note = Notification(sub.id, graph, "signal", peer.storage.clock.now())
                    await homes._keep(sub.id, _Pending(graph, trio_ms(), msgpack.packb(note.to_wire())))
                    kept.append(graph)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(keep, "http://e.example/a", first_scope)
                nursery.start_soon(keep, "http://e.example/b")
                await trio.sleep(0)
                first_scope.cancel()   # the first caller leaves while the writing goes on
            assert kept == ["http://e.example/b"]
            box = homes.boxes.get(sub.id)
            assert {graph for graph, _, _ in box.retained.values()} == {"http://e.example/a", "http://e.example/b"}


def _queue(process) -> WorkQueue:  # type: ignore[no-untyped-def]
    """A matching queue with one worker, doing `process`."""
    return WorkQueue(process, Counter(), workers=1, size=8, enqueue_timeout=5)


async def test_work_from_a_task_a_worker_started_elsewhere_is_queued_not_left_with_that_worker():
    """A connection first opened by a matching worker runs in the router's nursery; work that
    requests served on it submit must reach the queue, not the (idle) worker's own list."""
    done: list[str] = []
    async with trio.open_nursery() as elsewhere:   # stands for the router's nursery

        async def process(work) -> None:  # type: ignore[no-untyped-def]
            if work == "open":
                elsewhere.start_soon(later)
            elif work == "inline":
                pass
            else:
                assert work == "served"
            done.append(work)

        async def later() -> None:
            await trio.sleep(0.05)
            await queue.submit("served")

        queue = _queue(process)
        await elsewhere.start(queue.run)
        await queue.submit("open")
        with trio.fail_after(5):
            while "served" not in done:
                await trio.sleep(0.01)
        elsewhere.cancel_scope.cancel()
    assert done == ["open", "served"]


async def test_work_a_worker_submits_from_its_own_tasks_is_done_by_it_next():
    done: list[str] = []

    async def process(work) -> None:  # type: ignore[no-untyped-def]
        if work == "parent":
            async with trio.open_nursery() as inside:   # as `gather` does
                inside.start_soon(queue.submit, "child")
        done.append(work)

    queue = _queue(process)
    async with trio.open_nursery() as nursery:
        await nursery.start(queue.run)
        await queue.submit("parent")
        with trio.fail_after(5):
            while len(done) < 2:
                await trio.sleep(0.01)
        assert queue.queued == 0   # never went through the queue
        nursery.cancel_scope.cancel()
    assert done == ["parent", "child"]


async def test_a_service_that_ends_while_its_peer_runs_stops_the_peer_loudly():
    async def ends(*, task_status=trio.TASK_STATUS_IGNORED) -> None:  # type: ignore[no-untyped-def]
        task_status.started()

    async def runs(*, task_status=trio.TASK_STATUS_IGNORED) -> None:  # type: ignore[no-untyped-def]
        task_status.started()
        await trio.sleep_forever()

    with pytest.raises(BaseExceptionGroup) as raised:
        async with trio.open_nursery() as nursery:
            await nursery.start(_for_the_peers_lifetime, ends)
    (error,) = _leaves(raised.value)
    assert isinstance(error, RuntimeError) and "ends ended while the peer was running" in str(error)
    async with trio.open_nursery() as nursery:   # cancelled with the peer: no error
        await nursery.start(_for_the_peers_lifetime, runs)
        nursery.cancel_scope.cancel()


def _leaves(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for inner in group.exceptions for leaf in _leaves(inner)]
    return [group]


async def test_the_task_dump_names_each_task_and_the_line_it_waits_at():
    async def waiting_for_godot() -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting_for_godot)
        await trio.testing.wait_all_tasks_blocked()
        text = dump_tasks()
        nursery.cancel_scope.cancel()
    assert "waiting_for_godot" in text
    assert "test_cancellation.py:" in text and "in waiting_for_godot" in text


async def test_the_task_dump_names_the_peer_and_operation_a_hung_call_waits_on():
    """A request cycle between peers shows as calls waiting on each other's addresses."""
    from eventcloud.wire.ops import Op

    async def call(address: str, op: Op) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, "127.0.0.1:4711", Op.DELIVER)
        await trio.testing.wait_all_tasks_blocked()
        text = dump_tasks()
        nursery.cancel_scope.cancel()
    line = next(line for line in text.splitlines() if " in call" in line)
    assert line.endswith(f"in call (address=127.0.0.1:4711, op={Op.DELIVER.value})")


async def test_the_task_dump_is_headed_by_the_peer_and_its_neighbour_table(autojump_clock):
    from peers.runtime import describe_peer

    async with open_overlay(3, seed=1) as overlay:
        peer = overlay.peers[0]
        head = describe_peer(peer.current)
        assert head.startswith(f"peer {peer.id} at {peer.address} (zone splits ")
        assert f"{len(peer.state.neighbours)} neighbours: " in head
        for ident, neighbour in peer.state.neighbours.items():
            assert f"{ident} at {neighbour.address}" in head


async def test_writes_whose_carrying_task_is_cancelled_still_reach_the_replica(autojump_clock):
    """Applied here, they must be there too: a takeover would otherwise serve the gap. The
    carrying task is cancelled at each point of its way in turn. (Over memory streams a frame
    is queued before any point a cancellation can reach, so this holds by the RPC layer too;
    the replication's shield covers a full outbox and a replica being replaced.)"""
    async with open_overlay(3, seed=2) as overlay:   # every zone on two peers (the default)
        await trio.sleep(2)
        peer = overlay.peers[0]
        store = peer.storage.store
        holder = next(p for p in overlay.peers if peer.id in p.replicas.held())
        for steps in range(12):
            keys = [f"k{steps}-{i}" for i in range(3)]
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(store.write, [decide(k, "commit", ["0", "0", "0", "0"]) for k in keys])
                    for _ in range(steps):
                        await trio.lowlevel.cancel_shielded_checkpoint()
                    scope.cancel()
            if store.sync.decision(keys[0]) is None:
                continue   # cancelled before anything was applied here
            await trio.sleep(1)
            copy = holder.replicas._copies[peer.id].store
            assert [copy.decision(k) for k in keys] == ["commit"] * 3, f"cancelled after {steps} steps"
