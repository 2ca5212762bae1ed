"""A parsed subscription on the wire: every valid subscription of the suite survives the trip
(through msgpack) unchanged, and malformed or hostile forms are refused with a BadRequest."""

from __future__ import annotations

import sys

import msgpack
import pytest

from eventcloud.errors import BadRequest
from eventcloud.sparql.subscription import SubscriptionError, parse_subscription
from eventcloud.wire.parsed import MAX_DEPTH, subscription_from_wire, subscription_to_wire
from tests.sparql.samples import TRICKY, suite_texts

CHAIN = "SELECT ?g ?v WHERE { GRAPH ?g { ?s <http://x/p> ?v FILTER(?v > 3 && regex(str(?s), \"^a\")) } }"


def trip(data):
    return msgpack.unpackb(msgpack.packb(data))


def test_every_valid_subscription_of_the_suite_round_trips() -> None:
    done = 0
    for text in suite_texts() + TRICKY:
        try:
            sub = parse_subscription(text)
            wire = trip(subscription_to_wire(sub))
        except (SubscriptionError, UnicodeEncodeError):  # refused, or not sendable as text either
            continue
        assert subscription_from_wire(wire, text) == sub, text
        done += 1
    assert done > 40


def test_the_taxonomy_and_base_come_through() -> None:
    from eventcloud.sparql.taxonomy import Taxonomy

    text = ("BASE <http://example.org/b/> PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> "
            "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> SELECT ?g WHERE { GRAPH ?g { "
            "?s rdf:type/rdfs:subClassOf* <Vehicle> ; <name> ?n FILTER(IRI(?n) = <car>) } }")
    taxonomy = Taxonomy.from_rdf("<http://example.org/b/Car> <http://www.w3.org/2000/01/rdf-schema#subClassOf> "
                                 "<http://example.org/b/Vehicle> .", "ntriples")
    sub = parse_subscription(text, taxonomy)
    back = subscription_from_wire(trip(subscription_to_wire(sub)), text, taxonomy=taxonomy)
    assert back == sub and back.uses_taxonomy and back.taxonomy == taxonomy
    assert {f.base for f in back.filters} == {"http://example.org/b/"}


@pytest.mark.parametrize("data, named", [
    (None, "graph, patterns, filters"),
    ([["?", "g"], [], [], [], False, None], "non-empty list"),
    ([["?", "g"], [[1, 2]], [], [], False, None], "non-empty list"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], "f", [], False, None], "lists"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [], [3], False, None], "lists"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [], [], "yes", None], "boolean"),
    ([["?", ""], [[["?", "s"], "http://x/p", ["?", "o"]]], [], [], False, None], "variable"),
    ([["lit", "http://www.w3.org/2001/XMLSchema#string"], [[["?", "s"], "http://x/p", ["?", "o"]]], [], [], False, None],
     "GRAPH term"),
    ([["?", "g"], [[["?", "s"], ["1", "http://www.w3.org/2001/XMLSchema#integer"], ["?", "o"]]], [], [], False, None],
     "predicate"),
    ([["?", "g"], [[["?", "s"], "not an iri", ["?", "o"]]], [], [], False, None], "invalid term"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [["or", "x"]], [], False, None], "list of FILTER"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [["=", ["var", "o"]]], [], False, None], "malformed"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [["frobnicate", 1]], [], False, None], "malformed"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [["call", "SHELL", [["var", "o"]]]], [], False, None],
     "not supported"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]],
      [["call", "REGEX", [["var", "o"], ["const", ["(", "http://www.w3.org/2001/XMLSchema#string"]]]]], [], False, None],
     "REGEX"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [["op", "http://x/no-such-operator", []]], [], False, None],
     "not registered"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [["cast", "http://x/frob", ["var", "o"]]], [], False, None],
     "cast to http://x/frob is not supported"),
    ([["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [["ext", "http://x/frob", [["var", "o"], ["var", "o"]]]],
      [], False, None], "extension function http://x/frob is not supported"),
])
def test_malformed_forms_are_refused_naming_what_is_wrong(data, named: str) -> None:
    with pytest.raises(BadRequest, match=named):
        subscription_from_wire(data, "SELECT …")


def test_a_deeply_nested_filter_is_refused_not_a_recursion_error() -> None:
    expr: list = ["var", "o"]
    for _ in range(MAX_DEPTH + 5):
        expr = ["not", expr]
    data = [["?", "g"], [[["?", "s"], "http://x/p", ["?", "o"]]], [expr], [], False, None]
    with pytest.raises(BadRequest, match="nested deeper"):
        subscription_from_wire(data, "SELECT …")


def test_the_form_is_about_as_large_as_the_text() -> None:
    sub = parse_subscription(CHAIN)
    assert len(msgpack.packb(subscription_to_wire(sub))) < 1.5 * len(CHAIN)


def test_a_recurring_predicate_is_one_string_and_a_unique_one_is_not_interned() -> None:
    """Graph and predicate IRIs that recur share one string (sensor-style subscriptions share a
    few); a chain's distinct predicates are not interned: each would take a slot in the
    interpreter's table for good, ~240 B per stored chain (docs/pubsub.md)."""
    def decoded(predicate: str):
        text = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{predicate}> ?o }} }}"
        wire = msgpack.unpackb(msgpack.packb(subscription_to_wire(parse_subscription(text))))  # fresh strings
        return subscription_from_wire(wire, text).patterns[0].predicate.value

    shared = [decoded("http://example.org/recurring/p") for _ in range(3)]
    assert shared[1] is shared[2]                 # seen again: one string
    unique = decoded("http://example.org/unique/q-4f1e")
    other = "".join(list(unique))                 # an equal string, another object
    assert sys.intern(other) is not unique        # `unique` was not put in the intern table
