"""Full-text FILTERs (`ftcontains`, after RTF): tokens, the expression grammar, its errors, and FILTERs using it.

The grammar's semantics are checked against `tests.helpers.ft_oracle`, an independent brute-force
evaluator of expression trees (its own tokenizer, no parser: trees are rendered to text with
random case, spacing and implicit AND, then parsed by us). Whole subscriptions are checked
against pyoxigraph with `ec:ftcontains` registered as a custom function backed by that evaluator.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventcloud.matching.reference import results
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal
from eventcloud.sparql.filters.fulltext import (
    And, FtSyntaxError, Near, Not, Or, Phrase, Word, parse_fulltext, tokenize,
)
from eventcloud.sparql.subscription import SubscriptionError, parse_subscription
from tests.helpers import (
    EXT, as_rows, ft_function, ft_oracle, ft_render, ft_words, oracle_with, random_ft_text, random_ft_tree, sparql_string,
    visible,
)

EX = "http://ex.org/"
PREFIXES = f"PREFIX ex: <{EX}> PREFIX ec: <{EXT}> PREFIX xsd: <{XSD}> "


def test_words_are_letter_mark_digit_runs_casefolded_with_accents_kept() -> None:
    assert tokenize("The Olympic-Games, in RIO (2016)!").words == ("the", "olympic", "games", "in", "rio", "2016")
    assert tokenize("Café STRASSE straße").words == ("café", "strasse", "strasse")
    assert tokenize("cafe\u0301 naïve_x").words == ("cafe\u0301", "naïve", "x")  # a combining accent stays in its word
    assert tokenize("日本語 Ωmega").words == ("日本語", "ωmega")
    assert tokenize("").words == () and tokenize(" -- ").words == ()
    assert ft_words("Café, cafe\u0301 İzmir") == list(tokenize("Café, cafe\u0301 İzmir").words)


@pytest.mark.parametrize("expression, tree", [
    ("olympic", Word("olympic")),
    ("Olymp*", Word("olymp", True)),
    ("olympic games", And((Word("olympic"), Word("games")))),
    ("olympic AND games OR rio", Or((And((Word("olympic"), Word("games"))), Word("rio")))),
    ("a OR b OR c d", Or((Word("a"), Word("b"), And((Word("c"), Word("d")))))),
    ('"Olympic Games"', Phrase((Word("olympic"), Word("games")))),
    ('"games"', Word("games")),
    ("games NEAR/2 rio", Near((Word("games"), Word("rio")), (2,))),
    ('"olympic games" NEAR/0 rio* NEAR/3 x', Near((Phrase((Word("olympic"), Word("games"))), Word("rio", True), Word("x")),
                                                (0, 3))),
    ("NOT spam", Not(Word("spam"))),
    ("NOT a b", And((Not(Word("a")), Word("b")))),
    ("NOT (a OR b)", Not(Or((Word("a"), Word("b"))))),
    ("NOT a NEAR/1 b", Not(Near((Word("a"), Word("b")), (1,)))),
    ("and or not near", And((Word("and"), Word("or"), Word("not"), Word("near")))),
    ("(a (b OR c))", And((Word("a"), Or((Word("b"), Word("c")))))),
])
def test_grammar(expression: str, tree: object) -> None:
    parsed = parse_fulltext(expression)
    assert parsed.root == tree
    assert parse_fulltext(str(parsed.root)).root == tree  # the tree prints as an equivalent expression


@pytest.mark.parametrize("expression, position, reason", [
    ("", 1, "empty expression"),
    ("   ", 4, "empty expression"),
    ("a AND", 6, "ends where"),
    ("a OR OR b", 6, "is expected"),
    ("(a", 1, "missing ')'"),
    ("a)", 2, "')' without '('"),
    ("()", 2, "empty parentheses"),
    ("a NEAR b", 3, "NEAR needs a distance"),
    ("NEAR/2 a", 1, "is expected"),
    ("(a OR b) NEAR/2 c", 1, "NEAR/n needs a word"),
    ("a NEAR/2 NOT b", 10, "is expected"),
    ("a / b", 3, "unexpected character '/'"),
    ("x/3", 2, "only allowed in NEAR/n"),
    ('"unterminated', 1, "unterminated phrase"),
    ('a ""', 3, "a phrase needs at least one word"),
    ("a*b", 2, "must end a word"),
    ("*a", 1, "must end a word"),
    ("a NEAR/99999 b", 8, "NEAR distance"),
    ("(" * 40 + "a" + ")" * 40, 33, "nested deeper"),
])
def test_malformed_expressions_name_the_position(expression: str, position: int, reason: str) -> None:
    with pytest.raises(FtSyntaxError) as info:
        parse_fulltext(expression)
    assert info.value.position == position
    assert reason in str(info.value) and f"position {position}" in str(info.value)


@pytest.mark.parametrize("expression, text, expected", [
    ("games NEAR/2 rio", "The Olympic games in Rio", True),
    ("games NEAR/2 rio", "games will be held in rio", False),   # four words between
    ("games NEAR/2 rio", "rio games", False),                    # rio must come after games
    ("games NEAR/0 rio", "games rio", True),
    ('"olympic games"', "olympic and games", False),
    ('"olympic games"', "OLYMPIC, GAMES!", True),
    ("olymp* NOT winter", "Olympics 2016", True),
    ("olymp* NOT winter", "Winter Olympics", False),
    ("a NEAR/1 a", "a", False),                                  # two occurrences needed
    ("a NEAR/1 a", "a x a", True),
    ('"a b" NEAR/1 c', "a b x c", True),
    ('"a b" NEAR/1 c', "a x b c", False),
    ("café", "Cafe", False),                                     # accents are kept
    ("straße", "STRASSE", True),                                 # Unicode case folding
    ("NOT x", "", True),
])
def test_evaluation_examples(expression: str, text: str, expected: bool) -> None:
    assert parse_fulltext(expression).on_text(text) is expected


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_grammar_against_the_independent_evaluator(seed: int) -> None:
    r = random.Random(seed)
    tree = random_ft_tree(r)
    query = parse_fulltext(ft_render(tree, r))
    for _ in range(6):
        text = random_ft_text(r)
        assert query.on_text(text) == ft_oracle(tree, text), (ft_render(tree, random.Random(0)), text)


# --- in subscriptions ------------------------------------------------------------------------------

def _query(filter_text: str) -> str:
    return f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?s ex:text ?t . ?s ex:n ?n }} FILTER({filter_text}) }}"


def test_the_bare_name_and_the_iri_compile_to_the_same_filter() -> None:
    bare = parse_subscription(_query('ftcontains(?t, "olympic games")'))
    iri = parse_subscription(_query('ec:ftcontains(?t, "olympic games")'))
    full = parse_subscription(_query(f'<{EXT}ftcontains>(?t, "olympic games")'))
    assert bare.filters == iri.filters == full.filters
    assert bare.sparql != iri.sparql  # the user's text is kept as written
    # the bare name is rewritten only where it is a function name: not in strings, IRIs or comments
    sub = parse_subscription(f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ ?s <{EX}ftcontains> ?t }}  # ftcontains(\n"
                             f'FILTER(FTContains (?t, "ftcontains( x)"))}}')
    assert sub.patterns[0].predicate == IRI(EX + "ftcontains")
    assert "ftcontains( x)" in sub.filters[0].text


def test_syntax_errors_after_a_rewrite_keep_the_users_columns() -> None:
    text = PREFIXES + ('SELECT * WHERE { GRAPH ?g { ?s ?p ?t } FILTER(ftcontains(?t, "a")) FILTER(ftcontains(?t, "b"))\n'
                       ' FILTER(ftcontains(?t, "c")) FILTER(?t %% 2) }')
    with pytest.raises(SubscriptionError) as info:
        parse_subscription(text)
    assert info.value.construct == "syntax error"
    line = text.split("\n")[info.value.line - 1]
    assert line[info.value.column - 1:].startswith("FILTER(?t %%")  # where rdflib gave up, in the user's text


@pytest.mark.parametrize("filter_text, message", [
    ('ftcontains(?t, "olympic AND")', "position 12"),
    ('ftcontains(?t, ?n)', "must be a string constant"),
    ('ftcontains(?t, "a"@en)', "must be a string constant"),
    ('ftcontains(?t)', "takes 2 arguments"),
    ('ec:ftcontains(?t, "a", "b")', "takes 2 arguments"),
    ('!ftcontains(?t, "\\"a b")', "unterminated phrase at position 1"),
])
def test_malformed_full_text_filters_are_refused_at_subscribe(filter_text: str, message: str) -> None:
    with pytest.raises(SubscriptionError) as info:
        parse_subscription(_query(filter_text))
    assert info.value.construct == "ftcontains"
    assert message in str(info.value)


FT_FILTERS = [
    "{f}(?t, {e})", "!{f}(?t, {e})", "{f}(?t, {e}) && ?n > 2", "{f}(?t, {e}) || ?n = 1",
    "{f}(str(?s), {e}) || {f}(?t, {e})", "IF({f}(?t, {e}), ?n < 3, false)",
    "COALESCE({f}(?n, {e}), true)", "{f}(lcase(?t), {e}) && lang(?t) != \"fr\"",
    "{f}(?n, {e})", "{f}(?t, {e}) = false",
]


def _objects(r: random.Random) -> list:
    text = random_ft_text(r)
    return [Literal(text), Literal(text, language=r.choice(["en", "fr"])), Literal(text, XSD + "string"),
            Literal(str(r.randint(0, 5)), XSD + "integer"), IRI(EX + "olympic")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_subscriptions_with_full_text_against_the_oracle(seed: int) -> None:
    r = random.Random(seed)
    tree = random_ft_tree(r)
    expression = ft_render(tree, r)
    literal = sparql_string(expression)
    template = r.choice(FT_FILTERS)
    sub = parse_subscription(_query(template.format(e=literal, f=r.choice(["ftcontains", "ec:ftcontains"]))))
    query = _query(template.format(e=literal, f="ec:ftcontains"))  # the oracle knows only the IRI
    functions = {EXT + "ftcontains": ft_function({expression: tree})}
    for k in range(4):
        graph = IRI(f"{EX}event/{k}")
        subject = IRI(EX + r.choice(["olympic", "games"]))
        event = CompoundEvent.from_triples(graph, [(subject, IRI(EX + "text"), r.choice(_objects(r))),
                                                   (subject, IRI(EX + "n"), Literal(str(r.randint(0, 4)), XSD + "integer"))])
        expected = oracle_with(query, event, functions)
        got = as_rows([visible(b) for b in results(sub, event)])
        assert len(got) == len(set(got)) and set(got) == set(expected), query
