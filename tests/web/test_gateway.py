"""The gateway's request/response routes against a real overlay (3 peer processes): the SPARQL
1.1 Protocol checked with independent result parsers (pyoxigraph, rdflib) and unmodified
third-party clients (SPARQLWrapper, rdflib's SPARQLStore), publishing in every RDF syntax,
authentication, CORS, status, and every refusal with its status and a message naming the
problem."""

from __future__ import annotations

import csv
import io
import json

import httpx
import pyoxigraph as ox
import pytest
import rdflib
import trio
from rdflib.query import Result

from tests.web.support import serve

pytestmark = pytest.mark.processes

EX = "http://gw.example/"
XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"
#: Three events in N-Quads; values 10, 20, 30; one literal with a comma and a quote for CSV/TSV.
NQUADS = "".join(
    f'<{EX}s{i}> <{EX}value> "{v}"^^<{XSD_INT}> <{EX}g{i}> .\n'
    f'<{EX}s{i}> <{EX}label> "item {i}, \\"quoted\\"\\ttab"@en <{EX}g{i}> .\n'
    for i, v in ((1, 10), (2, 20), (3, 30)))
SELECT = f"SELECT ?s ?v ?l WHERE {{ GRAPH ?g {{ ?s <{EX}value> ?v ; <{EX}label> ?l }} }} ORDER BY ?v"
CONSTRUCT = f"CONSTRUCT {{ ?s <{EX}value> ?v }} WHERE {{ GRAPH ?g {{ ?s <{EX}value> ?v }} }}"
ASK = f"ASK {{ GRAPH ?g {{ ?s <{EX}value> 20 }} }}"
EXPECTED = {(f"{EX}s{i}", str(v), f'item {i}, "quoted"\ttab') for i, v in ((1, 10), (2, 20), (3, 30))}


async def published(gw) -> None:
    async with gw.client() as http:
        reply = await http.post("/events", content=NQUADS, headers={"content-type": "application/n-quads"})
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"events": 3, "quads": 6, "graphs": [f"{EX}g1", f"{EX}g2", f"{EX}g3"]}


def rows_of(result: Result) -> set[tuple[str, str, str]]:
    return {(str(r.s), str(r.v), str(r.l)) for r in result}


@pytest.mark.parametrize("accept, ox_format, rdflib_format", [
    ("application/sparql-results+json", ox.QueryResultsFormat.JSON, "json"),
    ("application/sparql-results+xml", ox.QueryResultsFormat.XML, "xml"),
    ("text/csv", ox.QueryResultsFormat.CSV, "csv"),
    ("text/tab-separated-values", ox.QueryResultsFormat.TSV, "tsv"),
])
async def test_select_in_every_results_format_parses_with_two_independent_parsers(gateway, accept, ox_format,
                                                                                   rdflib_format):
    await published(gateway)
    async with gateway.client() as http:
        for method in ("GET", "POST-form", "POST-query"):
            if method == "GET":
                reply = await http.get("/sparql", params={"query": SELECT}, headers={"accept": accept})
            elif method == "POST-form":
                reply = await http.post("/sparql", data={"query": SELECT}, headers={"accept": accept})
            else:
                reply = await http.post("/sparql", content=SELECT, headers={
                    "accept": accept, "content-type": "application/sparql-query"})
            assert reply.status_code == 200, (method, reply.text)
            assert reply.headers["content-type"].startswith(accept)
            if ox_format == ox.QueryResultsFormat.CSV:  # pyoxigraph does not read CSV (lossy): the csv module
                table = csv.DictReader(io.StringIO(reply.content.decode("utf-8"), newline=""))
                found = {(row["s"], row["v"], row["l"]) for row in table}
            else:
                solutions = ox.parse_query_results(reply.content, ox_format)
                found = {(row["s"].value, row["v"].value, row["l"].value) for row in solutions}
            assert found == EXPECTED, (method, accept)
            parsed = Result.parse(io.BytesIO(reply.content), format=rdflib_format)
            assert rows_of(parsed) == EXPECTED
            if rdflib_format in ("json", "xml", "tsv"):  # CSV carries no types
                assert {r.v.datatype for r in parsed} == {rdflib.XSD.integer}
                assert {r.l.language for r in parsed} == {"en"}


