"""Large answers through the gateway, streamed (issue 45): a SELECT of thousands of rows in every
results format, each parsed whole; the Graph Store Protocol's read side (an event's graph, every
event) in the formats a client asks for; and a `#` inside an IRI is no comment when the gateway
reads a query's form."""

from __future__ import annotations

import io
import json

import pyoxigraph as ox
import pytest
import rdflib
import trio

from tests.web.support import serve

pytestmark = pytest.mark.processes

EX = "http://gs.example/"
EVENTS = 1_500   # 4,500 quads: more than a first page (256 rows) and a page (4,000) of every peer's cursor
NQUADS = "".join(f'<{EX}s{i}> <{EX}value> "{i}"^^<http://www.w3.org/2001/XMLSchema#integer> <{EX}g{i}> .\n'
                 f'<{EX}s{i}> <{EX}label> "item {i} # not a comment"@en <{EX}g{i}> .\n'
                 f'<{EX}s{i}> <{EX}next> <{EX}s{i + 1}#x> <{EX}g{i}> .\n' for i in range(EVENTS))
EVERYTHING = f"SELECT ?g ?s ?p ?o WHERE {{ GRAPH ?g {{ ?s ?p ?o }} FILTER(STRSTARTS(STR(?g), '{EX}')) }}"


@pytest.fixture
async def loaded(nursery, cluster):
    gateway = await serve(nursery, [cluster.entry], cluster.admin_token)
    async with gateway.client() as http:
        reply = await http.post("/events", content=NQUADS, headers={"content-type": "application/n-quads"})
        assert reply.status_code == 200, reply.text
    return gateway


async def test_a_large_select_streams_whole_in_every_results_format(loaded):
    expected = {(f"{EX}g{i}", f"{EX}s{i}", f"{EX}value", str(i)) for i in range(EVENTS)}
    async with loaded.client() as http:
        for accept, fmt in (("application/sparql-results+json", ox.QueryResultsFormat.JSON),
                            ("application/sparql-results+xml", ox.QueryResultsFormat.XML),
                            ("text/tab-separated-values", ox.QueryResultsFormat.TSV)):
            reply = await http.post("/sparql", data={"query": EVERYTHING}, headers={"accept": accept})
            assert reply.status_code == 200 and "content-length" not in reply.headers, reply.text[:300]
            rows = list(ox.parse_query_results(reply.content, fmt))
            assert len(rows) == 3 * EVENTS, accept
            assert {(r["g"].value, r["s"].value, r["p"].value, r["o"].value) for r in rows
                    if r["p"].value == f"{EX}value"} == expected, accept
        reply = await http.post("/sparql", data={"query": EVERYTHING}, headers={"accept": "text/csv"})
        assert reply.status_code == 200
        assert len(reply.content.decode().strip().splitlines()) == 1 + 3 * EVENTS
        # the rows of a JSON answer as rdflib reads them
        reply = await http.get("/sparql", params={"query": EVERYTHING + " LIMIT 700 OFFSET 10"})
        assert len(json.loads(reply.content)["results"]["bindings"]) == 700
        # a CONSTRUCT after a PREFIX whose IRI holds a '#', asked for as N-Triples only (was 406)
        construct = (f"PREFIX ex: <{EX}vocab#> CONSTRUCT {{ ?s <{EX}value> ?v }} WHERE {{ GRAPH <{EX}g7> "
                     f"{{ ?s <{EX}value> ?v }} }}")
        reply = await http.get("/sparql", params={"query": construct}, headers={"accept": "application/n-triples"})
        assert reply.status_code == 200, reply.text
        assert reply.text.strip() == f'<{EX}s7> <{EX}value> "7"^^<http://www.w3.org/2001/XMLSchema#integer> .'


async def test_the_graph_store_protocol_reads_an_event_and_every_event(loaded):
    async with loaded.client() as http:
        reply = await http.get("/events", params={"graph": f"{EX}g3"}, headers={"accept": "text/turtle"})
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/turtle"), reply.text
        graph = rdflib.Graph().parse(data=reply.text, format="turtle")
        assert {(str(s), str(p), str(o)) for s, p, o in graph} == {
            (f"{EX}s3", f"{EX}value", "3"), (f"{EX}s3", f"{EX}label", "item 3 # not a comment"),
            (f"{EX}s3", f"{EX}next", f"{EX}s4#x")}
        reply = await http.get("/events", params={"graph": f"{EX}g3"}, headers={"accept": "application/n-quads"})
        assert len(list(ox.parse(reply.content, ox.RdfFormat.N_QUADS))) == 3
        for params, accept, fmt in (({"default": ""}, "application/trig", ox.RdfFormat.TRIG),
                                    ({}, "*/*", ox.RdfFormat.N_QUADS)):
            reply = await http.get("/events", params=params, headers={"accept": accept})
            assert reply.status_code == 200, reply.text
            quads = [q for q in ox.parse(io.BytesIO(reply.content), fmt) if q.graph_name.value.startswith(EX)]
            assert len(quads) == 3 * EVENTS and len({q.graph_name for q in quads}) == EVENTS, accept
        dataset = rdflib.Dataset()
        dataset.parse(data=(await http.get("/events", headers={"accept": "application/trig"})).text, format="trig")
        assert len(dataset.graph(rdflib.URIRef(f"{EX}g9"))) == 3
        # refusals, each naming the problem
        missing = await http.get("/events", params={"graph": f"{EX}nothing"})
        assert missing.status_code == 404 and f"{EX}nothing" in missing.text
        bad = await http.get("/events", params={"graph": "not an iri"})
        assert bad.status_code == 400 and "IRI" in bad.text
        both = await http.get("/events", params={"graph": f"{EX}g1", "default": ""})
        assert both.status_code == 400
        unacceptable = await http.get("/events", params={"graph": f"{EX}g1"}, headers={"accept": "image/png"})
        assert unacceptable.status_code == 406
        put = await http.put("/events", params={"graph": f"{EX}g1"}, content=b"")
        assert put.status_code == 405 and "POST" in put.headers.get("allow", "")


