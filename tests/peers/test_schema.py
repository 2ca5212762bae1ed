"""The overlay's class taxonomy: loaded through any peer, held by every peer (persisted, versioned,
caught up by peers that missed it), and used by matching under both algorithms, checked against
pyoxigraph evaluating the subscriptions over each event's quads plus the taxonomy's triples."""

from __future__ import annotations

import random

import pytest
import trio

from eventcloud.client import ClientError, connect
from eventcloud.errors import ErrorCode
from eventcloud.rdf.model import IRI, RDF, CompoundEvent, event_graph, make_quad
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.testing import open_overlay, trio_ms
from eventcloud.wire.ops import Op
from tests.helpers import ALGORITHMS, EX, EXT, check_delivered, isa_functions, oracle_with, random_taxonomy_edges
from tests.sparql.samples import TEMPLATES, random_isa_event

PREFIXES = (f"PREFIX ex: <{EX}> PREFIX ec: <{EXT}> PREFIX rdf: <{RDF}> "
            "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> ")
VEHICLES = [(f"{EX}Car", f"{EX}Vehicle"), (f"{EX}Bus", f"{EX}Vehicle"), (f"{EX}Minibus", f"{EX}Bus")]
IS_VEHICLE = f"{PREFIXES}SELECT ?x WHERE {{ GRAPH ?g {{ ?x a/rdfs:subClassOf* ex:Vehicle }} }}"


def _typed(i: int, cls: str) -> CompoundEvent:
    graph = event_graph("tax", 1000 + i, i)
    return CompoundEvent(graph, (make_quad(graph, IRI(f"{EX}thing{i}"), IRI(RDF + "type"), IRI(EX + cls)),))


def _isa_event(r: random.Random, n: int, classes: int) -> CompoundEvent:
    """`random_isa_event` with a graph IRI of an event (spread over the peers)."""
    event = random_isa_event(r, n, classes)
    graph = event_graph("isa", 2000 + n, n)
    return CompoundEvent(graph, tuple(make_quad(graph, q.s, q.p, q.o) for q in event.quads))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_a_loaded_taxonomy_reaches_every_peer_and_matching_follows_it(autojump_clock, algorithm):
    r = random.Random(5)
    classes = 7
    edges = random_taxonomy_edges(r, classes)
    async with open_overlay(5, algorithm, seed=7) as overlay:
        async with overlay.client(0, "subscriber") as subscriber, overlay.client(3, "publisher") as publisher:
            # subscriptions made before the taxonomy exists are re-bound when it arrives
            subs = []
            for k in range(10):
                body = TEMPLATES[k % len(TEMPLATES)].format(k=r.randrange(classes + 1), j=r.randrange(classes),
                                                            n=r.randint(0, 9))
                query = f"{PREFIXES}SELECT * WHERE {{ GRAPH ?g {{ {body} }} }}"
                subs.append((query, await subscriber.subscribe(query, kind="bindings")))
            info = await publisher.load_schema(Taxonomy(edges))
            assert len(info.peers) == 5 and not info.unreachable
            assert {(p.version, p.digest) for p in info.peers} == {(info.taxonomy.version, Taxonomy(edges).digest)}
            assert all(p.schema.taxonomy.edges == frozenset(edges) for p in overlay.peers)
            events = [_isa_event(r, n, classes) for n in range(24)]
            for event in events:
                await publisher.publish(event)
            functions = isa_functions(edges)
            delivered = 0
            for query, sub in subs:
                expected = {}
                for event in events:
                    rows = {frozenset((n, t.n3()) for n, t in row) for row in oracle_with(query, event, functions, edges)}
                    if rows:
                        expected[event.graph.value] = rows
                delivered += await check_delivered(sub, expected, query)
            assert delivered >= 10


