"""The peer store on its own: quads by event, idempotent retries, metadata, subscriptions, persistence."""

from __future__ import annotations

import re

import pytest

from eventcloud.rdf.model import IRI, XSD, Literal, Quad
from eventcloud.rdf.oxigraph import quad_to_ox
from peers.store import (
    AsyncStore, EventInfo, PeerStore, StoreError, WriteAheadLog, abort, add, commit, decide, delete, notified, remove,
)
from tests.helpers import sample_events


@pytest.fixture(params=["memory", "disk"])
def store(request, tmp_path):
    s = PeerStore(None if request.param == "memory" else tmp_path / "store")
    yield s
    s.close()


def test_quads_are_stored_by_event_and_found_by_pattern(store):
    a, b = sample_events(2)
    assert store.add_quads(a.graph, list(a.quads), len(a), 11) is True
    assert store.add_quads(b.graph, list(b.quads), len(b), 12) is True
    assert store.count() == 10
    assert set(store.find(a.graph, None, None, None)) == set(a.quads)
    assert store.event_info(a.graph) == EventInfo(5, 11, committed=True, held=5)
    p1 = IRI("http://example.org/p1")
    assert {q.g for q in store.find(None, None, p1, None)} == {a.graph, b.graph}
    assert list(store.find(Literal("x"), None, None, None)) == []  # a literal graph matches nothing


def test_storing_again_is_idempotent_and_reports_what_was_new(store):
    (event,) = sample_events(1)
    fresh, new = store.store_quads(event.graph, list(event.quads[:3]), len(event), 5)
    assert (len(fresh), new) == (3, True)
    fresh, new = store.store_quads(event.graph, list(event.quads), len(event), 5)
    assert (set(fresh), new) == (set(event.quads[3:]), False)
    fresh, _ = store.store_quads(event.graph, list(event.quads), len(event), 5)
    assert fresh == [] and store.count() == 5


def test_removing_and_deleting_keep_metadata_exact(store):
    a, b = sample_events(2)
    store.add_quads(a.graph, list(a.quads), 5, 1)
    store.add_quads(b.graph, list(b.quads), 5, 2)
    store.remove_quads(list(a.quads[:2]))
    assert store.event_info(a.graph).held == 3  # three quads of it remain here
    store.remove_quads(list(a.quads[2:]))
    assert store.event_info(a.graph) is None
    assert store.delete_event(b.graph) == 5
    assert store.count() == 0 and store.events() == {}


def test_reserved_graphs_never_leak_into_data(store):
    (event,) = sample_events(1)
    store.add_quads(event.graph, list(event.quads), 5, 1)
    store.put_subscription("s1", {"id": "s1"})
    assert store.count() == 5
    assert list(store.find(IRI("urn:eventcloud:meta"), None, None, None)) == []


def test_subscription_records_replace_and_remove(store):
    store.put_subscription("s1", {"id": "s1", "v": 1})
    store.put_subscription("s1", {"id": "s1", "v": 2})
    store.put_subscription("s2", {"id": "s2"})
    assert store.subscriptions() == {"s1": {"id": "s1", "v": 2}, "s2": {"id": "s2"}}
    assert store.remove_subscription("s1") is True
    assert store.remove_subscription("s1") is False
    assert list(store.subscriptions()) == ["s2"]


def test_everything_survives_reopening(tmp_path):
    (event,) = sample_events(1)
    first = PeerStore(tmp_path / "s")
    first.add_quads(event.graph, list(event.quads), 5, 77)
    first.put_subscription("s1", {"id": "s1"})
    first.close()
    again = PeerStore(tmp_path / "s")
    assert again.count() == 5 and again.event_info(event.graph).published == 77
    assert again.subscriptions() == {"s1": {"id": "s1"}}
    again.close()


