"""Residual operator predicates in the shared index: exact answers, shared evaluation, the three
evaluation orders, containment (against brute force) and statistics."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from eventcloud.matching.containment import contains, equivalent
from eventcloud.matching.index import SubscriptionIndex
from eventcloud.matching.ordering import ORDERS, ResidualPlan
from eventcloud.matching.reference import matches, solutions
from eventcloud.matching.statistics import Statistics
from eventcloud.sparql.filters.operators import CallTable, active, call_operator
from eventcloud.sparql.subscription import Var, parse_subscription
from eventcloud.testing.operator_workload import PREFIXES, CountingOperators, overlapping_workload, reading

OPS = CountingOperators()
OPSET = OPS.operator_set()
_PARSED: dict[str, object] = {}


def parse(text: str):
    if text not in _PARSED:
        _PARSED[text] = parse_subscription(text, operators=OPSET)
    return _PARSED[text]


def body(filters: str, extra: str = "") -> str:
    return (PREFIXES + "SELECT * WHERE { GRAPH ?g { ?s ex:value ?v . ?s ex:lat ?lat . ?s ex:long ?long " + extra
            + "} " + filters + " }")


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_index_with_operators_equals_each_subscription_alone(order, seed):
    rng = random.Random(seed)
    texts = overlapping_workload(rng, 120)
    subs = [parse(t) for t in texts]
    index = SubscriptionIndex(order=order, containment=seed != 3)
    for i, sub in enumerate(subs):
        index.add(f"s{i}", sub)
    for n in range(40):
        event = reading(random.Random(seed * 1000 + n), n)
        OPS.calls.clear()
        table = CallTable(call_operator, lambda op: True)
        with active(table):
            found = index.match(event)
            while (key := found.next()) is not None:
                found.record(key, found.evaluate(key))
            got = found.result()
        # shared evaluation: every distinct (operator, arguments) at most once for the event
        assert all(count == 1 for count in OPS.calls.values()), OPS.calls.most_common(3)
        assert len(OPS.calls) == len(table)
        assert got == [f"s{i}" for i, sub in enumerate(subs) if matches(sub, event)]
        # and the synchronous path answers the same
        assert index.match_event(event) == got


def test_a_conjunct_shared_by_subscriptions_is_evaluated_once_including_built_ins():
    near = "t:near(?v, 10)"
    texts = [body(f"FILTER({near} && ?v > 5)"), body(f"FILTER(?v > 5) FILTER({near})"),
             body(f"FILTER({near} && ?v > 5 && ?v < 30)").replace("?v", "?x")]
    index = SubscriptionIndex(order="sequential")
    for i, text in enumerate(texts):
        index.add(str(i), parse(text))
    event = reading(random.Random(5), 0, sensors=1)
    found = index.match(event)
    keys = []
    while (key := found.next()) is not None:
        keys.append(key[0].text)
        found.record(key, found.evaluate(key))
    assert len(keys) == len(set(keys))               # no predicate twice
    assert keys.count("?v0 > 5") <= 1                 # the built-in conjunct, shared by all three
    assert sum("near" in k for k in keys) <= 1        # the operator conjunct, shared by all three


def test_orders_equal_brute_force_on_random_predicate_sets():
    rng = random.Random(7)
    for _ in range(200):
        n_p = rng.randint(1, 12)
        truth = [rng.random() < 0.6 for _ in range(n_p)]
        owners = [[[rng.randrange(n_p) for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(1, 3))]
                  for _ in range(rng.randint(1, 15))]
        expected = [i for i, clauses in enumerate(owners) if any(all(truth[k] for k in c) for c in clauses)]
        counts = {}
        for order in ORDERS:
            plan = ResidualPlan(order, lambda k: (rng.choice([1.0, 5.0]), rng.random()))
            for i, clauses in enumerate(owners):
                plan.add(i, i, clauses)
            if order != "naive":
                plan.merge("m", range(len(owners)))
            seen = []
            while (key := plan.next()) is not None:
                seen.append(key)
                plan.record(key, truth[key])
            assert len(seen) == len(set(seen))
            assert plan.matched() == expected, order
            counts[order] = len(seen)
        assert counts["sequential"] <= n_p and counts["suborder"] <= n_p


def test_a_false_container_decides_what_it_contains():
    plan = ResidualPlan("sequential")
    plan.add("wide", 0, [["a"]])
    plan.add("narrow", 1, [["a", "b", "c"]], parent="wide")
    assert plan.next() == "a"
    plan.record("a", False)
    assert plan.next() is None and plan.matched() == [] and plan.pruned == 1


# --- containment --------------------------------------------------------------------------------

@pytest.mark.parametrize("wide, narrow", [
    (body("FILTER(?v > 5)"), body("FILTER(?v > 10)")),
    (body("FILTER(?v > 5)"), body("FILTER(?v >= 6 && t:near(?v, 10))")),
    (body("FILTER(t:near(?v, 10))"), body("FILTER(t:near(?v, 10) && ?v < 12)")),
    (body("FILTER(t:near(?v, 10))"), body("FILTER(t:near(?v, 10))", ". ?s ex:kind ex:Traffic ")),
    (body("FILTER(t:near(?v, 10))"), body("FILTER(t:near(?x, 10))").replace("?v", "?x")),
    (body(""), body("FILTER(?v = 7)")),
])
def test_containment_is_found(wide, narrow):
    assert contains(parse(wide), parse(narrow))


@pytest.mark.parametrize("wide, narrow", [
    (body("FILTER(?v > 10)"), body("FILTER(?v > 5)")),
    (body("FILTER(?v > 5)"), body("FILTER(?v >= 5)")),
    (body("FILTER(t:near(?v, 10))"), body("FILTER(t:near(?v, 20))")),
    (body("FILTER(t:near(?v, 10))", ". ?s ex:kind ex:Traffic "), body("FILTER(t:near(?v, 10))")),
    (body("FILTER(t:near(?v, 10) || ?v = 3)"), body("FILTER(t:near(?v, 10))")),
])
def test_containment_is_not_claimed_when_false_or_unsure(wide, narrow):
    assert not contains(parse(wide), parse(narrow))


def test_containment_is_sound_against_brute_force_on_random_events():
    rng = random.Random(4)
    subs = list({t: parse(t) for t in overlapping_workload(rng, 90)}.values())
    events = [reading(random.Random(500 + n), n) for n in range(60)]
    matched = [{n for n, e in enumerate(events) if matches(s, e)} for s in subs]
    found = 0
    for i, s1 in enumerate(subs):
        for j, s2 in enumerate(subs):
            if i != j and contains(s1, s2):
                found += 1
                assert matched[j] <= matched[i]
    assert found > 20
    assert equivalent(subs[0], subs[0])


def _first_quads(sub, event) -> set:
    """The quads S's patterns[0] is matched with in its solutions on `event`."""
    def term(t, row):
        return row[t.name] if isinstance(t, Var) else t
    p = sub.patterns[0]
    return {(term(p.subject, row), term(p.predicate, row), term(p.object, row)) for row in solutions(sub, event)}


