"""The subscription language: what parses (and into what), and what is refused with a named construct."""

from __future__ import annotations

import pytest

from eventcloud.rdf.model import IRI, RDF, XSD, Literal
from eventcloud.sparql.subscription import (
    Subscription, SubscriptionError, TriplePattern, Var, parse_subscription,
)

EX = "http://ex.org/"
FOAF = "http://xmlns.com/foaf/0.1/"

PAPER = """PREFIX foaf: <http://xmlns.com/foaf/0.1/>
SELECT ?id ?name WHERE {
  GRAPH ?g {
    ?id foaf:name ?name .
    ?id foaf:age ?age
  }
  FILTER (?age > 25)
}"""


def test_paper_listing_parses_to_patterns_filters_and_projection() -> None:
    sub = parse_subscription(PAPER)
    assert sub.sparql == PAPER
    assert sub.graph == Var("g")
    assert sub.patterns == (
        TriplePattern(Var("id"), IRI(FOAF + "name"), Var("name")),
        TriplePattern(Var("id"), IRI(FOAF + "age"), Var("age")),
    )
    assert sub.projection == ("id", "name")
    assert not sub.distinct
    assert [f.text for f in sub.filters] == ['?age > 25']
    assert sub.filters[0].variables == frozenset({"age"})
    assert sub.variables() == frozenset({"g", "id", "name", "age"})
    assert sub.pattern_terms(0) == (None, None, IRI(FOAF + "name"), None)
    assert sub.pattern_terms(1, {"g": IRI(EX + "e"), "id": IRI(EX + "bob")}) == (
        IRI(EX + "e"), IRI(EX + "bob"), IRI(FOAF + "age"), None)


def test_select_star_projects_in_scope_variables_in_order_of_appearance() -> None:
    sub = parse_subscription(f"SELECT * WHERE {{ GRAPH ?g {{ ?s <{EX}p> ?o . ?o ?p ?s . _:x <{EX}q> ?z }} FILTER(?w > 1) }}")
    assert sub.projection == ("g", "s", "o", "p", "z")  # ?w only in a FILTER: not in scope; _:x hidden
    assert parse_subscription(f"SELECT * WHERE {{ GRAPH <{EX}g> {{ ?s ?p ?o }} }}").projection == ("s", "p", "o")


def test_select_variables_distinct_reduced() -> None:
    q = "SELECT {} ?o ?s ?o ?nowhere WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}"
    assert parse_subscription(q.format("")).projection == ("o", "s", "nowhere")
    assert parse_subscription(q.format("DISTINCT")).distinct
    assert parse_subscription(q.format("REDUCED")).distinct  # REDUCED is treated as DISTINCT


def test_prefixes_base_keyword_a_and_literal_forms() -> None:
    sub = parse_subscription(f"""BASE <http://base.org/dir/>
        PREFIX ex: <{EX}>
        SELECT * WHERE {{ GRAPH <graph> {{
            <rel> a ex:C ; ex:n 01, 2.50, 1.5e0, true, "x"@EN-us, "y"^^ex:t, "z", '''long''' .
        }} }}""")
    assert sub.graph == IRI("http://base.org/dir/graph")
    rel = IRI("http://base.org/dir/rel")
    assert sub.patterns[0] == TriplePattern(rel, IRI(RDF + "type"), IRI(EX + "C"))
    objects = [p.object for p in sub.patterns[1:]]
    assert objects == [
        Literal("1", XSD + "integer"), Literal("2.5", XSD + "decimal"), Literal("1.5", XSD + "double"),
        Literal("true", XSD + "boolean"), Literal("x", language="en-us"), Literal("y", EX + "t"), Literal("z"),
        Literal("long"),
    ]


def test_variables_everywhere_repeated_variables_and_blank_nodes() -> None:
    sub = parse_subscription(f"SELECT * WHERE {{ GRAPH ?g {{ ?x ?x ?x . [] <{EX}p> [ <{EX}q> ?v ] . ?g ?p ( 1 ) }} }}")
    assert sub.patterns[0] == TriplePattern(Var("x"), Var("x"), Var("x"))
    assert sub.patterns[0].variables() == frozenset({"x"})
    assert sub.patterns[1].subject == Var("_:b0") and sub.patterns[1].object == Var("_:b1")
    assert sub.patterns[2] == TriplePattern(Var("_:b1"), IRI(EX + "q"), Var("v"))
    assert sub.patterns[3].subject == Var("g")
    assert [p.predicate for p in sub.patterns[4:]] == [IRI(RDF + "first"), IRI(RDF + "rest")]
    assert "_:b0" not in sub.projection and "g" in sub.projection


def test_filters_inside_and_outside_the_graph_block_are_all_kept() -> None:
    sub = parse_subscription(f"""SELECT * WHERE {{
        FILTER(?a > 1)
        GRAPH ?g {{ ?s <{EX}p> ?a FILTER(?a < 9) . ?s <{EX}q> ?b FILTER(isIRI(?s)) }}
        FILTER(?b != ?a)
    }}""")
    assert len(sub.patterns) == 2
    assert sorted(f.text for f in sub.filters) == sorted(
        ["?a > 1", "?a < 9", "isIRI(?s)", "?b != ?a"])


