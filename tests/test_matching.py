"""Local matching checked against pyoxigraph as the oracle, over seeded random events and subscriptions.

Every generated (subscription, event) pair is evaluated three ways and must agree:
the oracle (the SPARQL text run over an in-memory store holding only the event's named graph),
`results`/`solutions`/`matches`, and CSMA's chain of rewritings explored over every choice of quad.
Events use canonical lexical forms, as the stores keep them (see filter_values.canonical_term).
"""

from __future__ import annotations

import random
from collections import Counter

import pyoxigraph as ox
import pytest

from eventcloud.sparql.filters.values import canonical_term
from eventcloud.matching.reference import (
    EventIndex, PartialMatch, advance, is_complete, match_pattern, matches, next_pattern,
    notifier_index, results, solutions, start,
)
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, Quad, Term
from eventcloud.sparql.subscription import Subscription, parse_subscription

EX = "http://ex.org/"
PREFIXES = f"PREFIX ex: <{EX}> PREFIX xsd: <{XSD}> "


# --- oracle ------------------------------------------------------------------------------------

def _from_ox(term: object) -> Term:
    if isinstance(term, ox.NamedNode):
        return IRI(term.value)
    assert isinstance(term, ox.Literal)
    if term.language:
        return Literal(term.value, language=term.language)
    return Literal(term.value, term.datatype.value)


def oracle(query: str, event: CompoundEvent) -> list[frozenset]:
    """The oracle's solutions (a multiset, as a list) of `query` over a store holding only the event."""
    store = ox.Store()
    store.load(event.n_quads().encode(), format=ox.RdfFormat.N_QUADS)
    solutions_ = store.query(query)
    names = [v.value for v in solutions_.variables]
    rows = []
    for row in solutions_:
        rows.append(frozenset((name, _from_ox(row[name])) for name in names if row[name] is not None))
    return rows


def as_rows(bindings: list[dict]) -> list[frozenset]:
    return [frozenset(b.items()) for b in bindings]


def visible(bindings: dict) -> dict:
    """Drop blank-node variables (SELECT * does not project them)."""
    return {k: v for k, v in bindings.items() if not k.startswith("_:")}


# --- generators -------------------------------------------------------------------------------

SUBJECTS = [IRI(EX + n) for n in ("a", "b", "c", "d")]
PREDICATES = [IRI(EX + n) for n in ("p", "q", "name", "age", "when")]
LANGS = ["en", "fr", "en-us"]


def random_literal(r: random.Random) -> Literal:
    kind = r.randrange(9)
    if kind == 0:
        return Literal(str(r.randint(-5, 40)), XSD + "integer")
    if kind == 1:
        return canonical_term(Literal(f"{r.randint(-20, 60) / 4}", XSD + "decimal"))  # type: ignore[return-value]
    if kind == 2:
        return canonical_term(Literal(f"{r.randint(-10, 80) / 2}", XSD + "double"))  # type: ignore[return-value]
    if kind == 3:
        return Literal(r.choice(["true", "false"]), XSD + "boolean")
    if kind == 4:
        return Literal(r.choice(["alice", "Bob", "carol", "", "a b", "été"]))
    if kind == 5:
        return Literal(r.choice(["chat", "cat", "hello", "Bob"]), language=r.choice(LANGS))
    if kind == 6:
        tz = r.choice(["", "Z", "+02:00", "-05:00"])
        return canonical_term(Literal(f"2020-0{r.randint(1, 3)}-1{r.randint(0, 9)}T{r.randint(10, 23)}:00:00{tz}",
                                      XSD + "dateTime"))  # type: ignore[return-value]
    if kind == 7:
        return Literal(f"2020-01-0{r.randint(1, 9)}", XSD + "date")
    return Literal(r.choice(["x", "y"]), EX + "custom")


def random_event(r: random.Random, n: int) -> CompoundEvent:
    graph = IRI(f"{EX}event/{n}")
    triples = set()
    for _ in range(r.randint(1, 6)):
        s = r.choice(SUBJECTS)
        p = r.choice(PREDICATES)
        o: Term = r.choice(SUBJECTS) if r.random() < 0.35 else random_literal(r)
        triples.add((s, p, o))
    return CompoundEvent.from_triples(graph, sorted(triples, key=lambda t: tuple(x.n3() for x in t)))


VARS = ["?a", "?b", "?c", "?d", "?e"]
FILTERS = [
    "?{v} > {n}", "?{v} < {n}", "?{v} >= {n}.5", "?{v} != {n}", "?{v} = {n}",
    'lang(?{v}) = "en"', 'langMatches(lang(?{v}), "en")', 'regex(str(?{v}), "^[a-c]", "i")',
    'contains(str(?{v}), "o")', 'strlen(str(?{v})) > 3', '?{v} >= "2020-02-10T12:00:00Z"^^xsd:dateTime',
    '?{v} < "2020-02-15T00:00:00"^^xsd:dateTime', 'isLiteral(?{v})', 'isIRI(?{v})', 'bound(?{v})',
    'datatype(?{v}) = xsd:integer', '?{v} != ?{w}', '?{v} = ?{w}', '?{v} IN ({n}, "alice", ex:a)',
    '?{v} NOT IN (ex:b, "Bob"@en)', '!(?{v} > {n}) || ?{w} = ex:a', '?{v} > {n} && ?{w} != ex:c',
    'year(?{v}) = 2020 && month(?{v}) > 1', 'abs(?{v}) > {n}', '?{v} + 1 > {n}', '?{v} * 2 <= {n}',
    'str(?{v}) < "c"', '?{v} = "chat"@fr', 'sameTerm(?{v}, ex:a)', 'isNumeric(?{v})', '?{v}',
    '?g = <{EX}event/3>', 'strstarts(str(?g), "{EX}event/")', 'COALESCE(?{v} > {n}, true)',
    'IF(isNumeric(?{v}), ?{v} > {n}, ?{v} = ?{w})', 'ucase(str(?{v})) = "ALICE"', '?zz > 1 || isIRI(?{v})',
]


