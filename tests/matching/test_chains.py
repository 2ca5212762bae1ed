"""Grouping CSMA first steps into chains (pure): identical subscriptions share one, contained
ones (first pattern onto first pattern) ride a container's, every candidate lands in exactly one."""

from __future__ import annotations

import random

from eventcloud.matching.chains import ChainGrouper
from eventcloud.matching.containment import contains
from eventcloud.sparql.subscription import parse_subscription
from eventcloud.testing.operator_workload import CountingOperators, overlapping_workload

EX = "http://ex.org/"


def sub(body: str):
    return parse_subscription(f"SELECT * WHERE {{ GRAPH ?g {{ {body} }} }}")


def test_identical_share_contained_ride_and_others_lead():
    wide = sub(f"?s <{EX}p> ?o . ?o <{EX}q> ?x")
    candidates = [
        ("wide", wide),
        ("same", sub(f"?s <{EX}p> ?o . ?o <{EX}q> ?x")),
        ("filtered", sub(f"?s <{EX}p> ?o . ?o <{EX}q> ?x FILTER(?x > 3)")),
        ("longer", sub(f"?s <{EX}p> ?o . ?o <{EX}q> ?x . ?x <{EX}r> ?y")),
        ("swapped", sub(f"?o <{EX}q> ?x . ?s <{EX}p> ?o")),   # contained, but not from the same first quad
    ]
    plans = ChainGrouper().plan(candidates, lambda c: c[1])
    assert [(p.leader[0], [i[0] for i in p.identical], [c[0] for c in p.contained]) for p in plans] == [
        ("wide", ["same"], ["filtered", "longer"]), ("swapped", [], [])]


def test_every_candidate_is_in_exactly_one_plan_and_riders_are_contained():
    rng = random.Random(3)
    operators = CountingOperators().operator_set()
    subs = [parse_subscription(t, operators=operators) for t in overlapping_workload(rng, 60)]
    grouper = ChainGrouper(max_groups=64)
    plans = grouper.plan(list(enumerate(subs)), lambda c: c[1])
    placed = [c[0] for p in plans for c in (p.leader, *p.identical, *p.contained)]
    assert sorted(placed) == list(range(len(subs)))
    assert any(p.contained for p in plans)
    for p in plans:
        assert all(c[1].chain_key == p.leader[1].chain_key for c in p.identical)
        assert all(contains(p.leader[1], c[1], first_onto_first=True) for c in p.contained)
    # a second plan of the same candidates decides nothing again
    remembered = len(grouper._pairs)
    assert [len(p.contained) for p in grouper.plan(list(enumerate(subs)), lambda c: c[1])] == \
        [len(p.contained) for p in plans]
    assert len(grouper._pairs) == remembered


def test_past_the_group_limit_only_identical_ones_merge():
    wide = sub(f"?s <{EX}p> ?o")
    narrow = [sub(f"?s <{EX}p> ?o FILTER(?o != <{EX}x{n}>)") for n in range(4)]
    candidates = [wide, wide, *narrow]
    plans = ChainGrouper(max_groups=3).plan(candidates, lambda c: c)
    assert len(plans) == 5 and len(plans[0].identical) == 1 and not any(p.contained for p in plans)
    plans = ChainGrouper(max_groups=8).plan(candidates, lambda c: c)
    assert len(plans) == 1 and len(plans[0].contained) == 4


def test_a_grouping_is_reused_for_the_same_candidates():
    wide, narrow, other = sub(f"?s <{EX}p> ?o"), sub(f"?s <{EX}p> ?o FILTER(?o != <{EX}x>)"), sub(f"?s <{EX}q> ?o")
    grouper = ChainGrouper()
    first = grouper.plan([("a", wide), ("b", narrow)], lambda c: c[1], lambda c: c[0])
    decided = len(grouper._pairs)
    again = grouper.plan([("a", wide), ("b", narrow)], lambda c: c[1], lambda c: c[0])
    assert [(p.leader, p.contained) for p in again] == [(p.leader, p.contained) for p in first]
    assert len(grouper._pairs) == decided and len(grouper._layouts) == 1
    assert len(grouper.plan([("a", wide), ("c", other)], lambda c: c[1], lambda c: c[0])) == 2
