"""A peer's subscription registry: identical subscriptions share their parts and one index entry,
through removals and taxonomy swaps, and each keeps its own text, projection and record."""

from __future__ import annotations

from collections import Counter

from eventcloud.rdf.model import IRI, RDF, XSD, CompoundEvent, Literal
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.messages import SubscriptionRecord
from peers.store import AsyncStore, PeerState, PeerStore
from peers.matching import Subscriptions
from tests.helpers import EXT

EX = "http://ex.org/"
PREFIXES = f"PREFIX ex: <{EX}> PREFIX ec: <{EXT}> "
BODY = "{ GRAPH ?g { ?x a ?c FILTER(ec:descendantOf(?c, ex:C0)) } }"
T1 = Taxonomy([(EX + "C1", EX + "C0")], 1)
T2 = Taxonomy([(EX + "C1", EX + "C0"), (EX + "C2", EX + "C1")], 2)


def shared(registry: Subscriptions) -> tuple[int, int, int]:
    """(stored, index entries, distinct FILTER objects among them)."""
    held = list(registry)
    return len(held), registry.index.stats()["entries"], len({id(s.sub.filters) for s in held})


async def test_identical_subscriptions_stay_shared_through_removals_and_taxonomy_swaps() -> None:
    registry = Subscriptions(PeerState(), AsyncStore(PeerStore(None), False), Counter(), tombstone_ttl=60,
                             taxonomy=T1)
    other = f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x a ?c FILTER(ec:descendantOf(?c, ex:C1)) }} }}"
    await registry.add(SubscriptionRecord("o", other, "signal", "127.0.0.1:1", 1))  # first, other FILTERs
    texts = [f"{PREFIXES}SELECT ?x WHERE {BODY}", f"{PREFIXES}SELECT * WHERE {BODY}", f"{PREFIXES}SELECT ?c WHERE {BODY}"]
    for i, text in enumerate(texts):
        await registry.add(SubscriptionRecord(f"s{i}", text, "bindings", "127.0.0.1:1", 1))
    assert shared(registry) == (4, 2, 2)
    assert sorted(registry.set_taxonomy(T2)) == ["o", "s0", "s1", "s2"]
    assert shared(registry) == (4, 2, 2)              # re-bound, still sharing
    assert [registry.get(f"s{i}").sub.sparql for i in range(3)] == texts  # each its own text
    assert [registry.get(f"s{i}").sub.projection for i in range(3)] == [("x",), ("g", "x", "c"), ("c",)]
    assert await registry.remove("s0")                # the first one stored
    await registry.add(SubscriptionRecord("s3", texts[0], "bindings", "127.0.0.1:1", 1))
    assert shared(registry) == (4, 2, 2)
    assert registry.get("s3").record.sparql == texts[0]   # kept packed, whole again when needed
    await registry.add(SubscriptionRecord("s4", texts[1], "bindings", "127.0.0.1:1", 1))
    assert registry.get("s4").packed is registry.get("s1").packed  # identical texts: one packed copy
    assert shared(registry) == (5, 2, 2)
    event = CompoundEvent.from_triples(IRI(EX + "e"), [(IRI(EX + "i"), IRI(RDF + "type"), IRI(EX + "C2"))])
    assert registry.index.match_event(event) == ["o", "s1", "s2", "s3", "s4"]  # C2 ⊑ C1 ⊑ C0 under T2


async def test_a_subscription_built_from_its_parsed_form_keeps_its_text_packed_and_its_record_whole() -> None:
    from eventcloud.sparql.subscription import parse_subscription
    from eventcloud.wire.parsed import subscription_to_wire
    registry = Subscriptions(PeerState(), AsyncStore(PeerStore(None), False), Counter(), tombstone_ttl=60)
    text = f"PREFIX ex: <{EX}> SELECT ?v WHERE {{ GRAPH ?g {{ ?s ex:speed ?v FILTER(?v > 50) }} }}"
    record = SubscriptionRecord("a", text, "bindings", "127.0.0.1:1", 7, expires=99,
                                parsed=subscription_to_wire(parse_subscription(text)))
    stored = await registry.add(record)
    assert stored is not None and stored.sub.sparql == ""          # matching never reads the text
    assert len(stored.packed) < len(text.encode()) // 2
    assert stored.record == SubscriptionRecord("a", text, "bindings", "127.0.0.1:1", 7, expires=99)
    assert Subscriptions.with_parsed(stored) == record             # persisted and handed over whole
    event = CompoundEvent.from_triples(IRI(EX + "e"), [(IRI(EX + "car"), IRI(EX + "speed"), Literal("70", XSD + "integer"))])
    assert registry.index.match_event(event) == ["a"]


async def test_a_record_arriving_with_its_parsed_form_is_persisted_as_it_came_and_rebuilt_after_a_restart() -> None:
    import msgpack

    from eventcloud.sparql.subscription import parse_subscription
    from eventcloud.wire.parsed import subscription_to_wire
    store = PeerStore(None)
    registry = Subscriptions(PeerState(), AsyncStore(store, False), Counter(), tombstone_ttl=60)
    text = f"PREFIX ex: <{EX}> SELECT ?v WHERE {{ GRAPH ?g {{ ?s ex:speed ?v FILTER(?v > 50) }} }}"
    # as a peer receives it: decoded from msgpack (lists, not tuples)
    arrived = SubscriptionRecord.from_wire(msgpack.unpackb(msgpack.packb(SubscriptionRecord(
        "a", text, "bindings", "127.0.0.1:1", 7, parsed=subscription_to_wire(parse_subscription(text))).to_wire())))
    await registry.add(arrived)
    assert store.subscriptions()["a"] == arrived.to_wire()
    again = Subscriptions(PeerState(), AsyncStore(store, False), Counter(), tombstone_ttl=60)
    assert again.get("a").record == registry.get("a").record
    event = CompoundEvent.from_triples(IRI(EX + "e"), [(IRI(EX + "car"), IRI(EX + "speed"), Literal("70", XSD + "integer"))])
    assert again.index.match_event(event) == ["a"]


def test_a_stored_subscription_costs_at_most_1_5_kb_beyond_its_index_entries() -> None:
    """Issue 11's bound, measured as experiments/subscribe_bench does (tracemalloc over the
    registry storing records as they arrive, index entries apart), at 8,000 distinct chains
    (all predicates distinct) and 4,000 sensor-style FILTERed subscriptions."""
    from experiments.subscribe_bench import memory_per_subscription, subscriptions

    for mix, n in (("chains", 8000), ("filters", 4000)):
        held = memory_per_subscription(subscriptions(n, mix))["registry"]
        assert held <= 1500, (mix, n, round(held))


async def test_tombstones_expire_after_their_ttl_and_stay_bounded(autojump_clock) -> None:
    """A removed subscription's tombstone keeps a late copy of it out for `tombstone_ttl`, then
    goes: a peer that sees subscriptions come and go for days holds only the last ttl's."""
    import trio

    registry = Subscriptions(PeerState(), AsyncStore(PeerStore(None), False), Counter(), tombstone_ttl=60)
    for i in range(1000):
        await registry.remove(f"gone-{i}")
        await trio.sleep(1)            # one removal a second: 60 tombstones live at any time
    assert registry.removed("gone-999") and registry.removed("gone-941")
    assert not registry.removed("gone-0") and not registry.removed("gone-939")
    assert len(registry._tombstones) <= 61
    await trio.sleep(61)
    await registry.remove("last")
    assert not registry.removed("gone-999") and registry.removed("last")
    assert len(registry._tombstones) == 1