async def test_ask_and_construct_in_every_format(gateway):
    await published(gateway)
    async with gateway.client() as http:
        for accept, fmt in (("application/sparql-results+json", ox.QueryResultsFormat.JSON),
                            ("application/sparql-results+xml", ox.QueryResultsFormat.XML)):
            reply = await http.get("/sparql", params={"query": ASK}, headers={"accept": accept})
            assert reply.status_code == 200 and bool(ox.parse_query_results(reply.content, fmt)) is True
        expected = {(rdflib.URIRef(f"{EX}s{i}"), rdflib.URIRef(f"{EX}value"), rdflib.Literal(v))
                    for i, v in ((1, 10), (2, 20), (3, 30))}
        for accept, fmt in (("application/n-triples", "nt"), ("text/turtle", "turtle"),
                            ("application/n-quads", "nquads"), ("application/rdf+xml", "xml"), (None, "nt")):
            reply = await http.post("/sparql", data={"query": CONSTRUCT}, headers={"accept": accept} if accept else {})
            assert reply.status_code == 200, reply.text
            if accept:
                assert reply.headers["content-type"].startswith(accept)
            graph = rdflib.Dataset() if fmt == "nquads" else rdflib.Graph()
            graph.parse(data=reply.content, format=fmt)
            triples = {(s, p, o) for s, p, o, *_ in (graph.quads() if fmt == "nquads" else graph)}
            assert triples == expected, accept
            ox_triples = list(ox.parse(reply.content, {"nt": ox.RdfFormat.N_TRIPLES, "turtle": ox.RdfFormat.TURTLE,
                                                       "nquads": ox.RdfFormat.N_QUADS,
                                                       "xml": ox.RdfFormat.RDF_XML}[fmt]))
            assert len(ox_triples) == 3
        # a format parameter for links; 406 for what no result can be
        reply = await http.get("/sparql", params={"query": SELECT, "format": "tsv"})
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/tab-separated-values")
        reply = await http.get("/sparql", params={"query": SELECT}, headers={"accept": "image/png"})
        assert reply.status_code == 406 and "application/sparql-results+json" in reply.text
        reply = await http.get("/sparql", params={"query": CONSTRUCT}, headers={"accept": "text/csv"})
        assert reply.status_code == 406 and "text/turtle" in reply.text


async def test_unmodified_third_party_clients(gateway):
    """SPARQLWrapper and rdflib's SPARQLStore speak to /sparql as to any SPARQL endpoint."""
    from SPARQLWrapper import CSV, JSON, POST, XML, SPARQLWrapper

    await published(gateway)

    def with_sparqlwrapper() -> list:
        results = []
        for fmt, method in ((JSON, "GET"), (XML, "GET"), (JSON, POST), (CSV, "GET")):
            client = SPARQLWrapper(gateway.url + "/sparql")
            client.addCustomHttpHeader("Authorization", f"Bearer {gateway.token}")
            client.setQuery(SELECT)
            client.setReturnFormat(fmt)
            client.setMethod(method)
            results.append((fmt, client.query().convert()))
        return results

    for fmt, converted in await trio.to_thread.run_sync(with_sparqlwrapper):
        if fmt == "json":
            found = {(b["s"]["value"], b["v"]["value"], b["l"]["value"]) for b in converted["results"]["bindings"]}
        elif fmt == "xml":  # a DOM document
            found = {tuple(b.getElementsByTagName(t)[0].firstChild.data for t in ("uri", "literal", "literal")[:1])
                     for b in converted.getElementsByTagName("result")}
            assert found == {(f"{EX}s{i}",) for i in (1, 2, 3)}
            continue
        else:
            found = {tuple(row) for row in csv.reader(io.StringIO(converted.decode()))} - {("s", "v", "l")}
        assert found == EXPECTED, fmt

    def with_sparqlstore() -> tuple[set, bool, int]:
        from rdflib.plugins.stores.sparqlstore import SPARQLStore

        store = SPARQLStore(gateway.url + "/sparql", headers={"Authorization": f"Bearer {gateway.token}"})
        graph = rdflib.Graph(store=store)
        rows = rows_of(graph.query(SELECT))
        asked = bool(graph.query(ASK).askAnswer)
        constructed = len(graph.query(CONSTRUCT).graph)
        store.method = "POST"
        assert rows_of(graph.query(SELECT)) == rows
        return rows, asked, constructed

    rows, asked, constructed = await trio.to_thread.run_sync(with_sparqlstore)
    assert rows == EXPECTED and asked is True and constructed == 3