async def test_sparql_update_publishes_and_drops_events_and_refuses_what_cannot_map(loaded):
    """rdflib's SPARQLUpdateStore, unmodified: addN publishes one event per graph; a graph's triples
    added in one transaction (autocommit off) are one event; DROP GRAPH deletes it; what does not
    map onto whole events is refused with 400 naming why, nothing of it done."""
    u = f"{EX}update/"

    def with_rdflib() -> None:
        from rdflib.plugins.stores.sparqlstore import SPARQLUpdateStore

        headers = {"Authorization": f"Bearer {loaded.token}"}
        store = SPARQLUpdateStore(loaded.url + "/sparql", loaded.url + "/update", headers=headers)
        s, p = rdflib.URIRef(f"{u}s"), rdflib.URIRef(f"{u}p")
        dataset = rdflib.Dataset(store=store)
        store.addN([(s, p, rdflib.Literal(1), dataset.graph(rdflib.URIRef(f"{u}g1"))),
                    (s, p, rdflib.Literal("two\nlines"), dataset.graph(rdflib.URIRef(f"{u}g1"))),
                    (s, p, rdflib.Literal(3), dataset.graph(rdflib.URIRef(f"{u}g2")))])
        batched = SPARQLUpdateStore(loaded.url + "/sparql", loaded.url + "/update", headers=headers, autocommit=False)
        graph = rdflib.Dataset(store=batched).graph(rdflib.URIRef(f"{u}g3"))
        graph.add((s, p, rdflib.Literal(4)))
        graph.add((s, p, rdflib.Literal("four", lang="en")))
        batched.commit()
        store.update(f"DROP GRAPH <{u}g2>")

    await trio.to_thread.run_sync(with_rdflib)
    async with loaded.client() as http:
        reply = await http.get("/events", params={"graph": f"{u}g1"}, headers={"accept": "application/n-quads"})
        assert reply.status_code == 200 and len(list(ox.parse(reply.content, ox.RdfFormat.N_QUADS))) == 2
        assert "two\\nlines" in reply.text
        assert (await http.get("/events", params={"graph": f"{u}g2"})).status_code == 404   # dropped
        assert len(list(ox.parse((await http.get("/events", params={"graph": f"{u}g3"})).content,
                                 ox.RdfFormat.N_QUADS))) == 2
        # the same event again is a retry; other content under its IRI a conflict
        same = f'INSERT DATA {{ GRAPH <{u}g1> {{ <{u}s> <{u}p> 1, """two\nlines""" }} }}'
        reply = await http.post("/update", content=same, headers={"content-type": "application/sparql-update"})
        assert reply.status_code == 200 and reply.json() == {"published": [f"{u}g1"], "deleted": []}, reply.text
        reply = await http.post("/update", data={"update": f"INSERT DATA {{ GRAPH <{u}g1> {{ <{u}s> <{u}p> 9 }} }}"})
        assert reply.status_code == 409 and f"{u}g1" in reply.text
        for text, named in ((f"INSERT DATA {{ <{u}s> <{u}p> 1 }}", "GRAPH <iri>"),
                            (f"DELETE DATA {{ GRAPH <{u}g1> {{ <{u}s> <{u}p> 1 }} }}", "DROP GRAPH"),
                            ("DELETE WHERE { ?s ?p ?o }", "whole"), ("DROP ALL", "many events"),
                            (f"LOAD <{u}doc>", "POST /events"), ("INSERT DATA { GRAPH <x", "invalid SPARQL Update")):
            reply = await http.post("/update", content=text, headers={"content-type": "application/sparql-update"})
            assert reply.status_code == 400 and named in reply.text, (text, reply.text)
        assert (await http.get("/update")).status_code == 405
        reply = await http.post("/update", content="x", headers={"content-type": "text/plain"})
        assert reply.status_code == 415 and "application/sparql-update" in reply.text
        reply = await http.get("/events", params={"graph": f"{u}g1"}, headers={"accept": "application/n-quads"})
        assert len(list(ox.parse(reply.content, ox.RdfFormat.N_QUADS))) == 2   # nothing refused was done