def test_join_plans_start_with_the_most_selective_pattern_and_attach_filters() -> None:
    sub = parse_subscription(f"SELECT * WHERE {{ GRAPH ?g {{ ?a ?p ?b . ?b <{EX}q> <{EX}c> }} FILTER(?p != <{EX}x>) FILTER(1 = 1) }}")
    assert sub.plan.order == (1, 0)
    assert sub.indexed_plan.order[0] == 0  # OSMA's rule needs the indexing pattern first
    assert [f.text for f in sub.plan.before] == ["1 = 1"]
    assert sub.plan.checks[0] == () and len(sub.plan.checks[1]) == 1


def test_subscriptions_compare_by_content() -> None:
    assert parse_subscription(PAPER) == parse_subscription(PAPER)
    assert hash(parse_subscription(PAPER)) == hash(parse_subscription(PAPER))
    assert parse_subscription(PAPER) != parse_subscription(PAPER.replace("25", "26"))


def test_subscription_needs_a_pattern() -> None:
    with pytest.raises(SubscriptionError):
        Subscription("", Var("g"), (), (), (), False)


G = "GRAPH ?g { ?s ?p ?o }"
REFUSED = [
    ("optional", "SELECT * WHERE { GRAPH ?g {\n  ?s ?p ?o\n  OPTIONAL { ?s ?q ?x } } }", "OPTIONAL", (3, 3)),
    ("union", "SELECT * WHERE { GRAPH ?g { { ?s ?p ?o } UNION { ?s ?q ?o } } }", "UNION", (1, 42)),
    ("minus", "SELECT * WHERE { GRAPH ?g { ?s ?p ?o MINUS { ?s ?q ?o } } }", "MINUS", (1, 38)),
    ("sequence path", "SELECT * WHERE { GRAPH ?g { ?s <http://a>/<http://b> ?o } }", "property paths", None),
    ("star path", "SELECT * WHERE { GRAPH ?g { ?s <http://a>* ?o } }", "property paths", None),
    ("inverse path", "SELECT * WHERE { GRAPH ?g { ?s ^<http://a> ?o } }", "property paths", None),
    ("negated path", "SELECT * WHERE { GRAPH ?g { ?s !<http://a> ?o } }", "property paths", None),
    ("alternative path", "SELECT * WHERE { GRAPH ?g { ?s <http://a>|<http://b> ?o } }", "property paths", None),
    ("sub-query", "SELECT * WHERE { { SELECT ?s WHERE { ?s ?p ?o } } }", "sub-queries", (1, 20)),
    ("nested sub-query", "SELECT * WHERE { GRAPH ?g { ?s ?p ?o { SELECT ?s WHERE { ?s ?p ?o } } } }", "sub-queries", (1, 40)),
    ("service", f"SELECT * WHERE {{ {G} SERVICE <http://x> {{ ?a ?b ?c }} }}", "SERVICE", (1, 40)),
    ("bind", "SELECT * WHERE { GRAPH ?g { ?s ?p ?o BIND(1 AS ?x) } }", "BIND", (1, 38)),
    ("inline values", "SELECT * WHERE { GRAPH ?g { ?s ?p ?o VALUES ?s { <http://a> } } }", "VALUES", (1, 38)),
    ("trailing values", f"SELECT * WHERE {{ {G} }} VALUES ?s {{ <http://a> }}", "VALUES", (1, 42)),
    ("aggregate", f"SELECT (COUNT(*) AS ?c) WHERE {{ {G} }}", "aggregates", (1, 9)),
    ("group by", f"SELECT ?s WHERE {{ {G} }} GROUP BY ?s", "GROUP BY", (1, 43)),
    ("having", f"SELECT ?s WHERE {{ {G} }} HAVING (?s)", "HAVING", None),
    ("order by", f"SELECT * WHERE {{ {G} }} ORDER BY ?s", "ORDER BY", (1, 42)),
    ("limit", f"SELECT * WHERE {{ {G} }} LIMIT 1", "LIMIT", (1, 42)),
    ("offset", f"SELECT * WHERE {{ {G} }} OFFSET 1", "OFFSET", (1, 42)),
    ("select expression", f"SELECT (?s AS ?t) WHERE {{ {G} }}", "SELECT expressions", (1, 12)),
    ("patterns outside", f"SELECT * WHERE {{ ?a ?b ?c {G} }}", "patterns outside the GRAPH block", None),
    ("second graph", f"SELECT * WHERE {{ {G} GRAPH ?h {{ ?s ?p ?o }} }}", "second GRAPH block", (1, 40)),
    ("nested graph", "SELECT * WHERE { GRAPH ?g { ?s ?p ?o GRAPH ?h { ?a ?b ?c } } }", "nested GRAPH block", (1, 38)),
    ("no graph", "SELECT * WHERE { ?s ?p ?o }", "no GRAPH block", None),
    ("empty graph", "SELECT * WHERE { GRAPH ?g { } }", "empty GRAPH block", (1, 18)),
    ("nested group", "SELECT * WHERE { GRAPH ?g { { ?s ?p ?o } } }", "nested group pattern", None),
    ("ask", f"ASK {{ {G} }}", "ASK", (1, 1)),
    ("construct", f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ {G} }}", "CONSTRUCT", (1, 1)),
    ("describe", f"DESCRIBE ?s WHERE {{ {G} }}", "DESCRIBE", (1, 1)),
    ("from", f"SELECT * FROM <http://a> WHERE {{ {G} }}", "FROM", (1, 10)),
    ("from named", f"SELECT * FROM NAMED <http://a> WHERE {{ {G} }}", "FROM NAMED", (1, 10)),
    ("exists", "SELECT * WHERE { GRAPH ?g { ?s ?p ?o FILTER EXISTS { ?s ?p ?o } } }", "EXISTS", (1, 45)),
    ("not exists", f"SELECT * WHERE {{ {G}\n FILTER NOT EXISTS {{ ?s ?p ?o }} }}", "NOT EXISTS", (2, 9)),
    ("now", f"SELECT * WHERE {{ {G} FILTER(?o < NOW()) }}", "NOW", (1, 52)),
    ("custom function", f"SELECT * WHERE {{ {G} FILTER(<http://f>(?o)) }}", "function call", None),
    ("unknown prefix", "SELECT * WHERE { GRAPH ?g { ?s foo:p ?o } }", "prefix", None),
    ("literal predicate", 'SELECT * WHERE { GRAPH ?g { ?s "p" ?o } }', "syntax error", None),
    ("bad regex", f'SELECT * WHERE {{ {G} FILTER regex(?o, "(") }}', "regex", None),
    ("update", "INSERT DATA { <http://a> <http://b> <http://c> }", "syntax error", (1, 1)),
]