def test_subscription_records_survive_a_crash_and_an_older_layout_is_carried_over(tmp_path):
    """Records live in memory, the log and a file written at checkpoints: a crash before the
    checkpoint replays them from the log; records an older version kept in the store's
    subscription graph are read, then moved to the file."""
    import json

    import pyoxigraph as ox

    from peers.store import drop_subscription, put_subscription

    wal = WriteAheadLog(tmp_path / "s" / "wal")  # what a crash leaves: logged, never applied
    wal.append([[put_subscription("s1", {"id": "s1", "v": 1}), put_subscription("s2", {"id": "s2"})],
                [drop_subscription("s2")]])
    wal.close()
    again = PeerStore(tmp_path / "s")
    assert again.subscriptions() == {"s1": {"id": "s1", "v": 1}}
    assert (tmp_path / "s" / "subscriptions.msgpack").exists()   # replayed, then checkpointed
    again._store.add(ox.Quad(ox.NamedNode("urn:eventcloud:subscription:old"), ox.NamedNode("urn:eventcloud:record"),
                             ox.Literal(json.dumps({"id": "old"})), ox.NamedNode("urn:eventcloud:subscriptions")))
    again.close()
    third = PeerStore(tmp_path / "s")
    assert third.subscriptions() == {"s1": {"id": "s1", "v": 1}, "old": {"id": "old"}}
    assert not list(third._store.quads_for_pattern(None, None, None, ox.NamedNode("urn:eventcloud:subscriptions")))
    third.close()
    assert PeerStore(tmp_path / "s").subscriptions() == {"s1": {"id": "s1", "v": 1}, "old": {"id": "old"}}


def test_a_corrupt_subscription_file_is_refused_with_advice(tmp_path):
    PeerStore(tmp_path / "s").close()
    (tmp_path / "s" / "subscriptions.msgpack").write_bytes(b"\xc1garbage")
    with pytest.raises(StoreError, match="corrupt subscription file .* move it away"):
        PeerStore(tmp_path / "s")


@pytest.mark.parametrize("offload", [False, True])
async def test_the_async_store_gives_the_same_answers_in_a_thread_or_inline(tmp_path, offload):
    (event,) = sample_events(1)
    store = AsyncStore(PeerStore(tmp_path / "a"), offload)
    ((fresh, new),) = await store.write([add(event.graph.value, event.quads, 5, 3, committed=True)])
    assert new and len(fresh) == 5
    assert set(await store.find(event.graph, None, None, None)) == set(event.quads)
    assert store.count() == 5
    assert await store.write([delete(event.graph.value)]) == [5]
    store.sync.close()


def test_pending_events_are_invisible_until_committed_and_counted_apart(store):
    a, b = sample_events(2)
    store.write([add(a.graph.value, a.quads, 5, 1, committed=False, tx=("e:1", ["0"] * 4)),
                 add(b.graph.value, b.quads[:2], 5, 2, committed=True)])
    assert store.count() == 2 and store.pending_quads == 5
    assert list(store.find(a.graph, None, None, None, committed_only=True)) == []
    assert len(list(store.find(a.graph, None, None, None))) == 5
    assert store.event_info(a.graph).tx == (("e:1", ("0",) * 4),)
    assert store.write([commit(a.graph.value), commit(a.graph.value)]) == [True, False]  # once
    assert store.count() == 7 and store.pending_quads == 0 and store.event_info(a.graph).tx is None
    store.write([notified(a.graph.value)])
    assert store.event_info(a.graph).notified


def test_an_abort_drops_only_a_pending_event_and_a_retry_joins_the_earlier_attempt(store):
    """A retry's attempt is kept beside the earlier one (either may be the one that commits),
    once each, in arrival order, whichever form the attempt came in."""
    a, b = sample_events(2)
    store.write([add(a.graph.value, a.quads, 5, 1, committed=False, tx=("e:1", [])),
                 add(a.graph.value, a.quads, 5, 1, committed=False, tx=("e:2", [])),
                 add(a.graph.value, a.quads, 5, 1, committed=False, tx=[["e:1", []]])])
    assert store.event_info(a.graph).tx == (("e:1", ()), ("e:2", ()))
    store.write([add(b.graph.value, b.quads, 5, 1, committed=True)])
    assert store.write([abort(a.graph.value), abort(b.graph.value)]) == [5, 0]
    assert store.event_info(a.graph) is None and store.count() == 5


