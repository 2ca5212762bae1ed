"""Sample subscriptions shared by the SPARQL and peer tests: is-a templates with random
taxonomy events, and texts that are tricky to parse (plus every subscription the suite holds)."""

from __future__ import annotations

import ast
import random
from pathlib import Path

from eventcloud.rdf.model import IRI, RDF, XSD, CompoundEvent, Literal
from tests.helpers import EX

TESTS = Path(__file__).resolve().parent.parent

TRICKY = [
    # prefixes, base and relative IRIs: declarations stay in the shape
    "PREFIX ex: <http://example.org/> SELECT ?g ?s WHERE { GRAPH ?g { ?s ex:p ex:o } }",
    "BASE <http://example.org/base/> SELECT ?g ?s WHERE { GRAPH ?g { ?s <rel> <http://x/abs> } }",
    "PREFIX : <http://example.org/> SELECT * WHERE { GRAPH ?g { ?s :p :o ; :q ?v . FILTER(?v > 10) } }",
    # strings: plain, language, datatypes by IRI and prefixed name, escapes, long strings
    'SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> "abc"@en . ?s <http://x/q> "7"^^<http://www.w3.org/2001/XMLSchema#integer> } }',
    'PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> "7"^^xsd:integer } }',
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> 'single' . ?s <http://x/q> \"\" } }",
    'SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> "esc\\"aped" . ?s <http://x/q> """long "one" here""" } }',
    'SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?o FILTER(regex(str(?o), "^a.c$", "i")) } }',
    # numbers: integers vary; signed, decimal and double ones stay in the shape
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?v FILTER(?v >= 5 && ?v < 17 && ?v != -3 && ?v > +2) } }",
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?v FILTER(?v > 2.5 || ?v < 1e3 || ?v = .5 || ?v = - 4) } }",
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> 42.} }",
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?v FILTER(?v > 1²) } }",   # not an INTEGER to SPARQL
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ² } }",
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> \\u0022 <http://x/o> \\u0022 } }",  # expanded before parsing
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/ünï> \"ß\" . ?s ex:ünï 3 } }",
    # comparisons written without spaces, IRIs in comments, blank nodes, the keyword a
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?a . ?s <http://x/q> ?b FILTER(?a<?b&&?b>3) } }",
    "SELECT ?g WHERE { # <http://x/comment> 'quoted\n GRAPH ?g { _:b0 <http://x/p> [] . ?s a <http://x/C> } }",
    "SELECT ?g WHERE { GRAPH <http://x/graph> { ?s <http://x/p> ?o } }",
    "SELECT DISTINCT ?s WHERE { GRAPH ?g { ?s <http://x/p> ?o } FILTER(?o IN (1, 2, 3)) }",
    # extensions: bare ftcontains, the is-a path, functions by IRI
    'SELECT ?g WHERE { GRAPH ?g { ?s <http://x/title> ?t FILTER(ftcontains(?t, "traffic AND jam")) } }',
    "PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "
    "SELECT ?g WHERE { GRAPH ?g { ?s rdf:type/rdfs:subClassOf* <http://x/Vehicle> } }",
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?o FILTER(<http://www.w3.org/2001/XMLSchema#integer>(?o) > 3) } }",
    # texts that are refused or wrong: the same error either way
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?o } } LIMIT 5",
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?o OPTIONAL { ?o <http://x/q> 3 } } }",
    "SELECT ?g WHERE { GRAPH ?g { ?s ex:p ?o } }",
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?o FILTER(?o > ) } }",
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> \"unterminated } }",
    "SELECT ?g WHERE { GRAPH ?g { \"lit\" <http://x/p> ?o } }",
    "ASK { GRAPH ?g { ?s <http://x/p> 1 } }",
    "SELECT ?g WHERE { GRAPH ?g { ?s <http://x/p> ?o FILTER(<http://x/unknown-function>(?o)) } }",
]


def suite_texts() -> list[str]:
    """Every string constant of the test suite that looks like a subscription."""
    found: dict[str, None] = {}
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "SELECT" in node.value \
                    and "{" in node.value:
                found[node.value] = None
    return list(found)


TEMPLATES = [
    "?x a/rdfs:subClassOf* ex:C{k}",
    "?x rdf:type/rdfs:subClassOf* ex:C{k} . ?x ex:v ?v FILTER(?v > {n})",
    "?x a ?c . ?x ex:v ?v FILTER(ec:descendantOf(?c, ex:C{k}) && ?v < {n})",
    "?x a ?c FILTER(ec:ancestorOf(?c, ex:C{k}))",
    "?x a ?c FILTER(ec:childOf(?c, ex:C{k}) || ec:childOf(?c, ex:C{j}))",
    "?x a ?c FILTER(ec:descendantOf(ex:C{k}, ?c))",
    "?x a ?c FILTER(!ec:descendantOf(?c, ex:C{k}))",
    "?x a/rdfs:subClassOf* ex:C{k} . ?y a/rdfs:subClassOf* ex:C{j} . ?x ex:link ?y",
    "ex:i0 a/rdfs:subClassOf* ex:C{k}",
    "[] a/rdfs:subClassOf* ex:C{k} . ?z ex:v ?v",
    "?x a/rdfs:subClassOf* ex:C{k} . ?x a ?c FILTER(ec:ancestorOf(?c, ex:C{j}))",
    "?x ex:v ?v FILTER(ec:descendantOf(?v, ex:C{k}))",
]


def random_isa_event(r: random.Random, n: int, classes: int) -> CompoundEvent:
    graph = IRI(f"{EX}event/{n}")
    triples = set()
    for i in range(r.randint(1, 4)):
        instance = IRI(f"{EX}i{r.randrange(3)}")
        for _ in range(r.randint(1, 2)):
            triples.add((instance, IRI(RDF + "type"), IRI(f"{EX}C{r.randrange(classes + 1)}")))  # C{classes}: unknown
        triples.add((instance, IRI(EX + "v"), Literal(str(r.randint(0, 9)), XSD + "integer")))
        if r.random() < 0.5:
            triples.add((instance, IRI(EX + "link"), IRI(f"{EX}i{r.randrange(3)}")))
    return CompoundEvent.from_triples(graph, sorted(triples, key=str))


def outcome(text: str):
    """The subscription `text` parses into, or the refusal's parts."""
    from eventcloud.sparql.subscription import SubscriptionError, parse_subscription
    try:
        return parse_subscription(text)
    except SubscriptionError as exc:
        return ("error", str(exc), exc.construct, exc.line, exc.column)


def whole_parse(text: str, parse=None):
    """`parse(text)` (default `parse_subscription`) with shapes and their templates bypassed
    (the text parsed whole)."""
    import eventcloud.sparql.subscription as subscription_module
    parse = parse or subscription_module.parse_subscription
    original = subscription_module.shape_of
    subscription_module.shape_of = lambda text: None
    try:
        return parse(text)
    finally:
        subscription_module.shape_of = original