async def test_publishing_every_syntax(gateway):
    trig = f"@prefix ex: <{EX}> . ex:trig1 {{ ex:a ex:p 1 . _:b ex:q ex:a }} ex:trig2 {{ ex:a ex:p 2 }}"
    turtle = f"@prefix ex: <{EX}> . ex:t ex:p [ ex:q \"blank\" ] ."
    rdfxml = (f'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="{EX}">'
              f'<rdf:Description rdf:about="{EX}x"><ex:p>xml</ex:p></rdf:Description></rdf:RDF>')
    async with gateway.client() as http:
        reply = await http.post("/events", content=trig, headers={"content-type": "application/trig"})
        assert reply.json() == {"events": 2, "quads": 3, "graphs": [f"{EX}trig1", f"{EX}trig2"]}
        reply = await http.post("/events", params={"graph": f"{EX}turtle-event"}, content=turtle,
                                headers={"content-type": "text/turtle; charset=utf-8"})
        assert reply.json() == {"events": 1, "quads": 2, "graphs": [f"{EX}turtle-event"]}
        again = await http.post("/events", params={"graph": f"{EX}turtle-event"}, content=turtle,
                                headers={"content-type": "text/turtle"})
        assert again.json() == reply.json()  # a retry: same graph, same skolem IRIs, nothing doubled
        other = await http.post("/events", params={"graph": f"{EX}turtle-event"}, content=f"<{EX}a> <{EX}p> 3 .",
                                headers={"content-type": "text/turtle"})
        assert other.status_code == 409 and "already holds an event with other content" in other.text
        huge = await http.post("/events", content=f'<{EX}a> <{EX}p> "{"a" * (17 << 20)}" <{EX}huge> .\n',
                               headers={"content-type": "application/n-quads"})
        assert huge.status_code == 413 and "a statement over 16 MiB" in huge.text
        reply = await http.post("/events", content=rdfxml, headers={"content-type": "application/rdf+xml"})
        body = reply.json()
        assert reply.status_code == 200 and body["events"] == 1 and body["quads"] == 1
        assert body["graphs"][0].startswith("http://eventcloud.io/events/")
        count = await http.get("/sparql", params={
            "query": f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{EX}turtle-event> {{ ?s ?p ?o }} }}"})
        assert count.json()["results"]["bindings"][0]["n"]["value"] == "2"
        # one event deleted (the gateway holds the admin token)
        reply = await http.request("DELETE", "/events", params={"graph": f"{EX}trig2"})
        assert reply.status_code == 200 and reply.json() == {"graph": f"{EX}trig2", "removed": 1}