def random_term(r: random.Random, position: str, used: list[str], quad: Quad | None) -> str:
    roll = r.random()
    if roll < 0.55 or (position == "p" and roll < 0.65):
        v = r.choice(VARS)
        used.append(v)
        return v
    if quad is not None and roll < 0.9:  # a constant taken from the template event: likely to match
        return {"s": quad.s, "p": quad.p, "o": quad.o}[position].n3()
    if position == "p":
        return f"<{r.choice(PREDICATES).value}>"
    if position == "s" or roll < 0.95:
        if roll > 0.97:
            return "[]"
        return f"<{r.choice(SUBJECTS).value}>"
    return random_literal(r).n3()


def random_query(r: random.Random, template: CompoundEvent) -> str:
    used: list[str] = []
    patterns = []
    for _ in range(r.randint(1, 5)):
        quad = r.choice(template.quads) if r.random() < 0.8 else None
        patterns.append(" ".join(random_term(r, pos, used, quad) for pos in "spo"))
    if r.random() < 0.08:
        patterns = ["?s ?p ?o"]
        used = ["?s", "?p", "?o"]
    graph = "?g" if r.random() < 0.85 else f"<{EX}event/{r.choice([3, 999])}>"
    pool = sorted(set(used)) or ["?a"]
    filters = []
    for _ in range(r.choice([0, 0, 1, 1, 2])):
        template_text = r.choice(FILTERS)
        filters.append("FILTER(" + template_text.format(v=r.choice(pool)[1:], w=r.choice(pool)[1:],
                                                         n=r.randint(0, 30), EX=EX) + ")")
    inside = [f for f in filters if r.random() < 0.5]
    outside = [f for f in filters if f not in inside]
    projection = "*"
    if r.random() < 0.5:
        names = [v for v in pool if r.random() < 0.6] + (["?g"] if r.random() < 0.3 and graph == "?g" else [])
        if r.random() < 0.1:
            names.append("?notinscope")
        projection = " ".join(dict.fromkeys(names)) or "*"
    distinct = "DISTINCT " if r.random() < 0.3 else ""
    body = " . ".join(patterns)
    return (f"{PREFIXES}SELECT {distinct}{projection} WHERE {{ GRAPH {graph} {{ {body} {' '.join(inside)} }} "
            f"{' '.join(outside)} }}")


def mutate(r: random.Random, event: CompoundEvent) -> CompoundEvent:
    """A near miss: one quad dropped or one object changed."""
    quads = list(event.quads)
    victim = r.randrange(len(quads))
    if len(quads) > 1 and r.random() < 0.5:
        del quads[victim]
    else:
        g, s, p, _ = quads[victim]
        quads[victim] = Quad(g, s, p, random_literal(r))
    return CompoundEvent(event.graph, tuple(quads))


def cases(seed: int, subscriptions: int, events_each: int):
    r = random.Random(seed)
    for n in range(subscriptions):
        template = random_event(r, r.choice([3, 3, n]))
        query = random_query(r, template)
        sub = parse_subscription(query)
        events = [template, mutate(r, template)]
        events += [random_event(r, r.choice([3, n * 10 + k])) for k in range(events_each - 2)]
        for event in events:
            yield query, sub, event


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
                assert PartialMatch.from_wire(following.to_wire()) == following
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
        checked += 1
        matched += bool(expected)
    assert checked == 180
    assert 10 <= matched <= checked - 10  # the generator exercises both outcomes


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
    wire = partial.to_wire()
    assert wire == [[1, 3], [["a", EX + "x"], ["b", ["1", XSD + "integer"]],
                             ["c", ["chat", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "fr"]]]]
    assert PartialMatch.from_wire(wire) == partial
    assert hash(PartialMatch.from_wire(wire)) == hash(partial)
    for garbage in [None, [], [[1], [], 3], [["1"], []], [[3, 1], []], [[1, 1], []], [[1], [["a"]]],
                    [[1], [["a", 5]]], [[1], [["a", ["x"]]]], [[1], [["a", "not an iri"]]],
                    [[1], [["b", "http://x"], ["a", "http://y"]]], [[1], [["a", ["x", "http://dt", "en"]]]],
                    [[1], [["a", ["x", XSD + "string", "not a tag!"]]]], [[-1], []], [[True], []]]:
        with pytest.raises(ValueError):
            PartialMatch.from_wire(garbage)


def test_empty_and_unsatisfiable_cases() -> None:
    sub = parse_subscription("SELECT * WHERE { GRAPH ?g { ?s ?p ?o FILTER(false) } }")
    assert not matches(sub, event(("a", "p", "b")))
    assert notifier_index(sub, event(("a", "p", "b"))) is None
    assert csma_completions(sub, event(("a", "p", "b"))) == []
    constant = parse_subscription(f"SELECT * WHERE {{ GRAPH ?g {{ <{EX}a> <{EX}p> <{EX}b> }} }}")
    assert results(constant, event(("a", "p", "b"))) == [{"g": IRI(EX + "g")}]
    ground = parse_subscription(f"SELECT * WHERE {{ GRAPH <{EX}g> {{ <{EX}a> <{EX}p> <{EX}b> }} }}")
    assert results(ground, event(("a", "p", "b"))) == [{}]
