"""Local matching checked against pyoxigraph as the oracle, over seeded random events and subscriptions.

Every generated (subscription, event) pair is evaluated three ways and must agree:
the oracle (the SPARQL text run over an in-memory store holding only the event's named graph),
`results`/`solutions`/`matches`, and CSMA's chain of rewritings explored over every choice of quad.
Events use canonical lexical forms, as the stores keep them (see filter_values.canonical_term).
"""

from __future__ import annotations

from dataclasses import replace

import random
from collections import Counter

import pytest

from eventcloud.errors import BadRequest
from eventcloud.matching.csma import PartialMatch, advance, is_complete, next_pattern, start
from eventcloud.matching.osma import decide, in_notifier_order, notifier_index
from eventcloud.matching.reference import EventIndex, match_pattern, matches, results, solutions
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, Quad, Term
from eventcloud.sparql.subscription import Subscription, parse_subscription
from eventcloud.wire.codec import partial_from_wire, partial_to_wire
from tests.helpers import EX, PREFIXES, as_rows, cases, oracle, visible

# --- checks -------------------------------------------------------------------------------------

def csma_completions(sub: Subscription, event: CompoundEvent) -> list[PartialMatch]:
    """Follow CSMA from the start, trying every quad for the pattern `next_pattern` designates."""
    done = []

    def walk(partial: PartialMatch) -> None:
        if is_complete(partial):
            done.append(partial)
            return
        index = next_pattern(sub, partial)
        assert index in partial.remaining
        for quad in event.quads:
            following = advance(sub, partial, index, quad)
            if following is not None:
                assert partial_from_wire(partial_to_wire(following)) == following
                walk(following)

    walk(start(sub))
    return done


def pattern0_witnesses(sub: Subscription, event: CompoundEvent) -> set[Quad]:
    """Quads that match the indexing pattern within some solution (brute force)."""
    found = set()
    for solution in solutions(sub, event):
        g, s, p, o = sub.pattern_terms(0, solution)
        found.add(Quad(g, s, p, o))  # type: ignore[arg-type]
    return found


@pytest.mark.parametrize("seed", range(6))
def test_random_subscriptions_agree_with_oracle(seed: int) -> None:
    checked = matched = 0
    for query, sub, event in cases(seed, subscriptions=45, events_each=4):
        expected = oracle(query, event)
        got = results(sub, event)
        context = f"\n{query}\n{event.n_quads()}"
        assert set(as_rows(got)) == set(expected), context
        assert len(as_rows(got)) == len(set(as_rows(got))), "results must be distinct" + context
        assert matches(sub, event) == bool(expected), context
        # solutions: every variable, multiset semantics as SPARQL's SELECT * (without DISTINCT)
        star = query.replace("SELECT DISTINCT ", "SELECT ").split(" WHERE ", 1)
        star_query = star[0].rsplit("SELECT ", 1)[0] + "SELECT * WHERE " + star[1]
        all_solutions = solutions(sub, event)
        assert Counter(as_rows([visible(b) for b in all_solutions])) == Counter(oracle(star_query, event)), context
        # CSMA: a complete rewriting exists iff there is a solution, and completions are solutions
        completions = csma_completions(sub, event)
        assert bool(completions) == bool(expected), context
        assert {frozenset(p.bindings) for p in completions} == set(as_rows(all_solutions)), context
        # OSMA: the notifier is the first quad (in event order) matching patterns[0] in some solution
        witnesses = pattern0_witnesses(sub, event)
        position = notifier_index(sub, event)
        first = next((i for i, q in enumerate(event.quads) if q in witnesses), None)
        assert position == first, context
        # the same answer with an index shared across subscriptions
        assert notifier_index(sub, EventIndex(event)) == position
        # one decision answers both (one join when bindings are wanted)
        assert decide(sub, EventIndex(event), want_solutions=True) == (position, got if position is not None else [])
        assert decide(sub, event, want_solutions=False) == (position, [])
        checked += 1
        matched += bool(expected)
    assert checked == 180
    assert 10 <= matched <= checked - 10  # the generator exercises both outcomes


