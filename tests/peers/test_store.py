"""The peer store on its own: quads by event, idempotent retries, metadata, subscriptions, persistence."""

from __future__ import annotations

import pytest

from eventcloud.rdf.model import IRI, XSD, Literal
from peers.store import AsyncStore, PeerStore
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
    assert store.event_info(a.graph) == (5, 11)
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
    assert store.event_info(a.graph) == (5, 1)  # three quads of it remain here
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
    assert again.count() == 5 and again.event_info(event.graph) == (5, 77)
    assert again.subscriptions() == {"s1": {"id": "s1"}}
    again.close()


@pytest.mark.parametrize("offload", [False, True])
async def test_the_async_store_gives_the_same_answers_in_a_thread_or_inline(tmp_path, offload):
    (event,) = sample_events(1)
    store = AsyncStore(PeerStore(tmp_path / "a"), offload)
    fresh, new = await store.store_quads(event.graph, list(event.quads), 5, 3)
    assert new and len(fresh) == 5
    assert set(await store.find(event.graph, None, None, None)) == set(event.quads)
    assert await store.count() == 5
    assert await store.delete_event(event.graph) == 5
    store.sync.close()
