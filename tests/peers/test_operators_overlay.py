"""Registered operators through a whole overlay, under OSMA and CSMA, against evaluating each
subscription alone: exact notifications and bindings, heavy overlap (identical, contained and
partially overlapping subscriptions), and every distinct operator call evaluated at most once per
event on each peer (side-effect counters in the operators)."""

from __future__ import annotations

import random

import pytest
import trio

from eventcloud.errors import OperatorMismatch
from eventcloud.testing import open_overlay
from eventcloud.testing.operator_workload import CountingOperators, overlapping_workload, reading
from tests.helpers import ALGORITHMS, check_delivered, expected_of


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("order", ["naive", "sequential", "suborder"])
async def test_overlapping_operator_subscriptions_match_each_alone(autojump_clock, algorithm, order):
    rng = random.Random(11)
    ops = CountingOperators()
    texts = overlapping_workload(rng, 14)
    events = [reading(random.Random(100 + i), i) for i in range(12)]
    expected = expected_of(texts, events)
    assert sum(1 for e in expected if e) >= 4  # the workload does match
    async with open_overlay(4, algorithm, seed=3, operators=tuple(ops.operator_set().values()),
                            evaluation_order=order, operator_inline_cost=1e9) as overlay:
        async with overlay.client(1, "sub") as subscriber, overlay.client(2, "pub") as publisher:
            subs = [await subscriber.subscribe(text, kind="bindings") for text in texts]
            for event in events:
                await publisher.publish(event)
            for text, sub, want in zip(texts, subs, expected):
                await check_delivered(sub, want, text, seconds=60, extra=1)
        peers = overlay.peers
        calls = sum(p.counters["operator_calls"] for p in peers)
        distinct = sum(len(t) for p in peers for t in p.matcher.runner._tables.values())
        # each peer evaluated each distinct (operator, arguments) of an event once: no more calls
        assert calls == distinct == ops.total()
        assert calls > 0


async def test_expensive_operators_run_off_the_loop_and_failures_are_counted():
    """Real clock: calls above the inline cost run in threads; one that raises, one past its
    budget: both are FILTER errors (no notification), counted, and the peer keeps serving."""
    from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, Quad
    from eventcloud.sparql.filters.operators import Operator
    import time

    def slow(x):
        time.sleep(0.5)
        return True

    def boom(x):
        raise ValueError("no")

    ops = (Operator("http://t/slow", slow, cost=1e6, arity=(1, 1)), Operator("http://t/boom", boom, cost=1e6,
                                                                             arity=(1, 1)),
           Operator("http://t/pos", lambda x: x > 0, cost=1e6, arity=(1, 1)))
    query = ("SELECT ?v WHERE { GRAPH ?g { ?s <http://ex/v> ?v } FILTER(<http://t/%s>(?v)) }")
    async with open_overlay(2, "osma", seed=1, operators=ops, operator_budget=0.1) as overlay:
        async with overlay.client(0) as client:
            slow_sub = await client.subscribe(query % "slow", kind="signal")
            boom_sub = await client.subscribe(query % "boom", kind="signal")
            pos_sub = await client.subscribe(query % "pos", kind="signal")
            g = IRI("http://ex/e1")
            await client.publish(CompoundEvent(g, (Quad(g, IRI("http://ex/s"), IRI("http://ex/v"),
                                                        Literal("3", XSD + "integer")),)))
            with trio.fail_after(10):
                note = await pos_sub.receive()
            assert note.event == g.value
            await trio.sleep(1.0)
            for sub in (slow_sub, boom_sub):
                with pytest.raises(trio.WouldBlock):
                    sub._receive.receive_nowait()
        counters = [p.counters for p in overlay.peers]
        assert sum(c["operator_timeouts"] for c in counters) >= 1
        assert sum(c["operator_errors"] for c in counters) >= 1


async def test_a_peer_with_other_operators_cannot_join(autojump_clock):
    from eventcloud.operators import city, text

    async with open_overlay(1, "osma", seed=2, operators=city.OPERATORS, operator_plugins=False) as overlay:
        with pytest.raises(OperatorMismatch) as refused:
            await overlay.add_peer(operators=text.OPERATORS)
        assert "withinRadius" in str(refused.value) and "similarity" in str(refused.value)
        assert "http://eventcloud.io/ns/geo#distance" in refused.value.missing
        await overlay.add_peer(operators=city.OPERATORS)  # the same set joins
        assert len(overlay.peers) == 2


async def test_unknown_operator_is_refused_at_subscribe(autojump_clock):
    from eventcloud.client import ClientError
    from eventcloud.operators import city

    async with open_overlay(2, "osma", seed=2, operators=city.OPERATORS) as overlay:
        async with overlay.client(0) as client:
            with pytest.raises(ClientError) as refused:
                await client.subscribe("SELECT * WHERE { GRAPH ?g { ?s <http://ex/p> ?v } "
                                       "FILTER(<http://nowhere/op>(?v)) }")
            assert refused.value.code == "bad-subscription" and "http://nowhere/op" in str(refused.value)
            await client.subscribe("SELECT * WHERE { GRAPH ?g { ?s <http://ex/lat> ?a . ?s <http://ex/long> ?b } "
                                   "FILTER(<http://eventcloud.io/ns/geo#withinRadius>(?a, ?b, 56.1, 10.2, 100)) }")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_expensive_operators_in_threads_under_a_virtual_clock(autojump_clock, algorithm):
    """Operators declared expensive run in the pool even in a MockClock test: same answers, and
    calls still counted once per distinct (operator, arguments) per event per peer."""
    rng = random.Random(5)
    ops = CountingOperators()
    texts = overlapping_workload(rng, 10)
    events = [reading(random.Random(300 + i), i) for i in range(8)]
    expected = expected_of(texts, events)
    async with open_overlay(3, algorithm, seed=5, operators=tuple(ops.operator_set().values()),
                            operator_inline_cost=0.0) as overlay:
        async with overlay.client(0, "sub") as subscriber, overlay.client(2, "pub") as publisher:
            subs = [await subscriber.subscribe(text, kind="bindings") for text in texts]
            for event in events:
                await publisher.publish(event)
            for text, sub, want in zip(texts, subs, expected):
                await check_delivered(sub, want, text, seconds=60, extra=1)
        calls = sum(p.counters["operator_calls"] for p in overlay.peers)
        distinct = sum(len(t) for p in overlay.peers for t in p.matcher.runner._tables.values())
        assert calls == distinct == ops.total() > 0
        assert sum(p.counters["operator_timeouts"] for p in overlay.peers) == 0