def test_identical_subscriptions_share_one_decision_and_keep_their_own_projection(monkeypatch) -> None:
    """`decide` with a memo: subscriptions with the same pattern and FILTER objects (as a peer's
    registry shares them) cost one decision per event; each answer is what deciding it alone gives."""
    import eventcloud.matching.osma as osma

    calls = []
    real = osma._decide
    monkeypatch.setattr(osma, "_decide", lambda *a: calls.append(1) or real(*a))
    for query, sub, event in cases(3, subscriptions=30, events_each=3):
        projections = [sub.projection, tuple(reversed(sub.projection)), sub.projection[:1]]
        alike = [replace(sub, projection=p) for p in projections]  # the same patterns and FILTER objects
        view, memo = EventIndex(event), {}
        calls.clear()
        for twin in alike:
            for want in (True, False):
                assert decide(twin, view, want_solutions=want, memo=memo) == decide(twin, view, want_solutions=want)
        assert len(calls) == 2 + 6  # one per kind of answer with the memo, then six alone


def test_quad_order_does_not_change_results_and_notifier_follows_order() -> None:
    r = random.Random(99)
    for query, sub, event in cases(99, subscriptions=30, events_each=2):
        quads = list(event.quads)
        reference = set(as_rows(results(sub, event)))
        witnesses = pattern0_witnesses(sub, event)
        for _ in range(3):
            r.shuffle(quads)
            shuffled = CompoundEvent(event.graph, tuple(quads))
            assert set(as_rows(results(sub, shuffled))) == reference
            position = notifier_index(sub, shuffled)
            expected = next((i for i, q in enumerate(shuffled.quads) if q in witnesses), None)
            assert position == expected


def test_in_notifier_order_every_holder_names_the_same_notifier_quad_whatever_order_it_got() -> None:
    """Holders of one event may see its quads in different orders (one as published, one
    gathered again from the owners for a retry). The notifier rule reads the event in
    `in_notifier_order`, so they all name the same quad, and exactly one owner notifies; in
    the order they got, the random cases below name different quads."""
    r = random.Random(7)
    differed = 0
    for query, sub, event in cases(7, subscriptions=30, events_each=2):
        quads = list(event.quads)
        chosen, raw = set(), set()
        for _ in range(4):
            r.shuffle(quads)
            got = CompoundEvent(event.graph, tuple(quads))
            ordered = in_notifier_order(got)
            assert sorted(map(repr, ordered.quads)) == sorted(map(repr, event.quads))
            for view, seen in ((ordered, chosen), (got, raw)):
                position, _ = decide(sub, view, want_solutions=False)
                seen.add(None if position is None else view.quads[position])
        assert len(chosen) == 1
        differed += len(raw) > 1
    assert differed > 0


# --- targeted semantics -------------------------------------------------------------------

def event(*triples: tuple[str, str, object], graph: str = EX + "g") -> CompoundEvent:
    def term(x: object) -> Term:
        if isinstance(x, (IRI, Literal)):
            return x
        if isinstance(x, int) and not isinstance(x, bool):
            return Literal(str(x), XSD + "integer")
        assert isinstance(x, str)
        return IRI(EX + x) if not x.startswith('"') else Literal(x.strip('"'))
    return CompoundEvent.from_triples(IRI(graph), [(term(s), term(p), term(o)) for s, p, o in triples])


PAPER = """PREFIX foaf: <http://xmlns.com/foaf/0.1/>
SELECT ?id ?name WHERE {
  GRAPH ?g {
    ?id foaf:name ?name .
    ?id foaf:age ?age
  }
  FILTER (?age > 25)
}"""


def test_paper_listing_1_1() -> None:
    sub = parse_subscription(PAPER)
    foaf = "http://xmlns.com/foaf/0.1/"
    young = CompoundEvent.from_triples(IRI(EX + "g1"), [
        (IRI(EX + "al"), IRI(foaf + "name"), Literal("Al")), (IRI(EX + "al"), IRI(foaf + "age"), Literal("20", XSD + "integer"))])
    old = CompoundEvent.from_triples(IRI(EX + "g2"), [
        (IRI(EX + "bo"), IRI(foaf + "name"), Literal("Bo")), (IRI(EX + "bo"), IRI(foaf + "age"), Literal("30", XSD + "integer")),
        (IRI(EX + "al"), IRI(foaf + "name"), Literal("Al"))])
    assert not matches(sub, young) and results(sub, young) == []
    assert results(sub, old) == [{"id": IRI(EX + "bo"), "name": Literal("Bo")}]
    assert notifier_index(sub, old) == 0