@pytest.mark.parametrize("name, query, construct, position", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_constructs_are_named(name: str, query: str, construct: str, position: tuple[int, int] | None) -> None:
    with pytest.raises(SubscriptionError) as info:
        parse_subscription(query)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.construct == construct
    if construct not in ("syntax error", "prefix", "regex", "function call"):
        assert construct.split()[0] in str(error)
    if position is not None:
        assert (error.line, error.column) == position
        assert f"(line {position[0]}, column {position[1]})" in str(error)


def test_message_names_the_construct_with_its_position() -> None:
    with pytest.raises(SubscriptionError) as info:
        parse_subscription("SELECT * WHERE {\n  GRAPH ?g {\n    OPTIONAL { ?s ?q ?x } } }")
    assert str(info.value) == "OPTIONAL is not supported in subscriptions (line 3, column 5)"


@pytest.mark.parametrize("query, line, column", [
    ("SELECT * WHERE { GRAPH ?g { ?s ?p ?o }\n FILTER( }", 2, 2),
    ("SELECT * WHERE { GRAPH ?g { ?s ?p ?o ", 1, 18),
    ("SELEKT * WHERE { GRAPH ?g { ?s ?p ?o } }", 1, 1),
])
def test_syntax_errors_carry_a_position(query: str, line: int, column: int) -> None:
    with pytest.raises(SubscriptionError) as info:
        parse_subscription(query)
    assert info.value.construct == "syntax error"
    assert (info.value.line, info.value.column) == (line, column)
    assert str(info.value).startswith("syntax error: ")


def test_keywords_inside_strings_iris_and_comments_are_not_located() -> None:
    query = """# OPTIONAL in a comment
SELECT * WHERE { GRAPH ?g { ?s <http://x/OPTIONAL> "OPTIONAL" }
  OPTIONAL { ?s ?p ?o } }"""
    with pytest.raises(SubscriptionError) as info:
        parse_subscription(query)
    assert (info.value.line, info.value.column) == (3, 3)


def test_not_text_is_refused() -> None:
    with pytest.raises(SubscriptionError):
        parse_subscription(b"SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }")  # type: ignore[arg-type]


def test_a_subscription_too_big_for_the_parser_says_which_limit_it_met() -> None:
    """The parser recurses per bracket and per triple pattern of a group; either way the user
    is told which, in terms of the text (a flat list of patterns is not "nested")."""
    flat = "SELECT * WHERE { GRAPH ?g { " + " . ".join(f"?s{i} <http://e/p{i}> ?s{i + 1}" for i in range(150)) + " } }"
    with pytest.raises(SubscriptionError, match=r"too long for the parser: about 150 triple patterns") as info:
        parse_subscription(flat)
    assert "nested" not in str(info.value)
    deep = "SELECT * WHERE { GRAPH ?g { ?s <http://e/p> ?o FILTER(" + "(" * 40 + "?o > 1" + ")" * 40 + ") } }"
    with pytest.raises(SubscriptionError, match=r"nested too deeply \(43 levels of brackets"):
        parse_subscription(deep)
    # how many parse depends on how deep the caller's stack already is (~10 frames per pattern)
    fine = "SELECT * WHERE { GRAPH ?g { " + " . ".join(f"?s{i} <http://e/p{i}> ?s{i + 1}" for i in range(30)) + " } }"
    assert len(parse_subscription(fine).patterns) == 30