def test_an_abort_for_some_attempts_keeps_an_event_another_attempt_joined(store):
    a, b = sample_events(2)
    store.write([add(a.graph.value, a.quads, 5, 1, committed=False, tx=("e:1", [])),
                 add(a.graph.value, a.quads, 5, 1, committed=False, tx=("e:2", [])),
                 add(b.graph.value, b.quads, 5, 1, committed=False, tx=("e:1", []))])
    assert store.write([abort(a.graph.value, ["e:1"]), abort(b.graph.value, ["e:1"])]) == [0, 5]
    assert store.event_info(a.graph).tx == (("e:1", ()), ("e:2", ()))
    assert store.write([abort(a.graph.value, ["e:1", "e:2"])]) == [5]
    assert store.count() == 0 and store.pending_quads == 0


def test_decisions_keep_the_first(store):
    assert store.write([decide("e:1", "commit", ["a"] * 4), decide("e:1", "abort", ["a"] * 4)]) == ["commit", "commit"]
    assert store.decision("e:1") == "commit" and store.decision("e:2") is None


def test_removing_part_of_an_event_keeps_counters_exact(store):
    (a,) = sample_events(1)
    store.write([add(a.graph.value, a.quads, 5, 1, committed=True)])
    assert store.write([remove(a.graph.value, a.quads[:2]), remove(a.graph.value, a.quads[:2])]) == [2, 0]
    assert store.count() == 3 == store.event_info(a.graph).held
    assert store.write([delete(a.graph.value)]) == [3]
    assert store.count() == 0 and store.events() == {}


def test_the_log_is_replayed_after_a_crash_and_a_torn_tail_is_dropped(tmp_path):
    (a,) = sample_events(1)
    wal = WriteAheadLog(tmp_path / "s" / "wal")  # what a crash leaves: logged, never applied
    wal.append([[add(a.graph.value, a.quads, 5, 9, committed=False, tx=("e:1", [])), commit(a.graph.value)]])
    wal.close()
    with open(tmp_path / "s" / "wal", "ab") as handle:
        handle.write(b"\x00\x00\x01\x00partial")  # a record cut in the middle of its write
    store = PeerStore(tmp_path / "s")
    assert store.count() == 5 and store.event_info(a.graph).committed
    assert store.log_size == 0  # replayed, checkpointed
    store.close()
    again = PeerStore(tmp_path / "s")
    assert again.count() == 5
    again.close()


def _crash(store: PeerStore) -> None:
    """Stop as a kill does: the store's data and the log stay, the events' counts (written at
    checkpoints) are not written."""
    store._wal.close()
    store._records.close()
    del store._store


def test_after_a_crash_events_count_the_quads_the_store_holds_not_what_the_replay_found_new(tmp_path):
    """The log replays writes the store may have applied already: an add found its quads there
    and counted none, a removal found them gone and counted none. Found auditing 8 real peers'
    stores after a stop: events counting 1 quad of 10 held, one peer 255 short (that peer may
    have been killed, or its counts drifted live: docs/queries.md)."""
    a, b = sample_events(2)
    store = PeerStore(tmp_path / "s")
    store.write([add(a.graph.value, a.quads[:1], 5, 1, committed=True),
                 add(b.graph.value, b.quads, 5, 1, committed=False, tx=("e:1", ["0"]))])
    store.checkpoint()
    store.write([add(a.graph.value, a.quads[1:], 5, 1, committed=True), remove(b.graph.value, b.quads[:2])])
    assert (store.held(), store.count()) == (8, 5)
    _crash(store)
    again = PeerStore(tmp_path / "s")
    assert again.event_info(a.graph).held == 5 and again.event_info(b.graph).held == 3
    assert (again.held(), again.count(), again.committed_quads, again.pending_quads) == (8, 5, 5, 3)
    again.write([remove(b.graph.value, b.quads[2:])])
    _crash(again)
    third = PeerStore(tmp_path / "s")
    assert third.event_info(b.graph) is None and (third.held(), third.count()) == (5, 5)
    third.close()


