"""Class taxonomies (is-a constraints over RDFS subclasses): the Taxonomy value, the accepted path, is-a FILTER functions, against pyoxigraph.

The oracle evaluates the same subscription over the event's quads plus the taxonomy's
`rdfs:subClassOf` triples (in the event's graph), so `rdf:type/rdfs:subClassOf*` is evaluated by
pyoxigraph's own property paths; the is-a FILTER functions are registered as custom functions
backed by a plain search over the edges. Patterns here never have a variable predicate: in the
oracle those would also match the taxonomy's triples, which subscriptions never see.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventcloud.errors import ErrorCode, InputError
from eventcloud.matching.reference import matches, results
from eventcloud.rdf.model import IRI, RDF, CompoundEvent
from eventcloud.sparql.subscription import SubscriptionError, TriplePattern, Var, parse_subscription
from eventcloud.sparql.taxonomy import Taxonomy, TaxonomyError
from tests.helpers import EXT, as_rows, isa_functions, oracle_with, random_taxonomy_edges, visible
from tests.sparql.samples import TEMPLATES, random_isa_event

EX = "http://ex.org/"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
PREFIXES = f"PREFIX ex: <{EX}> PREFIX ec: <{EXT}> PREFIX rdf: <{RDF}> PREFIX rdfs: <{RDFS}> "
DIAMOND = [(EX + "B", EX + "A"), (EX + "C", EX + "A"), (EX + "D", EX + "B"), (EX + "D", EX + "C"), (EX + "E", EX + "D")]


def test_closure_of_a_diamond_with_multiple_inheritance() -> None:
    t = Taxonomy(DIAMOND, 3)
    assert t.ancestors(EX + "D") == {EX + c for c in "DBCA"}
    assert t.descendants(EX + "A") == {EX + c for c in "ABCDE"}
    assert t.parents(EX + "D") == {EX + "B", EX + "C"} and t.children(EX + "A") == {EX + "B", EX + "C"}
    assert t.is_descendant(EX + "E", EX + "A") and t.is_descendant(EX + "A", EX + "A")
    assert t.is_ancestor(EX + "B", EX + "E") and not t.is_ancestor(EX + "E", EX + "B")
    assert t.is_child(EX + "D", EX + "C") and not t.is_child(EX + "E", EX + "C")
    assert t.ancestors(EX + "Z") == {EX + "Z"} and t.parents(EX + "Z") == frozenset()  # unknown: itself only
    assert len(t) == 5 and t.version == 3


def test_a_cycle_is_refused_naming_its_classes_and_a_self_loop_is_dropped() -> None:
    with pytest.raises(TaxonomyError) as info:
        Taxonomy(DIAMOND + [(EX + "A", EX + "E")])
    message = str(info.value)
    assert "cycle" in message and all(f"<{EX}{c}>" in message for c in "ADE")
    assert Taxonomy(DIAMOND + [(EX + "A", EX + "A")]) == Taxonomy(DIAMOND)
    with pytest.raises(TaxonomyError):
        Taxonomy([("not an iri", EX + "A")])


def test_version_digest_wire_and_turtle() -> None:
    t = Taxonomy(DIAMOND, 7)
    assert Taxonomy.from_wire(t.to_wire()) == t
    assert t.to_wire()["edges"][0] == [EX + "B", EX + "A"]
    assert t.with_version(8) != t and t.with_version(8).digest == t.digest
    assert Taxonomy.from_rdf(t.to_turtle(), "turtle", version=7) == t
    assert Taxonomy.empty().version == 0 and len(Taxonomy.empty()) == 0
    for garbage in (None, {"edges": 3}, {"edges": [[EX + "a"]]}, {"edges": [], "version": -1}):
        with pytest.raises(TaxonomyError):
            Taxonomy.from_wire(garbage)  # type: ignore[arg-type]


def test_from_rdf_keeps_subclass_triples_between_iris() -> None:
    turtle = f"""@prefix rdfs: <{RDFS}> . @prefix owl: <http://www.w3.org/2002/07/owl#> . @prefix ex: <{EX}> .
        ex:B rdfs:subClassOf ex:A ; rdfs:label "B" . ex:A a owl:Class .
        ex:C rdfs:subClassOf ex:A, [ a owl:Restriction ] ."""
    t = Taxonomy.from_rdf(turtle, "turtle")
    assert t.edges == {(EX + "B", EX + "A"), (EX + "C", EX + "A")} and t.version == 1
    rdfxml = (f'<rdf:RDF xmlns:rdf="{RDF}" xmlns:rdfs="{RDFS}"><rdf:Description rdf:about="{EX}B">'
              f'<rdfs:subClassOf rdf:resource="{EX}A"/></rdf:Description></rdf:RDF>')
    assert Taxonomy.from_rdf(rdfxml, "rdfxml").edges == {(EX + "B", EX + "A")}
    for bad, reason in ((f'<{EX}a> <{RDFS}subClassOf> "x" .', "literal"), (f"<{EX}a> <{EX}p> <{EX}b> .", "no rdfs:subClassOf"),
                        ("<a", "Unexpected end of file")):
        with pytest.raises(InputError) as info:  # TaxonomyError, or the reader's RDFInputError
            Taxonomy.from_rdf(bad, "turtle")
        assert info.value.code == ErrorCode.BAD_RDF and reason in str(info.value)


# --- the path and the FILTER functions in subscriptions --------------------------------------------

@pytest.mark.parametrize("path", ["rdf:type/rdfs:subClassOf*", "a/rdfs:subClassOf*",
                                  f"<{RDF}type>/<{RDFS}subClassOf>*", "(rdf:type/(rdfs:subClassOf*))"])
def test_the_accepted_path_however_written(path: str) -> None:
    sub = parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x {path} ex:A . ?x ex:v ?v }} }}")
    assert sub.patterns[0] == TriplePattern(Var("x"), IRI(RDF + "type"), Var("_:isa0"))
    assert sub.projection == ("g", "x", "v")  # the hidden class variable is never projected
    assert sub.pattern_terms(0) == (None, None, IRI(RDF + "type"), None)  # routed by the rdf:type point
    assert sub.uses_taxonomy and sub.taxonomy == Taxonomy.empty()


@pytest.mark.parametrize("path, shown", [
    ("rdf:type/rdfs:subClassOf+", "rdf:type/rdfs:subClassOf+"), ("rdfs:subClassOf*", "rdfs:subClassOf*"),
    ("ex:a/ex:b", "ex:a/ex:b"), ("^ex:a", "^ex:a"), ("!ex:a", "!ex:a"), ("ex:a|ex:b", "ex:a|ex:b"),
    ("(ex:a|ex:b)/ex:c*", "(ex:a|ex:b)/ex:c*"), ("rdf:type/rdfs:subClassOf*/ex:a", "rdf:type/rdfs:subClassOf*/ex:a"),
    ("ex:a?", "ex:a?"),
])
def test_every_other_path_is_refused_by_name(path: str, shown: str) -> None:
    with pytest.raises(SubscriptionError) as info:
        parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x {path} ex:A }} }}")
    assert info.value.construct == "property paths"
    assert f"(here: {shown})" in str(info.value)


def test_the_path_needs_a_class_iri() -> None:
    for obj in ("?c", '"A"', "[]"):
        with pytest.raises(SubscriptionError, match="needs a class IRI"):
            parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x a/rdfs:subClassOf* {obj} }} }}")


def test_rebinding_to_another_taxonomy_changes_the_answer_not_the_text() -> None:
    text = f"{PREFIXES}SELECT ?x WHERE {{ GRAPH ?g {{ ?x a/rdfs:subClassOf* ex:A }} }}"
    graph = IRI(EX + "e")
    event = CompoundEvent.from_triples(graph, [(IRI(EX + "i"), IRI(RDF + "type"), IRI(EX + "E"))])
    plain, rich = parse_subscription(text), parse_subscription(text, taxonomy=Taxonomy(DIAMOND, 1))
    assert not matches(plain, event) and matches(rich, event)
    assert plain.with_taxonomy(Taxonomy(DIAMOND, 1)) == rich != plain
    assert matches(rich.with_taxonomy(Taxonomy.empty()), event) is False
    unrelated = parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x a ex:A }} }}")
    assert not unrelated.uses_taxonomy and unrelated.with_taxonomy(Taxonomy(DIAMOND, 1)) is unrelated


def test_events_own_subclass_quads_do_not_extend_the_taxonomy() -> None:
    """A documented deviation from "event + taxonomy": the hierarchy is the loaded taxonomy's alone
    (under CSMA the quad carrying it may sit on another peer); the quads still match as data."""
    graph = IRI(EX + "e")
    event = CompoundEvent.from_triples(graph, [(IRI(EX + "i"), IRI(RDF + "type"), IRI(EX + "X")),
                                               (IRI(EX + "X"), IRI(RDFS + "subClassOf"), IRI(EX + "A"))])
    assert not matches(parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?x a/rdfs:subClassOf* ex:A }} }}"), event)
    assert matches(parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?c rdfs:subClassOf ex:A }} }}"), event)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_is_a_subscriptions_against_pyoxigraph_with_the_taxonomy_triples(seed: int) -> None:
    r = random.Random(seed)
    classes = r.randint(2, 8)
    edges = random_taxonomy_edges(r, classes)
    taxonomy = Taxonomy(edges, 1)
    body = r.choice(TEMPLATES).format(k=r.randrange(classes + 1), j=r.randrange(classes), n=r.randint(0, 9))
    projection = r.choice(["*", "DISTINCT *", "?x"]) if "?x" in body else "*"
    query = f"{PREFIXES}SELECT {projection} WHERE {{ GRAPH ?g {{ {body} }} }}"
    sub = parse_subscription(query, taxonomy=taxonomy)
    functions = isa_functions(edges)
    for n in range(4):
        event = random_isa_event(r, n, classes)
        expected = set(oracle_with(query, event, functions, edges))
        got = as_rows([visible(b) for b in results(sub, event)])
        assert len(got) == len(set(got)) and set(got) == expected, (query, edges, event.n_quads())
