"""Full-text subscriptions and the is-a path end to end, through real peers (in process), both algorithms.

Peers parse subscriptions and match them with the code under test, unchanged: this checks that
`ftcontains` and `rdf:type/rdfs:subClassOf*` travel (indexing pattern, CSMA rewriting, OSMA's
notifier rule) and are delivered exactly as pyoxigraph answers, with `ec:ftcontains` registered
in the oracle as a custom function backed by the independent evaluator of tests.helpers. Peers
hold no taxonomy yet (loading one is the daemon's part), so the path means "a type equal to C".
"""

from __future__ import annotations

import random

import pytest

from eventcloud.rdf.model import IRI, RDF, XSD, CompoundEvent, Literal, event_graph, make_quad
from eventcloud.testing import open_overlay
from tests.helpers import (
    ALGORITHMS, EXO as EX, EXT, check_delivered, ft_function, ft_render, oracle_with, random_ft_text, random_ft_tree,
    sparql_string,
)

PREFIXES = f"PREFIX ex: <{EX}> PREFIX ec: <{EXT}> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "
BODIES = [
    "?s ex:title ?t FILTER(ftcontains(?t, {e}))",
    "?s ex:title ?t . ?s ex:n ?n FILTER(ec:ftcontains(?t, {e}) && ?n > 1)",
    "?s ?p ?t . ?s a/rdfs:subClassOf* ex:Talk FILTER(ftcontains(?t, {e}))",
    "?s a/rdfs:subClassOf* ex:Talk . ?s ex:n ?n",
    "?s ex:title ?t FILTER(!ftcontains(?t, {e}) || ftcontains(?t, {e}))",
]


def _event(rng: random.Random, i: int) -> CompoundEvent:
    graph = event_graph("ft", 1000 + i, i)
    subject = IRI(f"{EX}talk/{i % 3}")
    text = random_ft_text(rng)
    quads = [make_quad(graph, subject, IRI(EX + "title"), rng.choice([Literal(text), Literal(text, language="en")])),
             make_quad(graph, subject, IRI(EX + "n"), Literal(str(rng.randint(0, 3)), XSD + "integer"))]
    if rng.random() < 0.6:
        quads.append(make_quad(graph, subject, IRI(RDF + "type"), IRI(EX + rng.choice(["Talk", "Concert"]))))
    return CompoundEvent(graph, tuple(quads))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_full_text_and_path_subscriptions_match_the_oracle(autojump_clock, algorithm):
    rng = random.Random(11)
    async with open_overlay(5, algorithm, seed=3) as overlay:
        async with overlay.client(0, "subscriber") as subscriber, overlay.client(3, "publisher") as publisher:
            subs, trees = [], {}
            for k in range(8):
                tree = random_ft_tree(rng)
                expression = ft_render(tree, rng)
                trees[expression] = tree
                text = f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ {BODIES[k % len(BODIES)].format(e=sparql_string(expression))} }} }}"
                subs.append((text, await subscriber.subscribe(text, kind="bindings")))
            events = [_event(rng, i) for i in range(20)]
            for event in events:
                await publisher.publish(event)
            functions = {EXT + "ftcontains": ft_function(trees)}
            delivered = 0
            for text, sub in subs:
                oracle_text = text.replace("(ftcontains(", "(ec:ftcontains(").replace("!ftcontains(", "!ec:ftcontains(") \
                    .replace("|| ftcontains(", "|| ec:ftcontains(")
                expected = {}
                for event in events:
                    rows = {frozenset((n, t.n3()) for n, t in row) for row in oracle_with(oracle_text, event, functions)}
                    if rows:
                        expected[event.graph.value] = rows
                delivered += await check_delivered(sub, expected, text)
            assert delivered >= 10  # the workload matches, not only rejects


async def test_one_time_queries_call_ftcontains_and_the_is_a_tests_as_subscriptions_do(autojump_clock):
    """A one-time query with `ftcontains` failed ("the query's evaluation failed (Traceback …)"):
    pyoxigraph evaluates one-time queries and knew none of EventCloud's FILTER functions. Now
    the same functions are registered wherever a one-time query runs: a pushed-down query at each
    peer, a gathered one at the entry (in a thread here, in a child process on real peers,
    tests/peers/test_hostile.py). Each answer is the oracle's (the independent evaluator of
    tests.helpers for the full text), and the is-a tests and the is-a path read the taxonomy the
    overlay holds."""
    from eventcloud.sparql.taxonomy import Taxonomy

    rng = random.Random(5)
    events = [_event(rng, i) for i in range(30)]
    oracle_store = __import__("pyoxigraph").Store()
    from eventcloud.rdf.oxigraph import quad_to_ox

    oracle_store.extend([quad_to_ox(q) for e in events for q in e.quads])
    async with open_overlay(4, "osma", seed=2) as overlay:
        async with overlay.client(1) as client:
            await client.publish_batch(events)
            await client.load_schema(Taxonomy([(f"{EX}Talk", f"{EX}Event"), (f"{EX}Concert", f"{EX}Event"),
                                               (f"{EX}Keynote", f"{EX}Talk")]))
            for _ in range(6):
                tree = random_ft_tree(rng)
                expression = ft_render(tree, rng)
                functions = {EXT + "ftcontains": ft_function({expression: tree})}
                for body in ("?s ex:title ?t FILTER(ftcontains(?t, {e}))",                       # pushed down
                             "?s ex:title ?t . ?s ex:n ?n FILTER(ec:ftcontains(?t, {e}) && ?n >= 0)"):  # gathered
                    text = f"{PREFIXES}SELECT ?s ?t WHERE {{ GRAPH ?g {{ {body.format(e=sparql_string(expression))} }} }}"
                    got = await client.query(text)
                    oracle = oracle_store.query(text.replace("(ftcontains(", "(ec:ftcontains("),
                                                use_default_graph_as_union=True,
                                                custom_functions={__import__("pyoxigraph").NamedNode(k): v
                                                                  for k, v in functions.items()})
                    expected = sorted((row["s"].value, row["t"].value) for row in oracle)
                    assert sorted((b["s"]["value"], b["t"]["value"]) for b in got["results"]["bindings"]) == expected, text
            for function, of, classes in (("descendantOf", "Event", {"Talk", "Concert"}), ("descendantOf", "Talk", {"Talk"}),
                                          ("ancestorOf", "Talk", {"Talk"}), ("childOf", "Event", {"Talk", "Concert"})):
                text = (f"{PREFIXES}SELECT DISTINCT ?c WHERE {{ GRAPH ?g {{ ?s a ?c FILTER(ec:{function}(?c, ex:{of})) }} }}")
                got = {b["c"]["value"] for b in (await client.query(text))["results"]["bindings"]}
                assert got == {f"{EX}{c}" for c in classes}, text
            # the is-a path reads the taxonomy too (it matched a type equal to ex:Event only: nothing)
            typed = {q.s.value for e in events for q in e.quads if q.p.value == RDF + "type"}
            for cls, expected in (("Event", typed), ("Talk", {q.s.value for e in events for q in e.quads
                                                               if q.o == IRI(EX + "Talk")})):
                text = f"{PREFIXES}SELECT DISTINCT ?s WHERE {{ GRAPH ?g {{ ?s a/rdfs:subClassOf* ex:{cls} }} }}"
                got = {b["s"]["value"] for b in (await client.query(text))["results"]["bindings"]}
                assert got == expected and got, text
