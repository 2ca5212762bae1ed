"""Is-a constraints in the shared index: the closure tables must answer exactly what evaluating each
subscription separately answers, and swapping the taxonomy must re-bind what reads it.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventcloud.matching.index import SubscriptionIndex
from eventcloud.matching.isatable import IsaTable
from eventcloud.rdf.model import IRI, RDF, XSD, CompoundEvent, Literal
from eventcloud.sparql.subscription import parse_subscription
from eventcloud.sparql.taxonomy import Taxonomy
from tests.helpers import EXT, brute_first, brute_match, random_taxonomy_edges

EX = "http://ex.org/"
PREFIXES = f"PREFIX ex: <{EX}> PREFIX ec: <{EXT}> PREFIX rdf: <{RDF}> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "
BODIES = [
    "?x a/rdfs:subClassOf* ex:C{k}",
    "?x a/rdfs:subClassOf* ex:C{k} . ?x ex:v ?v FILTER(?v > {n})",
    "?x ex:v ?v . ?x a/rdfs:subClassOf* ex:C{k}",
    "?x a ?c . ?x ex:v ?v FILTER(ec:descendantOf(?c, ex:C{k}) && ?v < {n})",
    "?x a ?c FILTER(ec:ancestorOf(?c, ex:C{k}))",
    "?x a ?c FILTER(ec:childOf(?c, ex:C{k}))",
    "?x a ?c FILTER(ec:descendantOf(ex:C{k}, ?c))",
    "?x a ?c FILTER(ec:childOf(?c, ex:C{k}) || ?c = ex:C{j})",
    "?x a/rdfs:subClassOf* ex:C{k} . ?y a/rdfs:subClassOf* ex:C{j} . ?x ex:link ?y",
    "?x ex:link ?y . ?y a ?c FILTER(ec:descendantOf(?c, ex:C{k}))",
    "?x ex:v ?v FILTER(ec:descendantOf(?v, ex:C{k}))",
    # a constant first pattern triggers: class and value are tabled together per solution (IsaPairTable)
    "?x ex:link ex:i{i} . ?x a ?c . ?x ex:v ?v FILTER(ec:descendantOf(?c, ex:C{k}) && ?v > {n})",
    "?x ex:link ex:i{i} . ?x a/rdfs:subClassOf* ex:C{k} . ?x ex:v ?v FILTER(?v <= {n})",
    "?x ex:link ex:i{i} . ?x a ?c FILTER(ec:childOf(?c, ex:C{k}) && ?c != ex:C{j})",
    "?x ex:link ex:i{i} . ?x a ?c . ?x ex:v ?v FILTER(ec:ancestorOf(?c, ex:C{k}) && ?v = {n} && isIRI(?c))",
]
CLASSES = 8


def isa_query(r: random.Random) -> str:
    body = r.choice(BODIES).format(k=r.randrange(CLASSES + 1), j=r.randrange(CLASSES), n=r.randint(0, 9),
                                   i=r.randrange(3))
    return f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ {body} }} }}"


def isa_event(r: random.Random, n: int) -> CompoundEvent:
    triples = set()
    for _ in range(r.randint(1, 4)):
        instance = IRI(f"{EX}i{r.randrange(3)}")
        triples.add((instance, IRI(RDF + "type"), IRI(f"{EX}C{r.randrange(CLASSES + 1)}")))
        triples.add((instance, IRI(EX + "v"), r.choice([Literal(str(r.randint(0, 9)), XSD + "integer"),
                                                         IRI(f"{EX}C{r.randrange(CLASSES)}")])))
        if r.random() < 0.5:
            triples.add((instance, IRI(EX + "link"), IRI(f"{EX}i{r.randrange(3)}")))
    return CompoundEvent.from_triples(IRI(f"{EX}event/{n}"), sorted(triples, key=str))


R = random.Random(5)
TAXONOMIES = [Taxonomy(random_taxonomy_edges(R, CLASSES), version) for version in range(1, 4)]
TEXTS = [isa_query(R) for _ in range(80)]
EVENTS = [isa_event(R, n) for n in range(30)]
IDENTS = [f"s{i}" for i in range(12)]
operations = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, len(IDENTS) - 1), st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("remove"), st.integers(0, len(IDENTS) - 1)),
    st.tuples(st.just("taxonomy"), st.integers(0, len(TAXONOMIES) - 1))), max_size=40)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations, st.lists(st.integers(0, len(EVENTS) - 1), min_size=1, max_size=5))
def test_is_a_index_equals_brute_force_across_taxonomy_swaps(ops, picks) -> None:
    taxonomy = TAXONOMIES[0]
    idx, model = SubscriptionIndex(taxonomy=taxonomy), {}
    for op in ops:
        if op[0] == "taxonomy":
            taxonomy = TAXONOMIES[op[1]]
            rebound = idx.set_taxonomy(taxonomy)
            assert sorted(rebound) == sorted(i for i, s in model.items() if s.uses_taxonomy)
            model = {ident: sub.with_taxonomy(taxonomy) for ident, sub in model.items()}
        elif op[0] == "add":
            ident, sub = IDENTS[op[1]], parse_subscription(TEXTS[op[2]])  # parsed without: the index re-binds
            idx.add(ident, sub)
            bound = sub.with_taxonomy(taxonomy)
            if model.get(ident, bound) != bound:
                del model[ident]
            model.setdefault(ident, bound)
            assert idx.get(ident) == model[ident]
        else:
            ident = IDENTS[op[1]]
            assert idx.remove(ident) == (ident in model)
            model.pop(ident, None)
    for event in (EVENTS[i] for i in picks):
        assert idx.match_event(event) == brute_match(model, event), event.n_quads()
        for quad in event.quads:
            assert idx.first_pattern_candidates(quad) == brute_first(model, quad)


def test_the_pool_tables_classes_alone_and_with_a_value() -> None:
    idx = SubscriptionIndex(taxonomy=TAXONOMIES[0])
    for i, text in enumerate(TEXTS):
        idx.add(f"q{i}", parse_subscription(text))
    ops = {e.reg[1].op for e in idx._entries.values() if e.reg is not None}
    assert {"isa:descendant", "isa:ancestor", "isa:child"} <= ops
    assert {op for op in ops if isinstance(op, tuple)} >= {("isa:descendant", ">"), ("isa:child", "!=")}


def test_the_path_is_tabled_under_its_class_and_read_through_the_closure() -> None:
    taxonomy = Taxonomy([(EX + "Temp", EX + "Sensor"), (EX + "Sensor", EX + "Thing")], 1)
    idx = SubscriptionIndex(taxonomy=taxonomy)
    for name, cls in (("things", "Thing"), ("sensors", "Sensor"), ("temps", "Temp"), ("other", "Other")):
        idx.add(name, parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x a/rdfs:subClassOf* ex:{cls} }} }}"))
    entries = list(idx._entries.values())
    assert {(e.level, e.reg[1].op) for e in entries} == {("trigger", "isa:descendant")}
    assert idx.stats()["distinct_patterns"] == 1  # one node: ?x rdf:type ?c
    event = CompoundEvent.from_triples(IRI(EX + "e"), [(IRI(EX + "t1"), IRI(RDF + "type"), IRI(EX + "Temp"))])
    assert idx.match_event(event) == ["things", "sensors", "temps"]
    assert idx.set_taxonomy(Taxonomy.empty()) == ["things", "sensors", "temps", "other"]
    assert idx.match_event(event) == ["temps"]


def test_an_is_a_table_needs_an_iri() -> None:
    class Holder:
        taxonomy = Taxonomy([(EX + "B", EX + "A")], 1)

    class Constraint:
        const = IRI(EX + "A")

    table = IsaTable("isa:descendant", Holder())
    table.add(Constraint(), "x")
    assert table.split(IRI(EX + "B")) == (["x"], []) and table.split(Literal("B")) == ([], [])
    assert table.remove(Constraint(), "x") and not table.remove(Constraint(), "x") and len(table) == 0


def test_identical_subscriptions_reading_the_taxonomy_stay_shared_and_matched_across_swaps() -> None:
    """Identical subscriptions share one entry keyed by what they match with, which for is-a tests
    includes the taxonomy: after a swap, removals and a swap back, a new identical one must join
    a live entry (or make its own), never a removed one."""
    first, second = TAXONOMIES[0], TAXONOMIES[1]
    text = f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x a ?c FILTER(ec:descendantOf(?c, ex:C0)) }} }}"
    event = CompoundEvent.from_triples(IRI(f"{EX}event/1"), [(IRI(f"{EX}i0"), IRI(RDF + "type"), IRI(f"{EX}C0"))])
    idx = SubscriptionIndex(taxonomy=first)
    idx.add("a", parse_subscription(text))
    idx.add("b", parse_subscription(text))
    assert idx.stats()["entries"] == 1
    assert sorted(idx.set_taxonomy(second)) == ["a", "b"]
    idx.add("c", parse_subscription(text))       # identical under the new taxonomy: the same entry
    assert idx.stats()["entries"] == 1 and idx.match_event(event) == ["a", "b", "c"]
    for ident in ("a", "b", "c"):
        assert idx.remove(ident)
    assert idx.stats()["entries"] == 0
    idx.set_taxonomy(first)
    idx.add("d", parse_subscription(text))       # must not alias the entry removed above
    assert idx.stats()["entries"] == 1 and idx.match_event(event) == ["d"]