def test_shared_variables_are_joined_across_patterns() -> None:
    # the original Java OSMA bug: two patterns each matched, but not by the same ?x
    sub = parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x ex:p ?y . ?x ex:q ?z }} }}")
    assert not matches(sub, event(("a", "p", "b"), ("c", "q", "d")))
    assert matches(sub, event(("a", "p", "b"), ("a", "q", "d")))


def test_repeated_variable_in_one_pattern_must_unify() -> None:
    sub = parse_subscription("SELECT * WHERE { GRAPH ?g { ?x ?p ?x } }")
    assert not matches(sub, event(("a", "p", "b")))
    assert results(sub, event(("a", "p", "a"), ("a", "p", "b"))) == [
        {"g": IRI(EX + "g"), "x": IRI(EX + "a"), "p": IRI(EX + "p")}]
    q = parse_subscription("SELECT * WHERE { GRAPH ?g { ?g ?p ?o } }")
    assert matches(q, event(("g", "p", "a"))) and not matches(q, event(("a", "p", "g")))


def test_accept_all_and_graph_iri() -> None:
    every = parse_subscription("SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }")
    ev = event(("a", "p", "b"), ("b", "q", 3))
    assert results(every, ev) == [{"g": IRI(EX + "g")}]
    assert len(solutions(every, ev)) == 2
    assert notifier_index(every, ev) == 0
    fixed = parse_subscription(f"SELECT * WHERE {{ GRAPH <{EX}g> {{ ?s ?p ?o }} }}")
    other = parse_subscription(f"SELECT * WHERE {{ GRAPH <{EX}h> {{ ?s ?p ?o }} }}")
    assert matches(fixed, ev) and not matches(other, ev)
    assert results(fixed, ev)[0].keys() == {"s", "p", "o"}


def test_blank_nodes_are_hidden_variables() -> None:
    sub = parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ _:x ex:p ?o . _:x ex:q [] }} }}")
    assert sub.projection == ("g", "o")
    ev = event(("a", "p", "b"), ("a", "q", "c"), ("d", "p", "e"))
    assert results(sub, ev) == [{"g": IRI(EX + "g"), "o": IRI(EX + "b")}]
    assert {k for s in solutions(sub, ev) for k in s} == {"g", "o", "_:b0", "_:b1"}


def test_filter_on_graph_variable_inside_and_outside_block() -> None:
    ev = event(("a", "p", "b"), graph=EX + "g7")
    for place in ("inside", "outside"):
        f = 'FILTER(STRENDS(STR(?g), "7"))'
        body = "?s ?p ?o " + f if place == "inside" else "?s ?p ?o"
        tail = f if place == "outside" else ""
        query = f"SELECT * WHERE {{ GRAPH ?g {{ {body} }} {tail} }}"
        assert matches(parse_subscription(query), ev) == bool(oracle(query, ev)) is True


def test_filter_errors_make_solutions_disappear() -> None:
    ev = event(("a", "p", "b"), ("a", "age", 30))
    for condition, expected in [
        ("?age > 25", True), ("?nope > 1", False), ("!(?nope > 1)", False), ("?nope > 1 || ?age = 30", True),
        ("?nope > 1 && ?age = 30", False), ("?o > 1", False), ("!(?o > 1)", False), ("bound(?o) && !bound(?zz)", True),
    ]:
        query = f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?s ex:p ?o . ?s ex:age ?age }} FILTER({condition}) }}"
        assert matches(parse_subscription(query), ev) is expected, condition
        assert bool(oracle(query, ev)) is expected, condition


def test_results_are_distinct_and_deterministic() -> None:
    sub = parse_subscription(f"{PREFIXES}SELECT ?s WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}")
    ev = event(("b", "p", "x"), ("a", "p", "y"), ("b", "q", "z"), ("a", "q", 1))
    rows = results(sub, ev)
    assert rows == [{"s": IRI(EX + "a")}, {"s": IRI(EX + "b")}]
    assert rows == results(sub, CompoundEvent(ev.graph, tuple(reversed(ev.quads))))