def test_attempts_written_by_an_earlier_version_read_as_one_attempt_after_a_restart(tmp_path):
    """Logs and checkpoints of earlier versions hold one attempt as [key, point]; they read as
    the list of attempts this version keeps, and stay so through a checkpoint."""
    (a,) = sample_events(1)
    triples = add(a.graph.value, a.quads, 5, 9, committed=False)[2]
    wal = WriteAheadLog(tmp_path / "s" / "wal")
    wal.append([[["add", a.graph.value, triples, 5, 9, False, ["e:1", ["0"] * 4]]]])
    wal.close()
    store = PeerStore(tmp_path / "s")
    assert store.event_info(a.graph).tx == (("e:1", ("0",) * 4),)
    store.write([add(a.graph.value, a.quads, 5, 9, committed=False, tx=("e:2", ["1"] * 4))])
    store.close()
    again = PeerStore(tmp_path / "s")
    assert again.event_info(a.graph).tx == (("e:1", ("0",) * 4), ("e:2", ("1",) * 4))
    again.close()


@pytest.mark.parametrize("tx", [["e:1"], [1, ["0"]], [["e:1", ["0"]], "x"], {"e": 1}, ["e:1", "0"]])
def test_a_mutation_with_a_malformed_attempt_is_refused_by_name(tx):
    from eventcloud.errors import BadRequest
    from peers.store import check_mutation

    (a,) = sample_events(1)
    mutation = add(a.graph.value, a.quads, 5, 9, committed=False)
    mutation[-1] = tx
    with pytest.raises(BadRequest, match="store mutation 'add'"):
        check_mutation(mutation)