async def test_refusals_name_the_problem(gateway):
    async with gateway.client() as http:
        reply = await http.get("/sparql", params={"query": "SELEC * WHERE { ?s ?p ?o }"})
        assert reply.status_code == 400 and "SELEC" in reply.text and "Traceback" not in reply.text
        assert reply.headers["content-type"].startswith("text/plain") and reply.headers["eventcloud-error"] == "bad-query"
        reply = await http.get("/sparql", params={"query": "SELECT * WHERE { ?s ?p ?o FILTER(contians(?o, 'x')) }"})
        assert reply.status_code == 400 and "contians" in reply.text
        reply = await http.get("/sparql")
        assert reply.status_code == 400 and "query" in reply.text
        reply = await http.get("/sparql", params={"query": SELECT, "default-graph-uri": EX})
        assert reply.status_code == 400 and "default-graph-uri" in reply.text
        reply = await http.post("/sparql", content="x", headers={"content-type": "text/plain"})
        assert reply.status_code == 415 and "application/sparql-query" in reply.text
        reply = await http.post("/sparql", data={"update": "INSERT DATA {}"})
        assert reply.status_code == 400 and "POST /update" in reply.text
        reply = await http.post("/events", content=f"<{EX}a> <{EX}p> \"unterminated .\n",
                                headers={"content-type": "application/n-quads"})
        assert reply.status_code == 400 and "body:1:" in reply.text and "nothing was published" in reply.text
        reply = await http.post("/events", content="<a> <b> <c> .", headers={"content-type": "image/png"})
        assert reply.status_code == 415 and "text/turtle" in reply.text
        reply = await http.post("/events", content="", headers={"content-type": "application/n-quads"})
        assert reply.status_code == 400 and "empty" in reply.text
        reply = await http.post("/events", params={"graph": "no scheme"}, content=f"<{EX}a> <{EX}p> 1 .",
                                headers={"content-type": "text/turtle"})
        assert reply.status_code == 400 and "scheme" in reply.text
        reply = await http.get("/no/such/route")
        assert reply.status_code == 404 and "/no/such/route" in reply.text
        reply = await http.put("/sparql", content="x")
        assert reply.status_code == 405 and "GET" in reply.headers["allow"]
        reply = await http.post("/subscriptions", json={"sparql": "SELECT ?s WHERE { ?s ?p ?o }"})
        assert reply.status_code == 400 and "GRAPH" in reply.text
        reply = await http.post("/subscriptions", json={"sparql": f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s ?p ?o }} "
                                                                  f"OPTIONAL {{ ?s ?p ?x }} }}"})
        assert reply.status_code == 400 and "OPTIONAL" in reply.text
        reply = await http.get("/subscriptions/abc/stream", params={"ticket": "wrong"})
        assert reply.status_code == 404, reply.text
    async with httpx.AsyncClient(base_url=gateway.small_url, headers=gateway.auth) as http:
        reply = await http.post("/events", content=NQUADS, headers={"content-type": "application/n-quads"})
        assert reply.status_code == 413 and "--max-body" in reply.text


@pytest.fixture
async def gateway(nursery, cluster):
    """The conftest's gateway, and a twin that accepts bodies of 100 bytes at most."""
    served = await serve(nursery, [cluster.entry], cluster.admin_token, cors=("http://app.example",))
    small = await serve(nursery, [cluster.entry], cluster.admin_token, max_body=100)
    served.small_url = small.url
    return served


async def test_bearer_token_on_every_route_but_the_page(gateway):
    async with httpx.AsyncClient(base_url=gateway.url) as anonymous:
        for method, path in (("GET", "/sparql?query=ASK{}"), ("POST", "/sparql"), ("POST", "/events"),
                             ("DELETE", "/events?graph=http://x/g"), ("POST", "/subscriptions"),
                             ("GET", "/subscriptions"), ("GET", "/subscriptions/stream?query=x"),
                             ("DELETE", "/subscriptions/abc"), ("GET", "/no/such/route")):
            reply = await anonymous.request(method, path)
            expected = 404 if path == "/no/such/route" else 401
            assert reply.status_code == expected, (method, path, reply.text)
            if expected == 401:
                assert reply.headers["www-authenticate"].startswith("Bearer") and "Bearer" in reply.text
        reply = await anonymous.get("/sparql", params={"query": ASK}, headers={"authorization": "Bearer not-the-token"})
        assert reply.status_code == 403 and "wrong token" in reply.text
        reply = await anonymous.get("/sparql", params={"query": ASK}, headers={"authorization": "Basic abc"})
        assert reply.status_code == 401 and "Bearer" in reply.text
        reply = await anonymous.get("/sparql", params={"query": ASK, "access_token": gateway.token})
        assert reply.status_code == 200
        for path in ("/", "/dashboard", "/static/dashboard.js", "/health", "/status"):
            assert (await anonymous.get(path)).status_code == 200, path