def test_match_pattern_unifies_graph_and_repeated_variables() -> None:
    sub = parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x ex:p ?x . ?x ex:q ?y }} }}")
    g = IRI(EX + "g")
    q1 = Quad(g, IRI(EX + "a"), IRI(EX + "p"), IRI(EX + "a"))
    assert match_pattern(sub, 0, q1, {}) == {"g": g, "x": IRI(EX + "a")}
    assert match_pattern(sub, 0, Quad(g, IRI(EX + "a"), IRI(EX + "p"), IRI(EX + "b")), {}) is None
    assert match_pattern(sub, 0, q1, {"g": IRI(EX + "other")}) is None
    assert match_pattern(sub, 1, Quad(g, IRI(EX + "b"), IRI(EX + "q"), IRI(EX + "c")), {"x": IRI(EX + "a")}) is None
    assert sub.pattern_terms(1, {"x": IRI(EX + "a")}) == (None, IRI(EX + "a"), IRI(EX + "q"), None)


def test_csma_next_pattern_prefers_indexing_then_most_bound() -> None:
    sub = parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?a ?p ?b . ?c ?q ?d . ?b ex:r ?e . ?z ex:s ex:t }} }}")
    partial = start(sub)
    assert next_pattern(sub, partial) == 0
    g = IRI(EX + "g")
    partial = advance(sub, partial, 0, Quad(g, IRI(EX + "x"), IRI(EX + "p"), IRI(EX + "y")))
    assert partial is not None and partial.remaining == (1, 2, 3)
    assert next_pattern(sub, partial) == 2  # ?b bound and ex:r fixed: 2 positions; pattern 3 also has 2 -> query order
    with pytest.raises(ValueError):
        advance(sub, partial, 0, Quad(g, IRI(EX + "x"), IRI(EX + "p"), IRI(EX + "y")))


def test_csma_filters_run_as_soon_as_their_variables_are_bound() -> None:
    sub = parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?s ex:age ?age . ?s ex:name ?n }} "
                             f"FILTER(?age > 25) FILTER(?missing = 1 || ?n = \"Al\") }}")
    g = IRI(EX + "g")
    young = Quad(g, IRI(EX + "a"), IRI(EX + "age"), Literal("20", XSD + "integer"))
    old = Quad(g, IRI(EX + "a"), IRI(EX + "age"), Literal("30", XSD + "integer"))
    assert advance(sub, start(sub), 0, young) is None  # rejected at the first step already
    step = advance(sub, start(sub), 0, old)
    assert step is not None
    assert advance(sub, step, 1, Quad(g, IRI(EX + "a"), IRI(EX + "name"), Literal("Bo"))) is None
    done = advance(sub, step, 1, Quad(g, IRI(EX + "a"), IRI(EX + "name"), Literal("Al")))
    assert done is not None and is_complete(done)


def test_partial_match_wire_round_trip_and_validation() -> None:
    partial = PartialMatch((1, 3), (("a", IRI(EX + "x")), ("b", Literal("1", XSD + "integer")),
                                    ("c", Literal("chat", language="fr"))))
    wire = partial_to_wire(partial)
    assert wire == [[1, 3], [["a", EX + "x"], ["b", ["1", XSD + "integer"]],
                             ["c", ["chat", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "fr"]]]]
    assert partial_from_wire(wire) == partial
    assert hash(partial_from_wire(wire)) == hash(partial)
    for garbage in [None, [], [[1], [], 3], [["1"], []], [[3, 1], []], [[1, 1], []], [[1], [["a"]]],
                    [[1], [["a", 5]]], [[1], [["a", ["x"]]]], [[1], [["a", "not an iri"]]],
                    [[1], [["b", "http://x"], ["a", "http://y"]]], [[1], [["a", ["x", "http://dt", "en"]]]],
                    [[1], [["a", ["x", XSD + "string", "not a tag!"]]]], [[-1], []], [[True], []]]:
        with pytest.raises(BadRequest):
            partial_from_wire(garbage)


def test_empty_and_unsatisfiable_cases() -> None:
    sub = parse_subscription("SELECT * WHERE { GRAPH ?g { ?s ?p ?o FILTER(false) } }")
    assert not matches(sub, event(("a", "p", "b")))
    assert notifier_index(sub, event(("a", "p", "b"))) is None
    assert csma_completions(sub, event(("a", "p", "b"))) == []
    constant = parse_subscription(f"SELECT * WHERE {{ GRAPH ?g {{ <{EX}a> <{EX}p> <{EX}b> }} }}")
    assert results(constant, event(("a", "p", "b"))) == [{"g": IRI(EX + "g")}]
    ground = parse_subscription(f"SELECT * WHERE {{ GRAPH <{EX}g> {{ <{EX}a> <{EX}p> <{EX}b> }} }}")
    assert results(ground, event(("a", "p", "b"))) == [{}]