async def test_a_new_version_replaces_the_old_one_for_the_next_events(autojump_clock):
    async with open_overlay(4, "osma", seed=3) as overlay:
        async with overlay.client(1) as client:
            sub = await client.subscribe(IS_VEHICLE, kind="signal")
            await client.publish(_typed(0, "Car"))              # no taxonomy: a Car is not a Vehicle
            first = await client.load_schema(Taxonomy(VEHICLES[:1]))
            await client.publish(_typed(1, "Car"))              # now it is
            await client.publish(_typed(2, "Minibus"))          # not yet
            second = await client.load_schema(Taxonomy(VEHICLES))
            assert second.taxonomy.version > first.taxonomy.version
            await client.publish(_typed(3, "Minibus"))
            got = []
            with trio.move_on_after(30):
                async for note in sub:
                    got.append(note.event)
            assert got == [_typed(1, "Car").graph.value, _typed(3, "Minibus").graph.value]
            shown = await client.schema()
            assert shown.taxonomy.edges == frozenset(VEHICLES) and shown.taxonomy.version == second.taxonomy.version
            assert {p.version for p in shown.peers} == {second.taxonomy.version} and len(shown.peers) == 4


async def test_joining_and_restarted_peers_hold_the_current_taxonomy(autojump_clock, tmp_path):
    async with open_overlay(2, "osma", seed=9, schema_sync_every=2.0, failure_timeout=120) as overlay:
        disk = await overlay.add_peer(data_dir=tmp_path / "p")
        async with overlay.client(0) as client:
            loaded = (await client.load_schema(Taxonomy(VEHICLES[:1]))).taxonomy
            assert (tmp_path / "p" / "schema.json").exists()
            joined = await overlay.add_peer()
            assert joined.schema.taxonomy == loaded               # from the peer it joined through
            disk.stop()
            await overlay.network.kill(disk.address)
            await trio.sleep(1)
            while_down = await client.load_schema(Taxonomy(VEHICLES))
            newer = while_down.taxonomy
            assert while_down.unreachable == (disk.id,) and len(while_down.peers) >= 2
            again = await overlay.add_peer(data_dir=tmp_path / "p")
            assert again.id == disk.id
            assert again.schema.taxonomy in (loaded, newer)       # its own saved copy first …
            await trio.sleep(10)
            assert again.schema.taxonomy == newer                  # … then a neighbour's newer one
            assert all(p.schema.taxonomy == newer for p in overlay.peers if p.id != disk.id)
            assert again.counters["schema_caught_up"] >= 1


async def test_bad_taxonomies_are_refused_and_change_nothing(autojump_clock, tmp_path):
    cyclic = tmp_path / "cycle.ttl"
    cyclic.write_text(f"<{EX}A> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <{EX}B> .\n"
                      f"<{EX}B> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <{EX}A> .\n")
    labels = tmp_path / "labels.ttl"
    labels.write_text(f'<{EX}A> <http://www.w3.org/2000/01/rdf-schema#label> "a" .\n')
    broken = tmp_path / "broken.ttl"
    broken.write_text(f"<{EX}A> <http://www.w3.org/2000/01/rdf-schema#subClassOf> .\n")
    async with open_overlay(2, "osma", seed=1) as overlay:
        async with overlay.client(0) as client:
            for path, words in ((cyclic, "cycle"), (labels, "no rdfs:subClassOf"), (broken, "broken.ttl"),
                                (tmp_path / "missing.ttl", "cannot read")):
                with pytest.raises(ClientError, match=words):
                    await client.load_schema(path)
            for body in ({"taxonomy": {"version": 0, "edges": [["not an iri", 3]]}},
                         {"taxonomy": {"edges": [[f"{EX}A", f"{EX}B"], [f"{EX}B", f"{EX}A"]]}},
                         {"taxonomy": [1, 2]}, {}):
                with pytest.raises(ClientError) as info:
                    await client.call(Op.SCHEMA_LOAD, body)
                assert info.value.code is ErrorCode.BAD_REQUEST and "taxonomy" in info.value.message
            assert all(p.schema.taxonomy.version == 0 for p in overlay.peers)


async def test_loading_needs_the_admin_token_where_there_is_one(autojump_clock):
    async with open_overlay(2, "osma", seed=1, admin_token="s3cret-token") as overlay:
        async with overlay.client(0) as client:
            with pytest.raises(ClientError) as info:
                await client.load_schema(Taxonomy(VEHICLES))
            assert info.value.code is ErrorCode.FORBIDDEN
            assert (await client.schema()).taxonomy.version == 0      # reading it needs no token
        async with connect(overlay.peers[1].address, transport=overlay.network, physical_ms=trio_ms,
                           admin_token="s3cret-token") as admin:
            loaded = await admin.load_schema(Taxonomy(VEHICLES))
            assert all(p.schema.taxonomy == loaded.taxonomy for p in overlay.peers)