def test_first_onto_first_containment_is_sound_chain_by_chain():
    """S1 ⊇ S2 first onto first: every quad S2's first pattern matches in a solution is one
    S1's first pattern matches in a solution (S2 may ride S1's CSMA chain from that quad)."""
    rng = random.Random(9)
    subs = list({t: parse(t) for t in overlapping_workload(rng, 90)}.values())
    events = [reading(random.Random(700 + n), n) for n in range(40)]
    firsts = [[_first_quads(s, e) for e in events] for s in subs]
    found = 0
    for i, s1 in enumerate(subs):
        for j, s2 in enumerate(subs):
            if i != j and contains(s1, s2, first_onto_first=True):
                found += 1
                assert contains(s1, s2)
                assert all(firsts[j][n] <= firsts[i][n] for n in range(len(events)))
    assert found > 20
    swapped = parse(PREFIXES + "SELECT * WHERE { GRAPH ?g { ?s ex:kind ex:Traffic . ?s ex:value ?v } }")
    plain = parse(PREFIXES + "SELECT * WHERE { GRAPH ?g { ?s ex:value ?v . ?s ex:kind ex:Traffic } }")
    assert contains(swapped, plain) and not contains(swapped, plain, first_onto_first=True)


def test_the_containment_tree_follows_removals():
    a, b, c = body("FILTER(t:near(?v, 10))"), body("FILTER(t:near(?v, 10) && ?v > 5)"), \
        body("FILTER(t:near(?v, 10) && ?v > 5 && ?v < 30)")
    index = SubscriptionIndex()
    for ident, text in (("a", a), ("b", b), ("c", c)):
        index.add(ident, parse(text))
    assert index.containers() == {"b": "a", "c": "b"}
    index.remove("b")                          # unsubscribe or a lapsed lease: the same removal
    assert index.containers() == {"c": "a"}
    index.remove("a")
    assert index.containers() == {}
    index.add("b", parse(b))
    assert index.containers() == {}            # only an older subscription is taken as container
    event = reading(random.Random(1), 1)
    assert index.match_event(event) == [i for i, t in (("c", c), ("b", b)) if matches(parse(t), event)]


# --- statistics ---------------------------------------------------------------------------------

def test_statistics_learn_and_travel_as_counts():
    stats = Statistics()
    for value in (True, False, False, False):
        stats.observe_predicate("?v0 > 5", value)
    stats.observe_call("http://op", 100.0)
    stats.observe_matches(["b", "a", "c"])
    assert 0.25 < stats.selectivity("?v0 > 5") < 0.5
    assert stats.selectivity("unknown", hint=0.1) == 0.1
    assert 1.0 < stats.operator_cost("http://op", 1.0) < 100.0
    again = Statistics.from_dict(stats.to_dict())
    assert again.to_dict() == stats.to_dict() and again.matched_together("c", "a") == 1
    with pytest.raises(ValueError):
        Statistics.from_dict({"format": "other"})
    with pytest.raises(ValueError):
        Statistics.from_dict({"format": stats.to_dict()["format"], "templates": {"x": {"evaluated": 1, "true": 5}}})
