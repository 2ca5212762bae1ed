"""Subscriptions built from their shape's template (sparql.templates) equal the same texts
parsed whole, or fail with the same error; shapes whose structure could depend on a constant
make no template. The differential tests of tests/sparql/test_shapes.py cover the whole suite's
texts through this route too (the template is tried first)."""

from __future__ import annotations

import pytest

import eventcloud.sparql.subscription as subscription_module
from eventcloud.sparql.filters.extensions import rewrite_bare_names
from eventcloud.sparql.shapes import shape_of
from eventcloud.sparql.subscription import SubscriptionError, parse_subscription
from eventcloud.sparql.taxonomy import Taxonomy
from tests.sparql.samples import outcome, whole_parse

EX = "http://example.org/"


def template_of(text: str):
    shape = shape_of(rewrite_bare_names(text)[0])
    return subscription_module._TEMPLATES.get((shape.text, subscription_module.NO_OPERATORS))


def test_texts_of_one_shape_are_built_from_its_template_and_equal_their_whole_parse() -> None:
    texts = [f"PREFIX ex: <{EX}> SELECT ?g ?v WHERE {{ GRAPH ?g {{ ?s ex:sensor{i} ?v ; <{EX}unit/{i}> "
             f"\"unit {i}\"@EN-gb ; ex:max {i * 7} FILTER(?v > {i * 3} && ?v != 'x{i}') }} }}" for i in range(30)]
    hits = subscription_module._TEMPLATES.hits
    subs = [parse_subscription(t) for t in texts]
    assert subscription_module._TEMPLATES.hits == hits + 28  # the second text taught it (a shape seen twice)
    assert template_of(texts[0]) is not None
    assert subs == [whole_parse(t) for t in texts]
    assert [s.sparql for s in subs] == texts
    assert subs[7].patterns[1].predicate.value == f"{EX}unit/7" and subs[7].patterns[1].object.language == "en-gb"


@pytest.mark.parametrize("texts", [
    # integers canonicalised as the builder does (leading zeros), typed strings left as they are
    [f"SELECT * WHERE {{ GRAPH ?g {{ ?s <{EX}p> {n} ; <{EX}q> \"{n}\"^^<http://www.w3.org/2001/XMLSchema#integer> }} }}"
     for n in ("5", "007", "0", "12")],
    # a BASE: absolute IRIs are resolved against it (dot segments removed) as the builder does
    [f"BASE <http://b/x/> SELECT * WHERE {{ GRAPH ?g {{ ?s <http://a/{p}/../c> ?o FILTER(?o = <http://a/{p}/./d>) }} }}"
     for p in ("b", "c", "e")],
    # an IRI constant in a FILTER and as the GRAPH
    [f"SELECT ?s WHERE {{ GRAPH <{EX}g{i}> {{ ?s ?p ?o FILTER(?o = <{EX}o{i}> || ?o > {i}) }} }}" for i in range(4)],
])
def test_constants_become_the_terms_the_builder_makes(texts: list[str]) -> None:
    for text in texts:
        assert outcome(text) == whole_parse(text, outcome), text
        assert outcome(text) == whole_parse(text, outcome), text


def test_a_constant_the_template_cannot_take_is_refused_as_parsing_whole_refuses_it() -> None:
    good = f"SELECT ?v WHERE {{ GRAPH ?g {{ ?s <{EX}p> ?v FILTER(REGEX(?v, \"a+b\")) }} }}"
    bad = f"SELECT ?v WHERE {{ GRAPH ?g {{ ?s <{EX}p> ?v FILTER(REGEX(?v, \"a(b\")) }} }}"  # same shape
    parse_subscription(good)
    assert template_of(good) is not None
    with pytest.raises(SubscriptionError) as refused:
        parse_subscription(bad)
    assert outcome(bad) == whole_parse(bad, outcome)
    assert "regular expression" in str(refused.value) or "REGEX" in str(refused.value)


def test_the_is_a_path_makes_no_template_and_a_called_function_stays_in_the_shape() -> None:
    """Which path or function a text names shapes its tree: the is-a path's IRIs would be slots
    (with placeholders there the builder refuses the path, so no template is kept), a function's
    IRI is no slot at all (its calls get a template, one per function)."""
    taxonomy = Taxonomy([(EX + "C1", EX + "C0")], 1)
    isa = [f"PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "
           f"SELECT ?x WHERE {{ GRAPH ?g {{ ?x rdf:type/rdfs:subClassOf* <{EX}C{i}> }} }}" for i in range(2)]
    cast = [f"PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> SELECT ?v WHERE {{ GRAPH ?g {{ ?s <{EX}p{i}> ?v "
            f"FILTER(xsd:{f}(?v) > 3) }} }}" for f in ("integer", "decimal") for i in range(2)]
    for texts, templated in ((isa, False), (cast, True)):
        subs = [parse_subscription(t, taxonomy) for t in texts]
        assert (template_of(texts[0]) is not None) is templated
        assert subs == [whole_parse(t, lambda x: parse_subscription(x, taxonomy)) for t in texts]
    assert [s.filters[0].expr[1][1] for s in subs] == ["http://www.w3.org/2001/XMLSchema#integer"] * 2 + [
        "http://www.w3.org/2001/XMLSchema#decimal"] * 2
    assert shape_of(cast[0]).text != shape_of(cast[2]).text


def test_the_template_route_binds_the_callers_taxonomy() -> None:
    t1 = Taxonomy([(EX + "C1", EX + "C0")], 1)
    t2 = Taxonomy([(EX + "C1", EX + "C0"), (EX + "C2", EX + "C1")], 2)
    texts = [f"PREFIX ec: <http://eventcloud.io/ns/ext#> SELECT ?x WHERE {{ GRAPH ?g {{ ?x <{EX}a> ?c "
             f"FILTER(ec:descendantOf(?c, <{EX}C{i}>)) }} }}" for i in range(3)]
    parse_subscription(texts[0])
    assert template_of(texts[0]) is not None
    for text in texts:
        for taxonomy in (t1, t2, None):
            assert parse_subscription(text, taxonomy) == whole_parse(text, lambda x: parse_subscription(x, taxonomy))
