"""Full-text and is-a subscriptions over TCP, through real peer processes, under both algorithms:
random subscriptions (ftcontains expressions, the rdf:type/rdfs:subClassOf* path, the is-a FILTER
functions) and random events, every notification checked against pyoxigraph (with the
independent full-text evaluator as a custom function and the loaded taxonomy's triples)."""

from __future__ import annotations

import random

import pytest
import trio

from eventcloud.client import connect
from eventcloud.rdf.model import IRI, RDF, XSD, CompoundEvent, Literal, event_graph, make_quad
from eventcloud.sparql.taxonomy import Taxonomy
from peers.supervisor import LocalCluster
from tests.helpers import (
    ALGORITHMS, EX, EXT, check_delivered, ft_function, ft_render, isa_functions, oracle_with, random_ft_text,
    random_ft_tree, random_taxonomy_edges, sparql_string,
)

pytestmark = pytest.mark.processes
PREFIXES = (f"PREFIX ex: <{EX}> PREFIX ec: <{EXT}> PREFIX rdf: <{RDF}> "
            "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> ")
CLASSES = 6
BODIES = [
    "?x ex:title ?t FILTER(ftcontains(?t, {e}))",
    "?x ex:title ?t . ?x ex:v ?v FILTER(ec:ftcontains(?t, {e}) && ?v > {n})",
    "?x a/rdfs:subClassOf* ex:C{k} . ?x ex:title ?t FILTER(ftcontains(?t, {e}))",
    "?x a/rdfs:subClassOf* ex:C{k} . ?x ex:v ?v FILTER(?v < {n})",
    "?x a ?c . ?x ex:v ?v FILTER(ec:descendantOf(?c, ex:C{k}) || ec:childOf(?c, ex:C{j}))",
    "?x a ?c FILTER(ec:ancestorOf(?c, ex:C{k}))",
]


def _event(r: random.Random, i: int) -> CompoundEvent:
    graph = event_graph("ext", 5000 + i, i)
    quads = []
    for n in range(r.randint(1, 2)):
        x = IRI(f"{EX}item/{i}-{n}")
        quads.append(make_quad(graph, x, IRI(RDF + "type"), IRI(f"{EX}C{r.randrange(CLASSES + 1)}")))
        quads.append(make_quad(graph, x, IRI(EX + "title"), Literal(random_ft_text(r))))
        quads.append(make_quad(graph, x, IRI(EX + "v"), Literal(str(r.randint(0, 9)), XSD + "integer")))
    return CompoundEvent(graph, tuple(quads))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_full_text_and_taxonomy_subscriptions_over_tcp_match_the_oracle(tmp_path, algorithm):
    r = random.Random(23 if algorithm == "osma" else 29)
    edges = random_taxonomy_edges(r, CLASSES)
    with LocalCluster(4, data_dir=tmp_path / "c", algorithm=algorithm, seed=4) as cluster:
        async with connect(cluster.addresses[1], admin_token=cluster.admin_token) as admin:
            await admin.load_schema(Taxonomy(edges))
        async with connect(cluster.addresses[0], source="sub") as subscriber, \
                connect(cluster.addresses[3], source="pub") as publisher:
            subs, trees = [], {}
            for k in range(12):
                tree = random_ft_tree(r)
                expression = ft_render(tree, r)
                trees[expression] = tree
                body = BODIES[k % len(BODIES)].format(e=sparql_string(expression), k=r.randrange(CLASSES + 1),
                                                      j=r.randrange(CLASSES), n=r.randint(0, 9))
                text = f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ {body} }} }}"
                subs.append((text, await subscriber.subscribe(text, kind="bindings")))
            events = [_event(r, i) for i in range(40)]
            with trio.fail_after(120):
                for event in events:
                    await publisher.publish(event)
            functions = {EXT + "ftcontains": ft_function(trees), **isa_functions(edges)}
            await trio.sleep(3)   # for late or wrong notifications: each check below waits no more
            delivered = 0
            for text, sub in subs:
                oracle_text = text.replace("(ftcontains(", "(ec:ftcontains(")
                expected = {}
                for event in events:
                    rows = {frozenset((n, t.n3()) for n, t in row)
                            for row in oracle_with(oracle_text, event, functions, edges)}
                    if rows:
                        expected[event.graph.value] = rows
                delivered += await check_delivered(sub, expected, text, seconds=30, extra=0)
            assert delivered >= 20   # the workload matches, not only rejects
