"""Subscriptions parsed by shape (sparql.shapes) equal the same texts parsed whole.

The corpus is every SPARQL text written in the test suite (string constants containing
SELECT), hand-picked tricky texts, and generated workloads: each is parsed twice — through
the shape cache and with shapes turned off — and must give the same subscription or the same
error.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eventcloud.sparql.subscription as subscription_module
from eventcloud.sparql.filters.extensions import rewrite_bare_names
from eventcloud.sparql.shapes import Shape, ShapeCache, shape_of
from eventcloud.sparql.subscription import parse_subscription
from experiments.workloads import generate
from tests.sparql.samples import TRICKY, outcome, suite_texts, whole_parse

def whole(text: str, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as patch:
        patch.setattr(subscription_module, "shape_of", lambda text: None)
        return outcome(text)


def test_every_subscription_text_of_the_suite_parses_the_same_by_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = suite_texts() + TRICKY
    assert len(texts) > 150  # the harvest found the suite's texts
    cache = subscription_module._shapes()
    by_shape = 0
    for text in texts:
        expected = whole(text, monkeypatch)
        assert outcome(text) == expected, text
        assert outcome(text) == expected, text  # the second time from the cache
        shape = shape_of(rewrite_bare_names(text)[0])
        if shape is not None and not isinstance(expected, tuple):
            assert cache.tree(shape) is not None, text  # every valid text with constants goes by shape
            by_shape += 1
    assert by_shape > 40


def test_texts_of_one_shape_parse_once_and_keep_their_own_constants() -> None:
    texts = [f"PREFIX ex: <http://example.org/> SELECT ?g ?v WHERE {{ GRAPH ?g {{ ?s ex:sensor{i} ?v ; "
             f"<http://example.org/unit> \"unit {i}\"@en FILTER(?v > {i * 7}) }} }}" for i in range(50)]
    cache = subscription_module._shapes()
    misses = cache.misses
    subs = [parse_subscription(t) for t in texts]
    assert cache.misses == misses + 1  # one shape, parsed once
    for i, sub in enumerate(subs):
        assert sub.sparql == texts[i]
        assert sub.patterns[0].predicate.value == f"http://example.org/sensor{i}"
        assert sub.patterns[1].object.lexical == f"unit {i}" and sub.patterns[1].object.language == "en"
        assert sub.filters[0].text.endswith(f"{i * 7})") or str(i * 7) in sub.filters[0].text
    assert subs == [whole_parse(t) for t in texts]


def test_generated_workloads_parse_the_same_by_shape() -> None:
    for k in (1, 3, 5):
        for text in generate(events=0, subscriptions=40, k=k, seed=k).subscriptions:
            assert parse_subscription(text) == whole_parse(text)


def test_a_shape_whose_placeholders_do_not_come_back_is_not_used() -> None:
    """A placeholder that the parser reads as something else (here a prefixed name's local part
    read inside a blank node label) makes the shape unusable: the text is parsed whole."""
    from rdflib.plugins.sparql.algebra import translatePrologue
    from rdflib.plugins.sparql.parser import parseQuery

    cache = ShapeCache(parseQuery, lambda p: translatePrologue(p, None))
    shape = shape_of("SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> 3 } }")
    assert shape is not None and [k for k, _, _ in shape.slots] == ["iri", "integer"]
    assert cache.tree(shape) is not None
    broken = Shape(shape.text.replace(shape.slots[1][1], "3"), shape.slots)  # a placeholder gone
    assert cache.tree(broken) is None
    assert shape_of("SELECT ?g WHERE { GRAPH ?g { ?s <http://x/ecslot> 3 } }") is None  # the marker: never shaped


def test_the_cache_is_bounded() -> None:
    from rdflib.plugins.sparql.algebra import translatePrologue
    from rdflib.plugins.sparql.parser import parseQuery

    cache = ShapeCache(parseQuery, lambda p: translatePrologue(p, None), size=3)
    for n in range(6):
        shape = shape_of("SELECT ?g WHERE { GRAPH ?g { " + " . ".join(["?s <http://x/p> ?o"] * (n + 1)) + " } }")
        cache.tree(shape)
    assert len(cache._shapes) == 3


#: What edits insert: SPARQL's punctuation, digits, letters, escapes, and whole tokens.
EDITS = st.sampled_from(list("<>\"'{}().;,?:@^#\\ -+*/=!&|_0123456789aeEx\n") + [
    "<http://x/q>", "ex:", "?v", "42", "-7", "2.5", '"s"', "'t'", "@en", "^^xsd:integer", "FILTER(", "GRAPH", "a",
    "\\u0022", '"""', "#", "ecslot", "PREFIX ex: <http://example.org/> ", "BASE <http://b/> ", "ftcontains(", "²"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(TRICKY), st.lists(st.tuples(st.floats(0, 1), st.integers(0, 3), EDITS), min_size=1, max_size=3))
def test_edited_texts_parse_the_same_by_shape_or_fail_the_same(text: str, edits) -> None:
    """Hostile or mistyped texts (characters and tokens inserted, deleted, replaced anywhere):
    through the shape cache, the same subscription or the same SubscriptionError as parsed whole,
    and never another exception."""
    for where, cut, insert in edits:
        at = int(where * len(text))
        text = text[:at] + insert + text[at + cut:]
    expected = whole_parse(text, outcome)
    assert outcome(text) == expected, text
    assert outcome(text) == expected, text  # from the cache