async def test_cors_for_the_configured_origin_only(gateway):
    async with gateway.client() as http:
        reply = await http.options("/sparql", headers={"origin": "http://app.example",
                                                       "access-control-request-method": "POST"})
        assert reply.status_code == 204
        assert reply.headers["access-control-allow-origin"] == "http://app.example"
        assert "Authorization" in reply.headers["access-control-allow-headers"]
        reply = await http.get("/status", headers={"origin": "http://app.example"})
        assert reply.headers["access-control-allow-origin"] == "http://app.example"
        reply = await http.get("/status", headers={"origin": "http://evil.example"})
        assert "access-control-allow-origin" not in reply.headers


async def test_status_json(gateway):
    await published(gateway)
    async with gateway.client() as http:
        reply = await http.get("/status")
    status = reply.json()
    assert reply.status_code == 200 and status["partition"] is True and len(status["peers"]) == 3
    assert status["totals"]["quads"] >= 6
    volume = 0.0
    for peer in status["peers"]:
        zone = peer["zone"]
        assert len(zone["fractions"]) == 4 and len(zone["text"]) == 4
        part = 1.0
        for lo, hi in zone["fractions"]:
            assert 0 <= lo < hi <= 1
            part *= hi - lo
        volume += part
        assert all(isinstance(lo, str) and (hi is None or isinstance(hi, str)) for lo, hi in zone["text"])
    assert volume == pytest.approx(1.0)
    assert status["gateway"]["entry"] is not None


async def test_a_peer_down_is_502_and_health_503(nursery, cluster):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"
    served = await serve(nursery, [dead], None)
    async with served.client() as http:
        reply = await http.get("/sparql", params={"query": ASK})
        assert reply.status_code == 502 and dead in reply.text and "Traceback" not in reply.text
        reply = await http.post("/events", content=NQUADS, headers={"content-type": "application/n-quads"})
        assert reply.status_code == 502
        reply = await http.get("/subscriptions/stream", params={"query": SELECT})
        assert reply.status_code == 502
        health = await http.get("/health")
        assert health.status_code == 503 and health.json()["ok"] is False



async def test_the_gateway_outlives_its_overlay(nursery, tmp_path):
    """Its one peer stopped: 502 naming it, the health check 503; restarted: served again,
    without restarting the gateway."""
    from peers.supervisor import LocalCluster

    single = LocalCluster(1, data_dir=tmp_path / "one", secure=False)
    await trio.to_thread.run_sync(single.start)
    try:
        served = await serve(nursery, [single.entry], None)
        async with served.client() as http:
            assert (await http.get("/sparql", params={"query": ASK})).status_code == 200
            await trio.to_thread.run_sync(single.stop_peer, 0)
            with trio.fail_after(30):
                while (reply := await http.get("/sparql", params={"query": ASK})).status_code == 200:
                    await trio.sleep(0.2)
            assert reply.status_code in (502, 503) and single.entry in reply.text, reply.text
            assert (await http.get("/health")).status_code == 503
            await trio.to_thread.run_sync(single.start_peer, 0)
            with trio.fail_after(60):
                while (reply := await http.get("/sparql", params={"query": ASK})).status_code != 200:
                    await trio.sleep(0.3)
            assert (await http.get("/health")).json()["ok"] is True
    finally:
        await trio.to_thread.run_sync(single.stop)


HOSTILE_TEXT = ["", " ", "x", "?", "\x00", "é", "\U0001f600", "%", "%zz", "../../etc/passwd", "a" * 5000, "-1",
                "0", "1e999", "null", "[]", "{}", "<script>", "SELECT", "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }",
                f"{EX}g1", "http://", "urn:x", "Bearer x", "text/turtle", "*/*", "application/json; charset=bogus"]
HOSTILE_JSON = [None, 5, "s", [], {}, {"sparql": 5}, {"sparql": None}, {"sparql": "SELECT"}, {"sparql": SELECT},
                {"sparql": f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}", "kind": "loud"},
                {"sparql": f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}", "lease": -5},
                {"sparql": f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}", "lease": "forever", "durable": "yes"},
                {"sparql": "x" * 100_000}, {"sparql": ["SELECT"]}, {"\x00": "\ud800"}]
