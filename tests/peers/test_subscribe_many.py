"""Registering many subscriptions in one request (`subscribe_many`, issue: scale).

One `mcast_each` stores every subscription of the request on the peers of its own box: the
same peers, stamps and notifications as one `subscribe` each, in a fraction of the frames.
Each item is made or refused on its own at the wire level; the SDK makes the batch all or
nothing.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
import trio

from eventcloud.client import ClientError, Notification
from eventcloud.errors import BadRequest, ErrorCode
from eventcloud.rdf.model import IRI, CompoundEvent, event_graph, make_quad
from eventcloud.testing import open_overlay
from eventcloud.wire.messages import MAX_SUBSCRIBE_MANY, Subscribe, SubscribedMany, SubscribeMany
from eventcloud.wire.ops import Op
from tests.helpers import (
    ALGORITHMS, EXO as EX, PS_PREDICATES as PREDICATES, check_delivered, collect, oracle_solutions,
    random_pubsub_event as random_event, random_subscription,
)


def frames(peers, before: list[Counter]) -> int:
    return sum(sum(v for k, v in p.counters.items() if k.startswith("out:")) -
               sum(v for k, v in c.items() if k.startswith("out:")) for p, c in zip(peers, before))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("seed", [3, 4])
async def test_subscribe_many_matches_the_oracle(autojump_clock, algorithm, seed):
    rng = random.Random(seed)
    async with open_overlay(8, algorithm, seed=seed) as overlay:
        async with overlay.client(2, "subscriber") as subscriber, overlay.client(5, "publisher") as publisher:
            for event in [random_event(rng, i, "early") for i in range(4)]:
                await publisher.publish(event)   # acknowledged before: never notified
            texts = [random_subscription(rng) for _ in range(16)]
            subs = await subscriber.subscribe_many(texts, kind="bindings")
            assert [s.sparql for s in subs] == texts and len({s.id for s in subs}) == len(texts)
            events = [random_event(rng, i) for i in range(20)]
            for event in events:
                await publisher.publish(event)
            for text, sub in zip(texts, subs):
                expected = {e.graph.value: oracle_solutions(text, e) for e in events}
                await check_delivered(sub, {g: s for g, s in expected.items() if s}, text)


async def test_each_subscription_is_stored_on_its_own_box_in_far_fewer_frames(autojump_clock):
    """The same peers store each subscription as with `subscribe`, and nothing else is stored;
    40 subscriptions over 12 peers cost a fraction of the frames of 40 requests."""
    texts = [f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}batch{i}> ?o . ?o {PREDICATES[i % 3].n3()} ?x }} }}"
             for i in range(40)]
    async with open_overlay(12, seed=7) as overlay:
        async with overlay.client(0, "one") as client:
            before = [Counter(p.counters) for p in overlay.peers]
            subs = await client.subscribe_many(texts, kind="signal")
            batched = frames(overlay.peers, before)
            space = overlay.peers[0].state.space
            for sub in subs:
                box = space.pattern_box((None, None, IRI(f"{EX}batch{subs.index(sub)}"), None))
                holders = {p.id for p in overlay.peers if p.subscriptions.get(sub.id) is not None}
                assert holders == {p.id for p in overlay.peers if p.state.zone.intersects(box)}
            assert sum(len(p.subscriptions) for p in overlay.peers) == sum(
                1 for sub in subs for p in overlay.peers if p.subscriptions.get(sub.id) is not None)
            before = [Counter(p.counters) for p in overlay.peers]
            for text in texts:
                await client.subscribe(text.replace("batch", "single"), kind="signal")
            single = frames(overlay.peers, before)
            assert batched * 4 < single, (batched, single)


async def test_a_subscription_made_in_a_batch_is_notified_of_what_follows_it_only(autojump_clock):
    query = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}hb> ?o }} }}"
    async with open_overlay(6) as overlay:
        async with overlay.client(1, "both") as client:
            def event(i: int) -> CompoundEvent:
                g = event_graph("hb", i, i)
                return CompoundEvent(g, (make_quad(g, IRI(f"{EX}s{i}"), IRI(f"{EX}hb"), IRI(f"{EX}o")),))
            await client.publish(event(0))
            first, second = await client.subscribe_many([query, query + " "], kind="signal")
            await client.publish(event(1))   # same client, right after: both must be notified
            for sub in (first, second):
                got: list[Notification] = []
                await collect(sub, 1, got, seconds=30)
                assert [n.event for n in got] == [event_graph("hb", 1, 1).value]


async def test_each_item_is_made_or_refused_on_its_own_and_the_sdk_makes_it_all_or_nothing(autojump_clock):
    good = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p0> ?o }} }}"
    bad = "SELECT * WHERE { GRAPH ?g { ?s ?p "
    async with open_overlay(4) as overlay:
        async with overlay.client(0) as client:
            raw = SubscribedMany.from_wire(await client.call(Op.SUBSCRIBE_MANY, SubscribeMany((
                Subscribe(good), Subscribe(bad), Subscribe("SELECT * WHERE { ?s ?p ?o }"), Subscribe(good)))))
            made = [o.subscribed is not None for o in raw.outcomes]
            assert made == [True, False, False, True]
            assert {raw.outcomes[1].code, raw.outcomes[2].code} == {ErrorCode.BAD_SUBSCRIPTION.value}
            assert "GRAPH" in raw.outcomes[2].message
            assert sum(p.subscriptions.__len__() for p in overlay.peers) > 0
            for outcome in raw.outcomes:
                if outcome.subscribed is not None:
                    await client.unsubscribe(outcome.subscribed.id)
            assert sum(len(p.subscriptions) for p in overlay.peers) == 0

            with pytest.raises(ClientError) as info:
                await client.subscribe_many([good, good, bad])
            assert info.value.code is ErrorCode.BAD_SUBSCRIPTION
            assert "subscription 2 of 3 refused" in info.value.message
            await trio.sleep(1)
            assert sum(len(p.subscriptions) for p in overlay.peers) == 0   # the two made were cancelled
            assert await client.subscribe_many([]) == []
            with pytest.raises(ClientError, match="unknown notification kind"):
                await client.subscribe_many([good], kind="everything")


def test_a_batch_is_bounded() -> None:
    with pytest.raises(BadRequest, match="1 to"):
        SubscribeMany(())
    with pytest.raises(BadRequest, match=f"got {MAX_SUBSCRIBE_MANY + 1}"):
        SubscribeMany(tuple(Subscribe("x") for _ in range(MAX_SUBSCRIBE_MANY + 1)))


async def test_the_sdk_splits_a_long_list_into_bounded_requests(autojump_clock, monkeypatch):
    import eventcloud.client.api as api

    monkeypatch.setattr(api, "MAX_SUBSCRIBE_MANY", 7)
    texts = [f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}split{i}> ?o }} }}" for i in range(17)]
    async with open_overlay(3) as overlay:
        async with overlay.client(0) as client:
            before = sum(p.counters["in:subscribe_many"] for p in overlay.peers)
            subs = await client.subscribe_many(texts, kind="signal")
            assert len(subs) == 17 and sum(p.counters["in:subscribe_many"] for p in overlay.peers) - before == 3


async def test_durable_subscriptions_in_a_batch_get_tickets_and_mailboxes(autojump_clock):
    query = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}dur> ?o }} }}"
    async with open_overlay(5) as overlay:
        async with overlay.client(1, "durable") as client:
            subs = await client.subscribe_many([query, query], kind="signal", durable=True)
            assert all(s.durable and s.ticket for s in subs)
            g = event_graph("dur", 1, 1)
            await client.publish(CompoundEvent(g, (make_quad(g, IRI(f"{EX}s"), IRI(f"{EX}dur"), IRI(f"{EX}o")),)))
            for sub in subs:
                got: list[Notification] = []
                await collect(sub, 1, got, seconds=30)
                assert [(n.event, n.seq) for n in got] == [(g.value, 1)]


async def test_items_whose_box_meets_a_dead_peer_are_refused_and_rolled_back_the_rest_made(autojump_clock):
    """R = 1, one peer killed: a subscription whose box needs it cannot be stored everywhere;
    it is refused (and removed from the peers that took it), the others are made."""
    async with open_overlay(6, seed=11, replicas=1) as overlay:
        space = overlay.peers[0].state.space

        names = [f"{'AbCdEfGhIj'[i % 10]}{'kLmNoPqRsT'[i // 10 % 10]}{i}" for i in range(400)]  # both halves

        def box(i: int):
            return space.pattern_box((None, IRI(f"{EX}{names[i]}"), IRI(f"{EX}{names[-1 - i]}"), None))

        def split(peer):
            needs = [i for i in range(400) if peer.state.zone.intersects(box(i))]
            return needs, [i for i in range(400) if i not in needs]

        victim = next(p for p in overlay.peers[1:] if all(split(p)))
        needs, spared = split(victim)
        chosen = needs[:3] + spared[:5]
        texts = [f"SELECT ?o WHERE {{ GRAPH ?g {{ <{EX}{names[i]}> <{EX}{names[-1 - i]}> ?o }} }}" for i in chosen]
        victim.stop()
        await overlay.network.kill(victim.address)
        async with overlay.client(0) as client:
            raw = SubscribedMany.from_wire(await client.call(Op.SUBSCRIBE_MANY, SubscribeMany(
                tuple(Subscribe(t) for t in texts))))
            assert [o.subscribed is not None for o in raw.outcomes] == [False] * 3 + [True] * 5
            assert all(o.code == ErrorCode.UNREACHABLE.value and "rolled back" in o.message
                       for o in raw.outcomes[:3])
            alive = [p for p in overlay.peers if p is not victim]
            made = {o.subscribed.id for o in raw.outcomes if o.subscribed is not None}
            held = {ident for p in alive for ident in (s.id for s in p.subscriptions)}
            assert held == made


async def test_a_peer_stores_a_batchs_subscriptions_with_one_log_write(autojump_clock):
    """A `mcast_each`'s items for one peer run in one call (`Matcher._local_store_subs`): one
    log write for all its subscriptions (the fsync and the replica's copy shared), each with
    its own stamp, in order."""
    texts = [f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}one{i}> ?o }} }}" for i in range(60)]
    async with open_overlay(6, seed=2) as overlay:
        writes = Counter()
        for peer in overlay.peers:
            store, write = peer.subscriptions.store, peer.subscriptions.store.write

            async def counted(mutations, *args, __peer=peer.id, __write=write, **kwargs):
                writes[__peer] += sum(1 for m in mutations if m[0] == "sub")
                writes[__peer, "calls"] += any(m[0] == "sub" for m in mutations)
                return await __write(mutations, *args, **kwargs)
            store.write = counted
        async with overlay.client(0, "one") as client:
            subs = await client.subscribe_many(texts, kind="signal")
            holders = {p.id: [s for s in subs if p.subscriptions.get(s.id) is not None] for p in overlay.peers}
            assert sum(len(h) for h in holders.values()) > len(texts)       # several peers per box
            for peer in overlay.peers:
                if holders[peer.id]:
                    assert writes[peer.id] == len(holders[peer.id])          # each persisted
                    assert writes[peer.id, "calls"] == 1                      # in one write
                    stamps = [peer.subscriptions.get(s.id).t for s in holders[peer.id]]
                    assert len(set(stamps)) == len(stamps)


async def test_a_malformed_item_of_a_batch_fails_alone(autojump_clock):
    """Items of one routed batch are decoded and built on their own: a parsed form a peer
    refuses fails that item with bad-request; the others are stored."""
    from eventcloud.sparql.subscription import parse_subscription
    from eventcloud.wire.messages import StoreSubscription, SubscriptionRecord
    from eventcloud.wire.parsed import subscription_to_wire

    async with open_overlay(1) as overlay:
        peer = overlay.peers[0]

        def item(ident: str, parsed) -> dict:
            text = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}{ident}> ?o }} }}"
            return StoreSubscription(SubscriptionRecord(ident, text, "signal", peer.address, 0, parsed=parsed(text))
                                     ).to_wire()
        good = lambda text: subscription_to_wire(parse_subscription(text))  # noqa: E731
        results = await peer.router.dispatcher.run_routed_each("store_sub", [
            item("a", good), item("b", lambda text: ["not", "a", "subscription"]), {"record": 7}, item("c", good)])
        assert results[0] == 1 and results[3] == 1
        assert isinstance(results[1], BadRequest) and "parsed subscription" in results[1].message
        assert isinstance(results[2], BadRequest)
        assert peer.subscriptions.get("a") and peer.subscriptions.get("c") and not peer.subscriptions.get("b")
