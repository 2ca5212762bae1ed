"""RTF's text index inside the shared subscription index: it must answer exactly what evaluating each
subscription separately answers, in both layouts (a trie per table, RTFm; one per index, RTFs).

Subscriptions put `ftcontains` where every part of the index meets it: tabled at the trigger,
at a join group (per solution), at CSMA's first-pattern bucket, not tabled at all (under OR),
twice in one subscription, with phrases, NEAR chains, prefixes and negations from the random
expression generator of tests.helpers, and one expression with too many alternatives to index.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventcloud.matching.index import SubscriptionIndex
from eventcloud.matching.textindex import MAX_ALTERNATIVES, TextTable, WordTrie, alternatives
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal
from eventcloud.sparql.filters.fulltext import parse_fulltext, tokenize
from eventcloud.sparql.subscription import Subscription, parse_subscription
from tests.helpers import EXT, brute_first, brute_match, ft_render, random_ft_text, random_ft_tree, sparql_string

EX = "http://ex.org/"
PREFIXES = f"PREFIX ex: <{EX}> PREFIX ec: <{EXT}> PREFIX xsd: <{XSD}> "
LAYOUTS = ["rtfm", "rtfs"]
TOO_MANY = "(a OR b) (c OR d) (e OR f) (g OR h) (i OR j) (k OR l) (m OR n)"  # 128 alternatives
SHAPES = [
    "?s ex:text ?t FILTER(ftcontains(?t, {e}))",
    "?s ex:text ?t . ?s ex:n ?n FILTER(ftcontains(?t, {e}) && ?n > {k})",
    "?s ex:n ?n . ?s ?p ?t FILTER(ftcontains(?t, {e}))",
    "ex:a ex:text ?t . ?s ex:text ?u FILTER(ftcontains(?u, {e}))",
    "?s ex:text ?t FILTER(ftcontains(?t, {e}) || ftcontains(?t, {f}))",
    "?s ex:text ?t FILTER(ftcontains(?t, {e})) FILTER(ec:ftcontains(?t, {f}))",
    "?s ex:text ?t . ?s ex:title ?u FILTER(ftcontains(?t, {e}) && ftcontains(?u, {f}))",
    "?s ?p ?t FILTER(!ftcontains(?t, {e}))",
]


def text_query(r: random.Random) -> str:
    def expression() -> str:
        return TOO_MANY if r.random() < 0.03 else ft_render(random_ft_tree(r), r)
    body = r.choice(SHAPES).format(e=sparql_string(expression()), f=sparql_string(expression()), k=r.randint(0, 4))
    return f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ {body} }} }}"


def text_event(r: random.Random, n: int) -> CompoundEvent:
    graph = IRI(f"{EX}event/{n}")
    triples = set()
    for _ in range(r.randint(1, 5)):
        text = random_ft_text(r)
        value = r.choice([Literal(text), Literal(text), Literal(text, language="en"),
                          Literal(str(r.randint(0, 5)), XSD + "integer"), IRI(EX + "olympic")])
        predicate = IRI(EX + r.choice(["text", "text", "title", "n"]))
        if predicate.value.endswith("n"):
            value = Literal(str(r.randint(0, 5)), XSD + "integer")
        triples.add((IRI(EX + r.choice("ab")), predicate, value))
    return CompoundEvent.from_triples(graph, sorted(triples, key=str))


def _pools() -> tuple[list[Subscription], list[CompoundEvent]]:
    r = random.Random(13)
    return [parse_subscription(text_query(r)) for _ in range(80)], [text_event(r, n) for n in range(40)]


SUBS, EVENTS = _pools()
IDENTS = [f"s{i}" for i in range(16)]
operations = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, len(IDENTS) - 1), st.integers(0, len(SUBS) - 1)),
    st.tuples(st.just("remove"), st.integers(0, len(IDENTS) - 1))), max_size=50)
event_picks = st.lists(st.integers(0, len(EVENTS) - 1), min_size=1, max_size=6)


def check(idx: SubscriptionIndex, model: dict[str, Subscription], events: list[CompoundEvent]) -> None:
    for event in events:
        assert idx.match_event(event) == brute_match(model, event), event.n_quads()
        for quad in event.quads:
            assert idx.first_pattern_candidates(quad) == brute_first(model, quad), quad.n_quads()


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, picks=event_picks)
def test_text_index_equals_brute_force_after_any_adds_and_removes(layout, ops, picks) -> None:
    idx, model = SubscriptionIndex(text_layout=layout), {}
    for op in ops:
        ident = IDENTS[op[1]]
        if op[0] == "add":
            idx.add(ident, SUBS[op[2]])
            if model.get(ident, SUBS[op[2]]) != SUBS[op[2]]:
                del model[ident]
            model.setdefault(ident, SUBS[op[2]])
        else:
            assert idx.remove(ident) == (ident in model)
            model.pop(ident, None)
    check(idx, model, [EVENTS[i] for i in picks])
    for ident in list(model):
        assert idx.remove(ident)
    assert idx.stats()["constraint_entries"] == 0 and idx.stats()["patterns"] == 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_whole_pool_at_once(layout) -> None:
    idx = SubscriptionIndex(text_layout=layout)
    model = {f"q{i}": sub for i, sub in enumerate(SUBS)}
    for ident, sub in model.items():
        idx.add(ident, sub)
    matched = sum(len(idx.match_event(e)) for e in EVENTS)
    check(idx, model, EVENTS)
    assert matched > 100 and idx.stats()["constraint_entries"] > 40


# --- the pieces ----------------------------------------------------------------------------------

def keys(expression: str) -> list[tuple[tuple[str, ...], bool]]:
    return [(alt.keys, alt.check is None) for alt in alternatives(parse_fulltext(expression).root)]


def test_alternatives_split_or_and_keep_words_phrases_and_negations_to_check() -> None:
    assert keys("olympic games") == [(("games", "olympic"), True)]
    assert keys("olympic (games OR rio)") == [(("games", "olympic"), True), (("olympic", "rio"), True)]
    assert keys('"olympic games" NEAR/2 rio*') == [(("games", "olympic", "rio*"), False)]
    assert keys("NOT (a OR b)") == [((), False)]
    assert keys("NOT (a b)") == [((), False), ((), False)]
    assert keys("a NOT b") == [(("a",), False)]
    assert alternatives(parse_fulltext(TOO_MANY).root) is None
    assert len(alternatives(parse_fulltext("(a OR b) (c OR d)").root)) == 4 <= MAX_ALTERNATIVES


def test_the_trie_walks_only_along_present_words_and_prunes_on_removal() -> None:
    trie = WordTrie()
    trie.add(("games", "olympic"), (None, "s1"))
    trie.add(("games", "olympic", "rio*"), (None, "s2"))
    trie.add(("olymp*",), (None, "s3"))
    assert sorted(leaf[1] for leaf in trie.walk(trie.present(tokenize("Olympic GAMES")))) == ["s1", "s3"]
    assert sorted(leaf[1] for leaf in trie.walk(trie.present(tokenize("olympic games in Rio2016")))) == ["s1", "s2", "s3"]
    assert trie.walk(trie.present(tokenize("games"))) == []
    assert trie.remove(("games", "olympic", "rio*"), "s2") == 1 and trie.remove(("olymp*",), "s3") == 1
    assert trie.prefixes == {} and trie.lengths == {}
    assert trie.remove(("games", "olympic"), "s1") == 1
    assert trie.root.children == {} and trie.size == 0


def test_a_text_table_decides_exactly_and_refuses_non_strings() -> None:
    class Constraint:
        def __init__(self, expression: str) -> None:
            self.value = parse_fulltext(expression)

    for layout in (None, "shared"):
        from eventcloud.matching.textindex import SharedText
        table = TextTable(SharedText() if layout else None)
        pairs = [(Constraint(e), e) for e in ["games", "NOT games", '"olympic games"', TOO_MANY, "games NEAR/0 rio"]]
        for constraint, item in pairs:
            table.add(constraint, item)
        exact, maybe = table.split("The Olympic Games in Rio")
        assert sorted(exact) == ["\"olympic games\"", "games"] and maybe == [TOO_MANY]
        assert table.split(7) == ([], [])  # not a string: ftcontains is an error, every entry false
        assert sorted(table.entries()) == sorted(e for _, e in pairs)
        for constraint, item in pairs:
            assert table.remove(constraint, item)
        assert len(table) == 0 and table.entries() == []
