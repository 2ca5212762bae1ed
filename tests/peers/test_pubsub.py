"""Publish/subscribe against an oracle: pyoxigraph evaluates each subscription on each event.

Whole overlays run in one process over memory streams under a mock clock, for both
algorithms. Delivered (subscription, event) pairs must equal the oracle's for every event
published after `subscribe` returned; bindings must equal the oracle's solutions; event
notifications carry exactly the event's quads; no pair twice; nothing after unsubscribe.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
import trio

from eventcloud.client import ClientError, Notification, connect
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, event_graph, make_quad
from eventcloud.testing import open_overlay, trio_ms
from tests.helpers import (
    ALGORITHMS, EXO as EX, PS_PREDICATES as PREDICATES, PS_SUBJECTS as SUBJECTS, check_delivered, collect,
    notification_solutions, oracle_solutions, random_pubsub_event as random_event, random_subscription,
)

@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("seed", [1, 2])
async def test_random_workload_matches_the_oracle(autojump_clock, algorithm, seed):
    rng = random.Random(seed)
    async with open_overlay(5, algorithm, seed=seed) as overlay:
        async with overlay.client(0, "subscriber") as subscriber, overlay.client(3, "publisher") as publisher:
            early = [random_event(rng, i, "early") for i in range(5)]
            for event in early:  # published before any subscription: never delivered
                await publisher.publish(event)
            subs = []
            for _ in range(8):
                text = random_subscription(rng)
                subs.append((text, await subscriber.subscribe(text, kind="bindings")))
            events = [random_event(rng, i) for i in range(25)]
            for event in events:
                await publisher.publish(event)
            for text, sub in subs:
                expected = {e.graph.value: oracle_solutions(text, e) for e in events}
                expected = {g: s for g, s in expected.items() if s}
                await check_delivered(sub, expected, text)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_kinds_signal_bindings_event(autojump_clock, algorithm):
    query = f"SELECT ?x ?v WHERE {{ GRAPH ?g {{ ?x <{EX}p0> ?y . ?y <{EX}p1> ?v }} FILTER(?v > 5) }}"
    async with open_overlay(6, algorithm) as overlay:
        async with overlay.client(1, "sub") as client:
            subs = {kind: await client.subscribe(query, kind=kind) for kind in ("signal", "bindings", "event")}
            graph = event_graph("k", 1, 1)
            match = CompoundEvent(graph, (
                make_quad(graph, SUBJECTS[0], PREDICATES[0], SUBJECTS[1]),
                make_quad(graph, SUBJECTS[1], PREDICATES[1], Literal("9", XSD + "integer")),
                make_quad(graph, SUBJECTS[2], PREDICATES[2], Literal("x")),
            ))
            other = event_graph("k", 2, 2)
            miss = CompoundEvent(other, (
                make_quad(other, SUBJECTS[0], PREDICATES[0], SUBJECTS[1]),
                make_quad(other, SUBJECTS[1], PREDICATES[1], Literal("3", XSD + "integer")),
            ))
            await client.publish(miss)
            await client.publish(match)
            for kind, sub in subs.items():
                got: list[Notification] = []
                await collect(sub, 1, got, seconds=30)
                assert [n.event for n in got] == [graph.value], kind
                note = got[0]
                assert note.kind == kind
                if kind == "bindings":
                    assert notification_solutions(note) == {
                        frozenset({("x", SUBJECTS[0].n3()), ("v", '"9"^^<http://www.w3.org/2001/XMLSchema#integer>')})}
                if kind == "event":
                    assert set(note.quads) == set(match.quads)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_happen_before_and_unsubscribe(autojump_clock, algorithm):
    query = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p2> ?o }} }}"
    async with open_overlay(4, algorithm) as overlay:
        async with overlay.client(2, "both") as client:
            sub = await client.subscribe(query, kind="signal")
            first = random_event(random.Random(0), 0, "hb")
            first = CompoundEvent(first.graph, first.quads + (make_quad(first.graph, SUBJECTS[0], PREDICATES[2], SUBJECTS[1]),))
            await client.publish(first)  # same client, right after subscribe: must be notified
            got: list[Notification] = []
            await collect(sub, 1, got, seconds=30)
            assert [n.event for n in got] == [first.graph.value]
            await client.publish(first)  # a retry of the same graph: no second notification
            await sub.unsubscribe()
            later = CompoundEvent(event_graph("hb", 9, 9), (make_quad(event_graph("hb", 9, 9), SUBJECTS[0], PREDICATES[2], SUBJECTS[1]),))
            await client.publish(later)
            await trio.sleep(10)
            leftovers = []
            while True:
                try:
                    leftovers.append(sub._receive.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
            assert leftovers == []
            status = await client.status()
            assert sum(p.subscriptions for p in status.peers) == 0


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_accept_all_gives_one_notification_per_event(autojump_clock, algorithm):
    async with open_overlay(6, algorithm) as overlay:
        async with overlay.client(0, "all") as client:
            sub = await client.subscribe("SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }", kind="signal")
            rng = random.Random(5)
            events = [random_event(rng, i, "all") for i in range(10)]
            for event in events:
                await client.publish(event)
            got: list[Notification] = []
            await collect(sub, len(events), got, seconds=30)
            assert sorted(n.event for n in got) == sorted(e.graph.value for e in events)


@pytest.mark.parametrize("text, construct", [
    ("SELECT * WHERE { GRAPH ?g { ?s ?p ?o OPTIONAL { ?o ?q ?r } } }", "OPTIONAL"),
    ("SELECT * WHERE { { GRAPH ?g { ?s ?p ?o } } UNION { GRAPH ?g { ?s ?p ?o } } }", "UNION"),
    ("SELECT * WHERE { ?s ?p ?o }", "GRAPH"),
    ("ASK { GRAPH ?g { ?s ?p ?o } }", "ASK"),
    ("SELECT * WHERE { GRAPH ?g { ?s <http://x/a>/<http://x/b> ?o } }", "path"),
    ("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } } LIMIT 3", "LIMIT"),
    ("SELECT * WHERE { GRAPH ?g { ?s ?p ", None),
])
async def test_unsupported_subscriptions_are_refused_and_nothing_is_stored(autojump_clock, text, construct):
    async with open_overlay(3) as overlay:
        async with overlay.client() as client:
            with pytest.raises(ClientError) as info:
                await client.subscribe(text)
            if construct is not None:
                assert construct.lower() in str(info.value).lower()
            status = await client.status()
            assert sum(p.subscriptions for p in status.peers) == 0


async def test_subscriptions_survive_a_peer_restart(autojump_clock, tmp_path):
    query = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p1> ?o }} }}"
    async with open_overlay(1, "osma") as overlay:
        first = overlay.peers[0]
        # a second peer with an on-disk store
        second = await overlay.add_peer(data_dir=tmp_path / "p1")
        async with overlay.client(0, "sub") as client:
            sub = await client.subscribe(query, kind="signal")
            held = second.counters["subscriptions"]
            assert held == len(second.subscriptions) > 0
            # stored from the parsed form the entry sent: no peer of the box parsed the text
            assert second.counters["subscriptions_built"] >= held and second.counters["subscriptions_parsed"] == 0
            second.stop()
            await overlay.network.kill(second.address)
            await trio.sleep(1)
            again = await overlay.add_peer(data_dir=tmp_path / "p1")  # same data directory: restored
            assert again.id == second.id
            assert len(again.subscriptions) == held
            assert again.counters["subscriptions_parsed"] == 0  # restored from the persisted parsed form
            await trio.sleep(1)
            graph = event_graph("r", 1, 1)
            events = [CompoundEvent(graph, (make_quad(graph, SUBJECTS[i], PREDICATES[1], SUBJECTS[0]),))
                      for i in range(1)]
            for event in events:
                await client.publish(event)
            got: list[Notification] = []
            await collect(sub, 1, got, seconds=30)
            assert [n.event for n in got] == [graph.value]
            assert first.id != again.id


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_non_canonical_literals_match_like_the_store(autojump_clock, algorithm):
    query = f'SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p0> 1 }} }}'
    async with open_overlay(3, algorithm) as overlay:
        async with overlay.client(0, "c") as client:
            sub = await client.subscribe(query, kind="event")
            graph = event_graph("canon", 1, 1)
            event = CompoundEvent(graph, (make_quad(graph, SUBJECTS[0], PREDICATES[0], Literal("01", XSD + "integer")),))
            assert oracle_solutions(query, event)  # pyoxigraph reads "01"^^xsd:integer as 1
            await client.publish(event)
            got: list[Notification] = []
            await collect(sub, 1, got, seconds=30)
            assert [n.event for n in got] == [graph.value]
            assert [q.o.lexical for q in got[0].quads] == ["1"]  # stored and delivered canonically


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_many_subscriptions_match_the_oracle(autojump_clock, algorithm):
    """Hundreds of stored subscriptions (the per-peer index at work), the same oracle."""
    rng = random.Random(11)
    texts = sorted({random_subscription(rng) for _ in range(600)})
    async with open_overlay(4, algorithm, seed=11) as overlay:
        async with overlay.client(0, "many") as subscriber, overlay.client(2, "pub") as publisher:
            subs = [(text, await subscriber.subscribe(text, kind="signal")) for text in texts]
            events = [random_event(rng, i, "many") for i in range(12)]
            for event in events:
                await publisher.publish(event)
            await trio.sleep(20)
            for text, sub in subs:
                expected = {e.graph.value for e in events if oracle_solutions(text, e)}
                got = []
                while True:
                    try:
                        got.append(sub._receive.receive_nowait().event)
                    except trio.WouldBlock:
                        break
                assert len(got) == len(set(got)), text
                assert set(got) == expected, text


async def test_a_subscriber_that_stops_reading_does_not_stall_the_peers():
    """Real loopback TCP: a subscriber that never reads fills its socket, then the bounded
    buffer; further notifications for it are dropped and counted, publishing goes on."""
    import socket

    from eventcloud.net.transport import TcpTransport
    from eventcloud.wire.frames import FrameDecoder, Kind, Message, encode
    from eventcloud.wire.ops import Op
    from peers.config import PeerConfig
    from peers.runtime import run_peer

    async with trio.open_nursery() as nursery:
        first = await nursery.start(run_peer, PeerConfig(listen="127.0.0.1:0", subscriber_buffer=20), TcpTransport())
        await nursery.start(run_peer, PeerConfig(listen="127.0.0.1:0", join=first.address, subscriber_buffer=20),
                            TcpTransport())
        host, port = first.address.rsplit(":", 1)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        query = "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }"
        sock.sendall(encode(Message(Kind.REQUEST, Op.SUBSCRIBE, 1, 0, {"sparql": query, "kind": "event"})))
        decoder = FrameDecoder()
        with trio.fail_after(30):
            while (reply := decoder.next_message()) is None:
                decoder.feed(await trio.to_thread.run_sync(sock.recv, 65536))
        assert reply.kind is Kind.REPLY
        # from now on the subscriber reads nothing
        from eventcloud.client import connect

        async with connect(first.address) as client:
            big = [CompoundEvent(g, tuple(make_quad(g, SUBJECTS[0], PREDICATES[0], Literal("x" * 2000 + str(i)))
                                          for i in range(5)))
                   for g in (event_graph("flood", n, n) for n in range(300))]
            with trio.fail_after(120):
                for event in big:
                    await client.publish(event)
            with trio.fail_after(30):
                while True:  # the pump stays blocked on the full socket; the buffer overflows
                    status = await client.status()
                    dropped = sum(p.counters.get("notifications_dropped", 0) for p in status.peers)
                    if dropped:
                        break
                    await trio.sleep(0.2)
            assert dropped > 0
            assert await client.count() == 1500  # every publication was stored all the same
        sock.close()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_subscribe_reaches_its_box_only_and_keeps_happen_before_with_skewed_clocks(autojump_clock, algorithm):
    """Subscribe stores the subscription on the peers of its indexing box only (no whole-space
    clock round), yet an event acknowledged before `subscribe` was called is never notified and
    one published after it returned always is, even through a peer whose clock runs 40 s ahead
    (the overlay allows 50 s here; the default 30 s would refuse that peer: tests/peers/test_clocks.py)."""
    query = (f"SELECT ?s ?o WHERE {{ GRAPH ?g {{ ?s <{EX}p2> ?o . ?o <{EX}p0> ?x . ?x <{EX}p1> ?y }} }}")
    async with open_overlay(12, algorithm, seed=5, max_clock_offset=50) as overlay:
        fast = await overlay.add_peer(skew_ms=40_000)
        slow = await overlay.add_peer(skew_ms=-20_000)
        lagging = await overlay.add_peer(skew_ms=-30_000)   # hears of nobody's clock before publishing

        def chain(tag: str, i: int) -> CompoundEvent:
            g = event_graph(tag, 100 + i, i)
            a, b, c = (IRI(f"{EX}{tag}{i}{n}") for n in ("a", "b", "c"))
            return CompoundEvent(g, (make_quad(g, a, PREDICATES[2], b), make_quad(g, b, PREDICATES[0], c),
                                     make_quad(g, c, PREDICATES[1], a)))

        async with connect(fast.address, transport=overlay.network, source="fast",
                           physical_ms=lambda: trio_ms() + 40_000) as early, \
                connect(slow.address, transport=overlay.network, source="slow",
                        physical_ms=lambda: trio_ms() - 20_000) as subscriber, \
                connect(lagging.address, transport=overlay.network, source="lag",
                        physical_ms=lambda: trio_ms() - 30_000) as late:
            before = [chain("before", i) for i in range(6)]
            for event in before:
                await early.publish(event)          # acknowledged before subscribe is called
            counts = [Counter(p.counters) for p in overlay.peers]
            sub = await subscriber.subscribe(query, kind="signal")
            box = overlay.peers[0].state.space.pattern_box((None, None, PREDICATES[2], None))
            in_box = {p.id for p in overlay.peers if p.state.zone.intersects(box)}
            stored = {p.id for p, c in zip(overlay.peers, counts) if p.counters["run:store_sub"] > c["run:store_sub"]}
            assert stored == in_box and len(in_box) < len(overlay.peers)
            assert all(p.counters["run:clock"] == c["run:clock"] for p, c in zip(overlay.peers, counts))
            frames = sum(sum(v for k, v in p.counters.items() if k.startswith("out:")) -
                         sum(v for k, v in c.items() if k.startswith("out:")) for p, c in zip(overlay.peers, counts))
            assert frames <= 2 * len(in_box) + 8, (frames, len(in_box))
            after = [chain("after", i) for i in range(6)]
            for i, event in enumerate(after):
                await (early, subscriber, late)[i % 3].publish(event)
            got: list[Notification] = []
            await collect(sub, len(after), got, seconds=30)
            assert sorted(n.event for n in got) == sorted(e.graph.value for e in after)


async def test_an_event_completing_several_csma_subscriptions_is_gathered_once(autojump_clock):
    """Under CSMA the entry peer gathers an event's quads to complete a notification's bindings:
    once per event, however many of its subscriptions the event matched."""
    async with open_overlay(4, "csma", seed=3) as overlay:
        async with overlay.client(0, "subscriber") as subscriber, overlay.client(2, "publisher") as publisher:
            texts = [f"SELECT ?s ?a ?b WHERE {{ GRAPH ?g {{ ?s <{EX}{p}> ?a . ?s <{EX}{q}> ?b }} }}"
                     for p, q in (("p1", "p2"), ("p2", "p3"), ("p1", "p3"))]
            subs = [await subscriber.subscribe(text, kind="bindings") for text in texts]
            entry = overlay.peers[0]
            graph = IRI(f"{EX}events/gathered")
            event = CompoundEvent(graph, tuple(make_quad(graph, IRI(f"{EX}s"), IRI(f"{EX}{p}"), Literal(str(i)))
                                               for i, p in enumerate(("p1", "p2", "p3"))))
            await publisher.publish(event)
            for sub, text in zip(subs, texts):
                with trio.fail_after(10):
                    note = await sub.__anext__()
                assert note.event == graph.value
                assert notification_solutions(note) == oracle_solutions(text, event)
            assert entry.counters["reconstructions_shared"] == 2


async def test_csma_entries_get_the_event_from_where_it_was_published_else_from_its_owners(autojump_clock):
    """A CSMA notification's entry needs the whole event: it asks the peer the event was
    published at (carried along the chain), which keeps recent publications, instead of a
    multicast over the event's graph. A peer that no longer keeps it answers nothing and the
    entry gathers from the owners: the same solutions either way."""
    text = f"SELECT ?s ?a ?b WHERE {{ GRAPH ?g {{ ?s <{EX}p1> ?a . ?s <{EX}p2> ?b }} }}"
    async with open_overlay(4, "csma", seed=3) as overlay:
        async with overlay.client(0, "subscriber") as subscriber, overlay.client(2, "publisher") as publisher:
            sub = await subscriber.subscribe(text, kind="bindings")
            entry, origin = overlay.peers[0], overlay.peers[2]

            def gathers() -> int:
                return sum(p.counters["run:find_local"] for p in overlay.peers)

            for n, forgotten in enumerate((False, True)):
                if forgotten:
                    origin.storage.published.kept = 0  # keeps nothing from now on (as after a restart)
                graph = IRI(f"{EX}events/origin-{n}")
                event = CompoundEvent(graph, tuple(make_quad(graph, IRI(f"{EX}s"), IRI(f"{EX}{p}"), Literal(str(i)))
                                                   for i, p in enumerate(("p1", "p2", "p3"))))
                before = gathers()
                await publisher.publish(event)
                with trio.fail_after(10):
                    note = await sub.__anext__()
                assert note.event == graph.value
                assert notification_solutions(note) == oracle_solutions(text, event)
                if not forgotten:
                    assert entry.counters["events_from_origin"] == 1 and gathers() == before
                else:
                    assert entry.counters["events_not_at_origin"] == 1 and gathers() > before


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_an_event_acknowledged_before_subscribe_is_not_notified_when_its_commit_arrives_after(
        autojump_clock, algorithm):
    """The entry acknowledges a publication once its decision is durable and sends the owners'
    commits afterwards; an owner matches an event when it commits. A commit that arrives after
    a later subscribe must not notify that subscribe: the stamps decide, under both algorithms."""
    query = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p0> ?o . ?o <{EX}p1> ?x }} }}"
    async with open_overlay(4, algorithm, seed=3) as overlay:
        gate = trio.Event()
        for peer in overlay.peers:
            send = peer.storage._send_commits

            async def held(owners, graphs, send=send):
                await gate.wait()
                await send(owners, graphs)
            peer.storage._send_commits = held

        def event(tag: str) -> CompoundEvent:
            g = event_graph(tag, 1, 1)
            a, b, c = (IRI(f"{EX}{tag}{n}") for n in "abc")
            return CompoundEvent(g, (make_quad(g, a, PREDICATES[0], b), make_quad(g, b, PREDICATES[1], c)))

        async with overlay.client(0, "pub") as publisher, overlay.client(1, "sub") as subscriber:
            early = event("early")
            await publisher.publish(early)              # acknowledged; its commits are held back
            sub = await subscriber.subscribe(query, kind="signal")
            gate.set()                                  # the commits reach the owners only now
            late = event("late")
            await publisher.publish(late)
            got: list[Notification] = []
            await collect(sub, 1, got, seconds=30)
            with trio.move_on_after(5):
                await collect(sub, 1, got, seconds=5)
            assert [n.event for n in got] == [late.graph.value]


async def test_identical_csma_subscriptions_share_one_chain_and_each_is_notified(autojump_clock):
    """Under CSMA, subscriptions with the same patterns and FILTERs (whatever their text,
    projection, kind or entry peer) run one chain per event; each subscriber still gets exactly
    its notifications, and one made after an event was acknowledged does not get that event."""
    body = f"{{ GRAPH ?g {{ ?s <{EX}p0> ?o . ?o <{EX}p1> ?x FILTER(?x != <{EX}none>) }} }}"
    texts = [f"SELECT ?s WHERE {body}", f"SELECT   ?o ?s WHERE {body}", f"SELECT * WHERE {body}",
             f"SELECT ?x WHERE {body}"]

    def event(tag: str, i: int) -> CompoundEvent:
        g = event_graph(tag, i, i)
        a, b, c = (IRI(f"{EX}{tag}{i}{n}") for n in "abc")
        return CompoundEvent(g, (make_quad(g, a, PREDICATES[0], b), make_quad(g, b, PREDICATES[1], c)))

    async def run(sharing: list[str]) -> tuple[list[list[Notification]], int, int]:
        async with open_overlay(5, "csma", seed=4) as overlay:
            clients = [overlay.client(i % 5, f"sub{i}") for i in range(len(sharing))]
            async with overlay.client(0, "pub") as publisher, clients[0] as c0, clients[1] as c1, \
                    clients[2] as c2, clients[3] as c3:
                subs = [await c.subscribe(t, kind=k) for c, t, k in
                        zip((c0, c1, c2), sharing[:3], ("signal", "bindings", "event"))]
                events = [event("e", i) for i in range(6)]
                for e in events[:3]:
                    await publisher.publish(e)
                subs.append(await c3.subscribe(sharing[3], kind="bindings"))  # after the first three
                for e in events[3:]:
                    await publisher.publish(e)
                got: list[list[Notification]] = []
                for sub, want in zip(subs, (6, 6, 6, 3)):
                    notes: list[Notification] = []
                    await collect(sub, want, notes, seconds=30)
                    got.append(notes)
                rewrites = sum(p.counters["csma_rewrites"] for p in overlay.peers)
                shared = sum(p.counters["csma_chains_shared"] for p in overlay.peers)
                return got, rewrites, shared

    got, rewrites, shared = await run(texts)
    published = [event("e", i).graph.value for i in range(6)]
    for notes, want in zip(got, (published, published, published, published[3:])):
        assert sorted(n.event for n in notes) == sorted(want)
    assert all(n.solutions and n.solutions[0]["x"] for n in got[3])
    assert [len(n.quads) for n in got[2]] == [2] * 6
    assert shared == 3 * 3 + 3 * 2   # three members per chain after the fourth subscribed, two before
    alone, rewrites_alone, _ = await run([texts[0], f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p0> ?o }} }}",
                                          f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p1> ?o }} }}",
                                          f"SELECT ?s WHERE {{ GRAPH ?g {{ ?o <{EX}p1> ?s }} }}"])
    assert rewrites == rewrites_alone == 6  # one chain per event, as for one subscription alone


async def test_contained_csma_subscriptions_ride_their_container_chain_and_get_exactly_theirs(autojump_clock):
    """Under CSMA a subscription contained in another from the same first pattern (a FILTER more,
    a pattern more) rides that one's chain; whoever delivers it evaluates it on the whole event,
    so each subscriber gets exactly its own notifications, whatever its kind, durable or not, and
    one made after an event was acknowledged does not get that event."""
    p0, p1, p2 = (f"{EX}c{n}" for n in range(3))
    chain = f"?s <{p0}> ?o . ?o <{p1}> ?x"
    texts = [  # (text, kind, durable, events expected)
        (f"SELECT * WHERE {{ GRAPH ?g {{ {chain} }} }}", "bindings", False, range(6)),
        (f"SELECT ?s WHERE {{ GRAPH ?g {{ {chain} FILTER(?x > 2) }} }}", "signal", False, (3, 4, 5)),
        (f"SELECT ?y WHERE {{ GRAPH ?g {{ {chain} . ?s <{p2}> ?y }} }}", "bindings", False, (0, 2, 4)),
        (f"SELECT * WHERE {{ GRAPH ?g {{ {chain} FILTER(?x >= 4) }} }}", "event", False, (4, 5)),
        (f"SELECT * WHERE {{ GRAPH ?g {{ {chain} FILTER(?x < 2) }} }}", "signal", True, (0, 1)),
    ]
    late = (f"SELECT ?x WHERE {{ GRAPH ?g {{ {chain} FILTER(?x > 0) }} }}", "bindings", False, (3, 4, 5))

    def event(i: int) -> CompoundEvent:
        g = event_graph("contained", i, i)
        a, b = IRI(f"{EX}ca{i}"), IRI(f"{EX}cb{i}")
        quads = [make_quad(g, a, IRI(p0), b), make_quad(g, b, IRI(p1), Literal(str(i), datatype=XSD + "integer"))]
        if i % 2 == 0:
            quads.append(make_quad(g, a, IRI(p2), Literal(f"y{i}")))
        return CompoundEvent(g, tuple(quads))

    events = [event(i) for i in range(6)]
    async with open_overlay(5, "csma", seed=4) as overlay:
        async with overlay.client(0, "pub") as publisher, overlay.client(1, "a") as a, overlay.client(3, "b") as b:
            subs = [await (a, b)[n % 2].subscribe(t, kind=k, durable=d) for n, (t, k, d, _) in enumerate(texts)]
            for e in events[:3]:
                await publisher.publish(e)
            subs.append(await b.subscribe(late[0], kind=late[1]))
            for e in events[3:]:
                await publisher.publish(e)
            by_graph = {e.graph.value: e for e in events}
            got = []
            for sub, (_, kind, _, want) in zip(subs, [*texts, late]):
                notes: list[Notification] = []
                await collect(sub, len(want), notes, seconds=30)
                assert sorted(n.event for n in notes) == sorted(events[i].graph.value for i in want), sub.sparql
                assert all(set(n.quads) == (set(by_graph[n.event].quads) if kind == "event" else set())
                           for n in notes)
                got.append(notes)
            assert sorted(n.solutions[0]["y"].lexical for n in got[2]) == ["y0", "y2", "y4"]
            assert sorted(n.solutions[0]["x"].lexical for n in got[5]) == ["3", "4", "5"]
            counters = Counter()
            for peer in overlay.peers:
                counters.update(peer.counters)
            assert counters["csma_chains_contained"] >= 4 * 6 - 2   # all but the container, every event
            assert counters["contained_rejected"] > 0               # a container's match is not theirs
            assert counters["csma_rewrites"] == 6                   # one chain per event: the container's


async def test_identical_subscriptions_share_their_parsed_parts_on_a_peer(autojump_clock):
    """Popular queries: subscriptions with the same patterns and FILTERs keep one copy of them
    on each peer (each its own text and projection), released as they are unsubscribed."""
    body = f"{{ GRAPH ?g {{ ?s <{EX}p0> ?o FILTER(?o != <{EX}x>) }} }}"
    async with open_overlay(3, "osma", seed=2) as overlay:
        async with overlay.client(0, "a") as a, overlay.client(1, "b") as b, overlay.client(2, "c") as c:
            subs = [await a.subscribe(f"SELECT ?s WHERE {body}"), await b.subscribe(f"SELECT * WHERE {body}"),
                    await c.subscribe(f"SELECT ?o WHERE {body}", kind="signal")]
            holders = [p for p in overlay.peers if len(p.subscriptions) == 3]
            assert holders
            for peer in holders:
                held = [s.sub for s in peer.subscriptions]
                assert len({id(s.patterns) for s in held}) == len({id(s.filters) for s in held}) == 1
                assert sorted(s.projection for s in held) == [("g", "s", "o"), ("o",), ("s",)]
                assert peer.subscriptions.index.stats()["entries"] == 1  # one shared index entry
            await subs[0].unsubscribe()  # the first one stored: its entry and parts stay for the others
            await subs[1].unsubscribe()
            for peer in holders:
                assert [s.sub.projection for s in peer.subscriptions] == [("o",)]
                assert peer.subscriptions.index.stats()["entries"] == 1
            graph = event_graph("shared", 1, 1)
            await a.publish(CompoundEvent(graph, (make_quad(graph, SUBJECTS[0], PREDICATES[0], SUBJECTS[1]),)))
            got: list[Notification] = []
            await collect(subs[2], 1, got, seconds=30)
            assert [n.event for n in got] == [graph.value]
            await subs[2].unsubscribe()
            assert all(peer.subscriptions.index.stats()["entries"] == 0 for peer in holders)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_identical_subscriptions_share_one_entry_per_peer_and_each_gets_its_own(autojump_clock, algorithm):
    """Popular subscriptions: identical ones (same patterns and FILTERs, whatever their text,
    projection or kind) share one index entry per peer. Each subscriber still gets exactly its
    notifications with its own projection; one made after an event was acknowledged does not get
    that event; removing the first one stored leaves the others served by the shared entry."""
    body = f"{{ GRAPH ?g {{ ?s <{EX}p0> ?o . ?o <{EX}p1> ?x FILTER(?x != <{EX}none>) }} }}"
    texts = [f"SELECT ?s WHERE {body}", f"SELECT ?x ?s WHERE {body}", f"SELECT * WHERE {body}",
             f"SELECT ?x WHERE {body}"]

    def event(i: int) -> CompoundEvent:
        g = event_graph("id", i, i)
        a, b, c = (IRI(f"{EX}i{i}{n}") for n in "abc")
        return CompoundEvent(g, (make_quad(g, a, PREDICATES[0], b), make_quad(g, b, PREDICATES[1], c)))

    events = [event(i) for i in range(9)]
    async with open_overlay(5, algorithm, seed=4) as overlay:
        async with overlay.client(0, "pub") as publisher, overlay.client(1, "s0") as c0, \
                overlay.client(2, "s1") as c1, overlay.client(3, "s2") as c2, overlay.client(4, "s3") as c3:
            subs = [await c.subscribe(t, kind=k) for c, t, k in
                    zip((c0, c1, c2), texts[:3], ("signal", "bindings", "event"))]
            for e in events[:3]:
                await publisher.publish(e)
            subs.append(await c3.subscribe(texts[3], kind="bindings"))  # after the first three
            stats = [p.subscriptions.index.stats() for p in overlay.peers]
            holding = [s for s in stats if s["subscriptions"]]
            assert holding and all(s["subscriptions"] == 4 and s["entries"] == 1 for s in holding)
            for e in events[3:6]:
                await publisher.publish(e)
            first: list[Notification] = []
            await collect(subs[0], 6, first, seconds=30)
            await subs[0].unsubscribe()  # the first one stored: another takes its place in the entry
            for e in events[6:]:
                await publisher.publish(e)
            got = [first]
            for sub, want in zip(subs[1:], (9, 9, 6)):
                notes: list[Notification] = []
                await collect(sub, want, notes, seconds=30)
                got.append(notes)
            assert all(s["subscriptions"] == 3 and s["entries"] == 1
                       for s in (p.subscriptions.index.stats() for p in overlay.peers) if s["subscriptions"])
    graphs = [e.graph.value for e in events]
    for notes, want in zip(got, (graphs[:6], graphs, graphs, graphs[3:])):
        assert sorted(n.event for n in notes) == sorted(want)  # exactly these: none missing, none twice
    for n, i in zip(sorted(got[1], key=lambda n: n.event), range(9)):
        assert n.solutions == ({"x": IRI(f"{EX}i{i}c"), "s": IRI(f"{EX}i{i}a")},)  # its own projection
    for n, i in zip(sorted(got[3], key=lambda n: n.event), range(3, 9)):
        assert n.solutions == ({"x": IRI(f"{EX}i{i}c")},)
    assert [len(n.quads) for n in got[2]] == [2] * 9