#: What an HTTP client lets through in a header value.
HEADER_TEXT = [t for t in HOSTILE_TEXT if t and t.isascii() and t.isprintable() and t == t.strip() and len(t) < 100]
ROUTES = [("GET", "/sparql"), ("POST", "/sparql"), ("POST", "/events"), ("DELETE", "/events"),
          ("GET", "/subscriptions"), ("POST", "/subscriptions"), ("GET", "/subscriptions/stream"),
          ("GET", "/subscriptions/{id}/stream"), ("POST", "/subscriptions/{id}/renew"),
          ("DELETE", "/subscriptions/{id}"), ("GET", "/status"), ("GET", "/health")]
PATHS = ["/", "/health", "/status", "/sparql", "/events", "/subscriptions", "/subscriptions/stream",
         "/subscriptions/{id}/stream", "/subscriptions/{id}/renew", "/subscriptions/{id}", "/static/{id}",
         "/dashboard/{id}", "/ws", "/{id}", "//", "/sparql/", "/%2e%2e/", "/subscriptions/%00/renew"]


async def test_hostile_requests_get_a_status_and_a_reason_never_a_crash(gateway):
    """400 random requests (seeded), three in four to a real route: any method, route or near-route, parameters, content types,
    accept headers and bodies (garbage bytes, invalid UTF-8, JSON of the wrong shape, huge
    strings). Every answer is a status below 500 with a reason in its body for a refusal, and
    never a traceback; the gateway still serves a valid query afterwards."""
    import random

    rng = random.Random(20261124)
    pick = rng.choice
    async with gateway.client() as http:
        for _ in range(400):
            method, path = pick(ROUTES) if rng.random() < 0.75 else (
                pick(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]), pick(PATHS))
            path = path.replace("{id}", pick(["abc", "0" * 32, "%00", "é", "x" * 300, "..", "a.b"]))
            params = {pick(["query", "graph", "ticket", "default-graph-uri", "named-graph-uri", "lease", "kind",
                            "format", "update", pick(HOSTILE_TEXT)]): pick(HOSTILE_TEXT)
                      for _ in range(rng.randint(0, 3))}
            headers = {"content-type": pick(HEADER_TEXT + ["application/json", "application/n-quads",
                                                            "application/sparql-query", "text/turtle",
                                                            "application/x-www-form-urlencoded"]),
                       "accept": pick(HEADER_TEXT + ["text/event-stream", "application/sparql-results+json"])}
            body = pick([b"", rng.randbytes(rng.randint(1, 300)), b"\xff\xfe\xfd", b'{"sparql": "\xc3"}',
                         json.dumps(pick(HOSTILE_JSON)).encode(), pick(HOSTILE_TEXT).encode("utf-8", "surrogatepass"),
                         f"<{EX}a> <{EX}p> \"v\" <{EX}fuzz> .\n".encode()])
            request = http.build_request(method, path, params=params, headers=headers, content=body)
            with trio.fail_after(30):
                reply = await http.send(request, stream=True)
                try:
                    text = b""
                    with trio.move_on_after(1):  # a stream that opened: its first bytes are enough
                        async for chunk in reply.aiter_bytes():
                            text += chunk
                            if len(text) > 2000:
                                break
                finally:
                    await reply.aclose()
            what = f"{method} {path} {params} {headers} {body[:80]!r} -> {reply.status_code} {text[:300]!r}"
            assert reply.status_code < 500, what
            assert b"Traceback" not in text, what
            if reply.status_code >= 400 and method != "HEAD":
                assert text.strip(), what
        reply = await http.get("/sparql", params={"query": ASK})
        assert reply.status_code == 200


async def test_a_gateway_without_the_admin_token_says_so_in_its_403(nursery, cluster):
    """Issue 46.3: DELETE /events through a gateway started without --admin-token-file was refused
    with the peer's words alone ("this connection did not present it"); the HTTP client is told
    that the gateway holds no token and how it is started with one."""
    tokenless = await serve(nursery, [cluster.entry], None)
    async with tokenless.client() as http:
        reply = await http.delete("/events", params={"graph": "http://x.example/g"})
    assert reply.status_code == 403, reply.text
    assert "admin token" in reply.text and "eventcloud gateway --admin-token-file FILE" in reply.text
    assert reply.headers["eventcloud-error"] == "forbidden"