@pytest.mark.parametrize("triple, why", [
    (["http://a b", "http://p", "http://o"], "invalid triple"),               # a space in an IRI
    (["relative", "http://p", "http://o"], "invalid triple"),                 # no scheme
    (["http://s", "http://p", ["x", "not an iri"]], "invalid triple"),        # a datatype that is no IRI
    (["http://s", "http://p", ["x", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "e n"]],
     "invalid triple"),                                                         # a malformed language tag
    (["http://s", "http://p", ["x", "http://www.w3.org/2001/XMLSchema#string", "en"]], "rdf:langString"),
    (["http://s", "http://p", ["x", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"]], "language tag"),
    (["http://s", "http://p", 3], "an object is an IRI"),
    ([["x"], "http://p", "http://o"], "subject and a predicate are IRIs"),
])
def test_a_mutation_with_a_triple_the_store_cannot_take_is_refused_before_it_is_logged(tmp_path, triple, why):
    """Another peer's add is checked by the store's own parser (not our rules again): what it
    could not store is refused by name, and nothing reaches the log (a logged write that fails
    to apply would fail again at every replay)."""
    from eventcloud.errors import BadRequest

    store = PeerStore(tmp_path / "s")
    mutation = ["add", "http://example.org/g1", [triple], 1, 9, True, None]
    with pytest.raises(BadRequest, match=f"store mutation 'add'.*{re.escape(why)}"):
        store.write([mutation])
    assert store.log_size == 0 and store.count() == 0
    store.close()


def test_a_full_disk_refuses_the_write_and_applies_nothing(tmp_path, monkeypatch):
    import errno

    (a,) = sample_events(1)
    store = PeerStore(tmp_path / "s")

    def full(records, sync=True):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store._wal, "append", full)
    with pytest.raises(StoreError, match="disk is full"):
        store.write([add(a.graph.value, a.quads, 5, 1, committed=True)])
    assert store.count() == 0 and store.event_info(a.graph) is None
    store.close()


async def test_concurrent_writes_share_one_fsync(tmp_path):
    import trio

    store = AsyncStore(PeerStore(tmp_path / "s"), offload=True)
    events = sample_events(20)
    before = store.sync._wal.fsyncs
    async with trio.open_nursery() as nursery:
        for event in events:
            nursery.start_soon(store.write, [add(event.graph.value, event.quads, 5, 1, committed=True)])
    assert store.count() == 100
    assert store.sync._wal.fsyncs - before < 20  # grouped
    store.sync.close()


async def test_a_write_that_waits_for_nothing_is_applied_at_once_and_never_overtakes_a_queued_one(tmp_path):
    """Marks (never synced) are applied in the calling task when nothing is being written; while
    a durable write is in the store's thread, a mark for the same event waits behind it."""
    import trio
    import trio.testing

    store = AsyncStore(PeerStore(tmp_path / "s"), offload=True)
    a, b = sample_events(2)
    await store.write([add(a.graph.value, a.quads, 5, 1, committed=False, tx=("k", ["0"]))])
    with trio.testing.assert_no_checkpoints():  # no lock, no thread, no task switch
        assert await store.write([commit(a.graph.value)], durable=False) == [True]
    assert store.event_info(a.graph).committed

    order: list[str] = []

    async def durable() -> None:
        await store.write([add(b.graph.value, b.quads, 5, 1, committed=False, tx=("k", ["0"]))])
        order.append("add")

    async def mark() -> None:
        flipped = await store.write([commit(b.graph.value)], durable=False)
        order.append(f"commit {flipped}")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(durable)
        await trio.testing.wait_all_tasks_blocked()  # the add is in the store's thread
        nursery.start_soon(mark)
    # the commit found the event (stored by the add queued before it) and flipped it
    assert order == ["add", "commit [True]"] and store.event_info(b.graph).committed
    store.sync.close()


async def test_a_write_cancelled_while_it_waits_its_turn_is_never_applied(tmp_path):
    """A write queues, then waits for the one in the store's thread. Cancelled meanwhile (its
    request's connection closed), it stayed queued and the next write applied it: after the
    caller had left the zone guard, so past a split's snapshot, into a zone no longer its own
    (8 real peers moving: two quads held twice, one of them outside its peer's zone, for good)."""
    import threading

    import trio
    import trio.testing

    store = AsyncStore(PeerStore(tmp_path / "s"), offload=True)
    first, cancelled, later = sample_events(3)
    release = threading.Event()
    write_many = store.sync.write_many

    def slow_write_many(*args, **kwargs):
        release.wait(10)
        return write_many(*args, **kwargs)

    store.sync.write_many = slow_write_many  # type: ignore[method-assign]

    async def write(event) -> None:
        await store.write([add(event.graph.value, event.quads, 5, 1, committed=True)])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write, first)
        await trio.testing.wait_all_tasks_blocked()          # `first` is in the store's thread
        waiting = trio.CancelScope()

        async def write_then_cancelled() -> None:
            with waiting:
                await write(cancelled)

        nursery.start_soon(write_then_cancelled)
        await trio.testing.wait_all_tasks_blocked()          # queued, waiting its turn
        waiting.cancel()
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    store.sync.write_many = write_many  # type: ignore[method-assign]
    await write(later)
    assert store.event_info(cancelled.graph) is None and store.event_info(later.graph) is not None
    assert store.count() == len(first.quads) + len(later.quads)
    store.sync.close()


def test_a_removal_keeps_an_event_that_still_holds_quads_whatever_its_count_said(tmp_path):
    """An event whose count had fallen below the quads it held (an audit of 8 real peers found
    counts of 1 for events of 10) was forgotten by a removal that took its count to 0, with
    quads left: after a restart its peer counted 9,770 quads nowhere. What is left is counted
    from the store now, and a quad named twice in one removal is removed once."""
    from dataclasses import replace as with_

    (a,) = sample_events(1)
    store = PeerStore(tmp_path / "s")
    store.write([add(a.graph.value, a.quads, 5, 1, committed=True)])
    store._events[a.graph.value] = with_(store.event_info(a.graph), held=2)   # the drift, however it came
    assert store.write([remove(a.graph.value, [a.quads[0], a.quads[1], a.quads[1]])]) == [2]
    assert store.event_info(a.graph).held == 3 and len(store.find_list(a.graph, None, None, None)) == 3
    store.close()
    again = PeerStore(tmp_path / "s")
    assert again.event_info(a.graph).held == 3 and again.held() == 3
    again.close()


def test_quads_held_without_their_events_metadata_are_counted_by_the_next_add_and_removed_when_named(tmp_path):
    """Quads whose event's metadata was lost (by an older version: forgotten with quads left)
    used to be invisible to both writes: an add counted only what it brought (the event then
    counted fewer quads than it held, seen on 1 event in 10), and a removal of an unknown event
    removed nothing (the quads stayed outside their peer's zone after a handover)."""
    a, b = sample_events(2)
    store = PeerStore(tmp_path / "s")
    store.write([add(a.graph.value, a.quads, 5, 1, committed=True), add(b.graph.value, b.quads, 5, 1, committed=True)])
    for graph in (a.graph.value, b.graph.value):
        store._forget(graph)   # the lost metadata, however it came
    store._count_all()
    assert store.held() == 0

    fresh, new = store.write([add(a.graph.value, a.quads[:2], 5, 1, committed=True)])[0]
    assert fresh == [] and new, "the quads were held already; the event was unknown here"
    assert store.event_info(a.graph).held == 5 and store.held() == 5 and store.count() == 5

    assert store.write([remove(b.graph.value, list(b.quads[:3]) + [b.quads[0]])]) == [3]
    assert len(store.find_list(b.graph, None, None, None)) == 2 and store.event_info(b.graph) is None
    store.close()
    again = PeerStore(tmp_path / "s")
    assert again.event_info(a.graph).held == 5 and again.held() == 5
    again.close()


def test_a_quad_named_twice_in_one_add_is_counted_once(store):
    (a,) = sample_events(1)
    fresh, new = store.write([add(a.graph.value, list(a.quads) + [a.quads[0]], 5, 1, committed=True)])[0]
    assert len(fresh) == 5 and new
    assert store.event_info(a.graph).held == 5 and store.held() == 5
    fresh, new = store.write([add(a.graph.value, [a.quads[1], a.quads[1]], 5, 1, committed=True)])[0]
    assert fresh == [] and not new and store.held() == 5


def test_an_estimate_counts_every_stored_match_pending_included_and_no_literal_subject(store):
    """What a join's planner weighs patterns by (bind joins): counted in the store, no quad built."""
    a, b = sample_events(2)
    store.write([add(a.graph.value, a.quads, 5, 1, committed=False, tx=("e:1", ["0"] * 4)),
                 add(b.graph.value, b.quads[:2], 5, 2, committed=True)])
    assert store.estimate(None, None, None, None) == 7
    assert store.estimate(a.graph, None, None, None) == 5 and store.estimate(b.graph, None, None, None) == 2
    first = a.quads[0]
    assert store.estimate(None, first.s, first.p, None) == len([q for q in a.quads + b.quads[:2]
                                                                if q.s == first.s and q.p == first.p])
    assert store.estimate(None, Literal("x"), None, None) == 0
    tricky = Literal('say "}" \\ then\n} .', language="en")
    store.write([add(b.graph.value, [b.quads[2]._replace(o=tricky)], 5, 2, committed=True)])
    assert store.estimate(None, None, None, tricky) == 1 and store.estimate(b.graph, None, b.quads[2].p, tricky) == 1


def test_the_stores_records_stay_out_of_every_query_and_an_older_layout_is_carried_over(tmp_path):
    """Events' states and decisions live apart from the data (peers/store/records.py), so a query with
    nothing pending reads the data store whole instead of naming every event graph (0.13–0.2 s
    per query at 20,000 events). A store written by an older version, with its records in named
    graphs of the data store, is carried over on opening; a crash during that is carried over again."""
    import json as _json

    import pyoxigraph as ox

    a, b = sample_events(2)
    old = ox.Store(str(tmp_path / "s"))
    old.extend([quad_to_ox(q) for q in a.quads + b.quads])
    for event, committed in ((a, True), (b, False)):
        old.add(ox.Quad(ox.NamedNode(event.graph.value), ox.NamedNode("urn:eventcloud:info"),
                        ox.Literal(_json.dumps([5, 1, committed, False, None if committed else [["e:1", ["0"] * 4]], 5])),
                        ox.NamedNode("urn:eventcloud:meta")))
    old.add(ox.Quad(ox.NamedNode("urn:eventcloud:tx:e:1"), ox.NamedNode("urn:eventcloud:record"),
                    ox.Literal(_json.dumps(["commit", ["0"] * 4])), ox.NamedNode("urn:eventcloud:decisions")))
    old.flush()
    del old
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    graphs = "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"
    for reopening in range(3):
        store = PeerStore(tmp_path / "s")
        assert store.event_info(a.graph).committed and not store.event_info(b.graph).committed
        assert store.event_info(b.graph).held == 5 and store.decision("e:1") == "commit"
        assert (store.count(), store.held()) == (5, 10)
        assert store.query_rows(count, None, None, 100) == [{"n": {"type": "literal", "value": "10",
                                                                     "datatype": XSD + "integer"}}]
        assert {r["g"]["value"] for r in store.query_rows(graphs, None, None, 100)} == {a.graph.value, b.graph.value}
        assert [r["n"]["value"] for r in store.query_rows(count, [a.graph.value], None, 100)] == ["5"]
        assert store.estimate(None, None, None, None) == 10
        if reopening == 0:   # a crash after the records were copied, before the old graphs went:
            store.write([add(a.graph.value, a.quads, 5, 1, committed=True)])   # (the record since stands)
            store.close()
            again = ox.Store(str(tmp_path / "s"))
            stale = [5, 1, False, False, [["e:9", ["0"] * 4]], 5]
            again.add(ox.Quad(ox.NamedNode(a.graph.value), ox.NamedNode("urn:eventcloud:info"),
                              ox.Literal(_json.dumps(stale)), ox.NamedNode("urn:eventcloud:meta")))
            again.flush()
            del again
        else:
            store.close()


def test_a_refused_query_leaves_no_oxigraph_object_to_another_thread():
    """A query past the row cap raised while pyoxigraph's solutions were its locals: the exception
    carried them to the event loop's thread, and dropping them there printed a RuntimeError
    traceback ("unsendable, but is being dropped on another thread") on the peer's stderr."""
    import gc
    import sys
    import threading

    import pyoxigraph as ox

    from eventcloud.errors import EventCloudError
    from peers.store import query_rows

    store = ox.Store()
    store.extend([ox.Quad(ox.NamedNode(f"http://s/{i}"), ox.NamedNode("http://p"), ox.Literal(str(i)),
                          ox.NamedNode("http://g")) for i in range(50)])
    caught: list[BaseException] = []
    hooked: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: hooked.append(str(unraisable.exc_value))

    def run() -> None:
        try:
            query_rows(store, "SELECT * WHERE { ?s ?p ?o }", None, None, 10)
        except EventCloudError as exc:
            caught.append(exc)

    try:
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
        assert caught and "more than 10 results" in str(caught[0])
        caught.clear()
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert not hooked, hooked


def test_quads_read_for_a_cursor_are_written_as_the_codec_writes_them(tmp_path):
    """`iter_wire_quads` writes the store's terms straight to the wire form (no model quad per
    match): IRIs, plain, typed and language-tagged literals come out as `quad_to_wire` of the
    model quad, and `keep` sees each one."""
    from eventcloud.rdf.model import Literal as L
    from eventcloud.wire.codec import quad_to_wire

    store = PeerStore(tmp_path / "s")
    g = IRI("http://ex.org/g")
    quads = [Quad(g, IRI("http://ex.org/s"), IRI("http://ex.org/p"), o) for o in (
        IRI("http://ex.org/o"), L("plain"), L("21.5", "http://www.w3.org/2001/XMLSchema#double"),
        L("bonjour", language="fr"), L("tab\tand \"quotes\"\n"))]
    store.add_quads(g, quads, len(quads), 0)
    kept: list = []
    found = list(store.iter_wire_quads((None, None, None, None), lambda wire: kept.append(wire) or True))
    assert sorted(map(repr, found)) == sorted(repr(quad_to_wire(q)) for q in quads) == sorted(map(repr, kept))
    assert list(store.iter_wire_quads((None, None, None, None), lambda wire: False)) == []

