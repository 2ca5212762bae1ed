"""Hostile subscriptions and queries: a catastrophic REGEX or a runaway join cannot stall a peer
(real clock, real TCP)."""

from __future__ import annotations

import statistics

import pytest

import trio

from eventcloud.client import connect
from eventcloud.client.link import ClientError
from eventcloud.net.transport import TcpTransport
from eventcloud.rdf.model import IRI, Literal
from peers.config import PeerConfig
from peers.runtime import run_peer
from tests.helpers import EXO, sample_events

#: Exponential for a backtracking engine on a long run of x's (the oracle's engine never backtracks).
CATASTROPHIC = 'SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } FILTER(REGEX(STR(?o), "(x+x+)+y")) }'


async def test_a_catastrophic_regex_does_not_stall_other_clients():
    async with trio.open_nursery() as nursery:
        peer = await nursery.start(run_peer, PeerConfig(listen="127.0.0.1:0", stabilise_every=0), TcpTransport())
        async with connect(peer.address, source="evil") as evil, connect(peer.address, source="good") as good:
            sub = await evil.subscribe(CATASTROPHIC, kind="signal")
            latencies: list[float] = []

            async def flood() -> None:
                for i in range(40):
                    await evil.publish(evil.event([(IRI(f"{EXO}s{i}"), IRI(f"{EXO}text"), Literal("x" * 3000 + str(i)))]))

            async def ordinary() -> None:
                for i, event in enumerate(sample_events(30, quads=2, source="good")):
                    started = trio.current_time()
                    await good.publish(event)
                    await good.count(event.graph)
                    latencies.append(trio.current_time() - started)
                    await trio.sleep(0.01)

            with trio.fail_after(60):
                async with trio.open_nursery() as inner:
                    inner.start_soon(flood)
                    inner.start_soon(ordinary)
            status = await good.status()
            timeouts = sum(p.counters.get("regex_timeouts", 0) for p in status.peers)
            assert timeouts >= 40, "every flood event ran into the budget and was counted"
            latencies.sort()
            p95 = latencies[int(len(latencies) * 0.95) - 1]
            print(f"ordinary publish+count: median {statistics.median(latencies) * 1000:.1f} ms, "
                  f"p95 {p95 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms; regex timeouts {timeouts}")
            assert p95 < 0.1, latencies
            with trio.move_on_after(1):
                async for note in sub:  # no event matched: (x+x+)+y needs a y
                    raise AssertionError(f"unexpected notification {note}")
        nursery.cancel_scope.cancel()


#: Patterns in separate graphs sharing no variable: 2,000 quads make 8·10^9 rows to count …
CROSS_COUNT = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g1 { ?a ?b ?c } GRAPH ?g2 { ?d ?e ?f } GRAPH ?g3 { ?h ?i ?j } }"
#: … or 4·10^6 rows to list (more than the memory budget below once serialized)
CROSS_ROWS = "SELECT * WHERE { GRAPH ?g1 { ?a ?b ?c } GRAPH ?g2 { ?d ?e ?f } }"


async def test_a_runaway_one_time_query_is_stopped_at_its_budget_and_others_are_answered():
    """Joins run in a child process under a time and a memory budget: two runaway queries get a
    bad-query error naming the budget they ran past, a good join is answered meanwhile, a result
    larger than a frame is paged out, and the peer goes on serving (in a thread, the first would
    have held a core and a query thread for
    good, the second the peer's memory)."""
    # time enough for the listing to reach the memory budget on a loaded machine first
    config = PeerConfig(listen="127.0.0.1:0", stabilise_every=0, offload_store=True, query_budget=8.0,
                        query_memory_mb=300, max_frame=1024 * 1024)
    async with trio.open_nursery() as nursery:
        peer = await nursery.start(run_peer, config, TcpTransport())
        async with connect(peer.address, source="evil") as evil, connect(peer.address, source="good") as good:
            events = [good.event([(IRI(f"{EXO}s{e}"), IRI(f"{EXO}p{q}"), Literal(str(q))) for q in range(10)])
                      for e in range(200)]
            await good.publish_batch(events)
            refusals: list[tuple[str, str, float]] = []

            async def runaway(text: str) -> None:
                started = trio.current_time()
                with pytest.raises(ClientError) as caught:
                    await evil.query(text)
                refusals.append((caught.value.code, str(caught.value), trio.current_time() - started))

            with trio.fail_after(60):
                async with trio.open_nursery() as inner:
                    inner.start_soon(runaway, CROSS_COUNT)  # never ends: stopped at 8 s
                    inner.start_soon(runaway, CROSS_ROWS)
                    await trio.sleep(0.3)
                    started = trio.current_time()
                    answer = await good.query(f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EXO}p0> ?v . ?s <{EXO}p1> ?w }} }}")
                    assert trio.current_time() - started < 1.5  # not behind the runaways
                    assert len(answer["results"]["bindings"]) == 200
                    # 40,000 rows, several times the frame limit (1 MiB): paged out, not refused
                    product = await good.query(f"SELECT * WHERE {{ GRAPH ?g1 {{ ?a <{EXO}p0> ?c }} "
                                               f"GRAPH ?g2 {{ ?d <{EXO}p1> ?f }} }}")
                    assert len(product["results"]["bindings"]) == 40_000
            assert sorted(code for code, _, _ in refusals) == ["bad-query", "bad-query"]
            assert any("budget of 8 s" in message for _, message, _ in refusals), refusals
            assert any("memory budget of 300 MB" in message for _, message, _ in refusals), refusals
            assert all(seconds < 20 for _, _, seconds in refusals), refusals
            assert await good.count() == 2000
            status = await good.status()
            assert status.peers[0].counters["sparql_stopped"] == 2   # the two runaways (the large product was answered)
        nursery.cancel_scope.cancel()


async def test_a_cross_product_subscription_gets_a_truncated_notification_not_a_frozen_peer(autojump_clock):
    from eventcloud.matching.reference import MAX_SOLUTION_TERMS, MAX_SOLUTIONS
    from eventcloud.rdf.model import CompoundEvent, event_graph, make_quad
    from eventcloud.testing import open_overlay

    patterns = " . ".join(f"?s{i} <{EXO}p> ?o{i}" for i in range(6))  # no shared variable: 10^6 solutions
    async with open_overlay(3) as overlay:
        async with overlay.client() as client:
            sub = await client.subscribe(f"SELECT * WHERE {{ GRAPH ?g {{ {patterns} }} }}", kind="bindings")
            g = event_graph("x", 1, 1)
            event = CompoundEvent(g, tuple(make_quad(g, IRI(f"{EXO}s{i}"), IRI(f"{EXO}p"), Literal(str(i)))
                                           for i in range(10)))
            await client.publish(event)
            with trio.fail_after(30):
                note = await sub.receive()
            assert note.truncated and 0 < len(note.solutions) <= MAX_SOLUTIONS
            # 50 unconnected patterns (150 variables) against a 2-quad event: 2^50 solutions; once a
            # 1 GB peer, no notification (over the frame limit), the match re-run for ever
            wide = " . ".join(f"?s{i} ?p{i} ?o{i}" for i in range(50))
            sub = await client.subscribe(f"SELECT * WHERE {{ GRAPH ?g {{ {wide} }} }}", kind="bindings")
            g = event_graph("x", 2, 2)
            await client.publish(CompoundEvent(g, tuple(make_quad(g, IRI(f"{EXO}t{i}"), IRI(f"{EXO}p"), Literal(str(i)))
                                                        for i in range(2))))
            with trio.fail_after(30):
                note = await sub.receive()
            assert note.truncated and 0 < len(note.solutions) <= MAX_SOLUTION_TERMS // 150


async def test_text_that_is_not_unicode_is_a_clear_error_everywhere(autojump_clock):
    from eventcloud.client import ClientError
    from eventcloud.testing import open_overlay

    async with open_overlay(1) as overlay:
        async with overlay.client() as client:
            with pytest.raises(ClientError, match="not valid Unicode"):
                await client.subscribe('SELECT * WHERE { GRAPH ?g { ?s ?p "\ud800" } }')
            with pytest.raises(ClientError, match="not valid Unicode"):
                await client.query('SELECT * WHERE { ?s ?p "\ud800" }')
            assert await client.count() == 0  # the connection goes on


async def test_an_event_in_a_graph_the_peers_keep_their_records_in_is_refused(autojump_clock):
    """The peers' own graphs (metadata, subscriptions, decisions) are refused where a client's
    event enters, before anything of it is stored; the connection goes on."""
    from eventcloud.client import ClientError
    from eventcloud.errors import ErrorCode
    from eventcloud.rdf.model import CompoundEvent, make_quad
    from eventcloud.testing import open_overlay
    from peers.store import RESERVED_GRAPHS

    async with open_overlay(3) as overlay:
        async with overlay.client() as client:
            for name in sorted(RESERVED_GRAPHS):
                g = IRI(name)
                event = CompoundEvent(g, (make_quad(g, IRI(f"{EXO}s"), IRI(f"{EXO}p"), Literal("1")),))
                with pytest.raises(ClientError, match="reserved") as info:
                    await client.publish(event)
                assert info.value.code is ErrorCode.BAD_REQUEST
            assert await client.count() == 0
            assert sum(p.storage.store.sync.pending_quads for p in overlay.peers) == 0


async def _errors_then_close(stream) -> list:
    from eventcloud.wire.frames import FrameDecoder

    decoder, messages = FrameDecoder(), []
    with trio.fail_after(120):
        while True:
            try:
                data = await stream.receive_some()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                break
            if not data:
                break
            decoder.feed(data)
            while (m := decoder.next_message()) is not None:
                messages.append(m)
    return messages


async def test_idle_connections_cannot_lock_clients_out_and_stalled_frames_are_closed(autojump_clock):
    """Past the limit a newcomer takes the slot of the least active connection that holds nothing
    (no request served, no subscription); only when every slot holds something is it refused.
    A connection that asks nothing within `first_request_timeout`, a frame never completed, and
    a connection silent past the idle timeout are closed, each saying why."""
    import struct

    from eventcloud.testing import open_overlay
    from eventcloud.wire.frames import Kind, Message, encode
    from eventcloud.wire.ops import Op

    async with open_overlay(1, max_connections=3, frame_timeout=5.0, idle_timeout=30.0,
                            first_request_timeout=20.0) as overlay:
        address = overlay.peers[0].address
        ping = encode(Message(Kind.REQUEST, Op.PING, 1, 0, {}))
        held = [await overlay.network.connect(address) for _ in range(3)]
        for stream in held:   # each asks something, then idles (as a keep-alive attacker's would)
            await stream.send_all(ping)
            await trio.sleep(1)
        async with overlay.client() as client:   # a newcomer gets in: the least active one makes room
            assert await client.count() == 0
            (evicted,) = [m for m in await _errors_then_close(held[0]) if m.kind is Kind.ERROR]
            assert evicted.body["code"] == "busy" and "least active" in evicted.body["message"]
            sub = await client.subscribe("SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }")
            # the subscriber's connection holds a subscription: never evicted; the others are
            async with overlay.client() as second:
                assert await second.count() == 0
            assert overlay.peers[0].counters["connections_evicted"] == 2
            full = [await overlay.network.connect(address) for _ in range(2)]
            for stream in full:
                await stream.send_all(encode(Message(Kind.REQUEST, Op.SUBSCRIBE, 2, 0, {
                    "sparql": "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"})))
            await trio.sleep(1)
            refused = await overlay.network.connect(address)   # every slot holds a subscription
            (refusal,) = await _errors_then_close(refused)
            assert refusal.body["code"] == "busy" and "3 connections already" in refusal.body["message"]
            for stream in full:
                await stream.aclose()
            await sub.unsubscribe()
        await trio.sleep(1)
        silent = await overlay.network.connect(address)   # asks nothing: closed after 20 s
        (closing,) = await _errors_then_close(silent)
        assert closing.body["code"] == "timeout" and "no request within 20 s" in closing.body["message"]
        stalled = await overlay.network.connect(address)   # a frame that never completes
        await stalled.send_all(ping + struct.pack(">I", 1000) + b"\x81\xa1k")
        closing = [m for m in await _errors_then_close(stalled) if m.kind is Kind.ERROR]
        assert closing[0].body["code"] == "timeout" and "frame was not completed" in closing[0].body["message"]
        idle = await overlay.network.connect(address)   # asked once, then silent: the idle timeout
        await idle.send_all(ping)
        closing = [m for m in await _errors_then_close(idle) if m.kind is Kind.ERROR]
        assert closing[0].body["code"] == "timeout" and "no message" in closing[0].body["message"]
        async with overlay.client() as client:  # the peer serves on
            assert await client.count() == 0


async def test_one_host_holds_a_bounded_share_of_connections_and_newcomers_still_get_in():
    """Over real TCP: 60 connections from one address that each asked once and idle (a keep-alive
    attacker) hold at most `max_per_address` slots together, and a client from the same address
    still gets in (the least active idle one makes room)."""
    from eventcloud.wire.frames import Kind, Message, encode
    from eventcloud.wire.ops import Op

    config = PeerConfig(listen="127.0.0.1:0", stabilise_every=0, max_connections=40, max_per_address=16,
                        reserved_connections=8)
    async with trio.open_nursery() as nursery:
        peer = await nursery.start(run_peer, config, TcpTransport())
        transport = TcpTransport()
        ping = encode(Message(Kind.REQUEST, Op.PING, 1, 0, {}))
        held = []
        for _ in range(60):
            stream = await transport.connect(peer.address)
            await stream.send_all(ping)
            held.append(stream)
        await trio.sleep(0.5)
        limits = peer.runtime_limits
        assert limits.open <= 16 and limits.evicted >= 44
        with trio.fail_after(10):
            async with connect(peer.address) as client:
                assert await client.count() == 0
        for stream in held:
            await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_token_guessing_is_throttled_per_host():
    """Each wrong admin token ends its connection; past 5 failures within 10 s the host's
    proofs are refused unchecked (the right token too) for a penalty, then accepted again."""
    config = PeerConfig(listen="127.0.0.1:0", stabilise_every=0, admin_token="tok-12345")
    async with trio.open_nursery() as nursery:
        peer = await nursery.start(run_peer, config, TcpTransport())
        said = []
        for guess in range(8):
            with pytest.raises(ClientError) as info:
                async with connect(peer.address, admin_token=f"guess-{guess}") as client:
                    await client.delete(IRI(f"{EXO}g"))
            said.append(info.value.message)
        assert all("wrong admin token" in m for m in said[:5]), said
        assert all("too many failed proofs from 127.0.0.1" in m for m in said[6:]), said
        with pytest.raises(ClientError, match="too many failed proofs"):
            async with connect(peer.address, admin_token="tok-12345") as client:
                await client.delete(IRI(f"{EXO}g"))
        assert peer.counters["auth_penalties"] >= 1
        await trio.sleep(peer.counters["auth_penalties"] * 4 + 1)   # the penalties (2 s, doubling) pass
        async with connect(peer.address, admin_token="tok-12345") as client:
            assert await client.delete(IRI(f"{EXO}g")) == 0
        nursery.cancel_scope.cancel()


async def test_unfinished_frames_cannot_take_more_than_the_buffer_budget(autojump_clock):
    import struct

    from eventcloud.testing import open_overlay

    async with open_overlay(1, max_buffered=100_000, frame_timeout=10.0) as overlay:
        peer = overlay.peers[0]
        streams = [await overlay.network.connect(peer.address) for _ in range(8)]
        async with trio.open_nursery() as nursery:
            for stream in streams:  # each starts a 1 MB frame and sends 60 KB of it, then stalls
                nursery.start_soon(stream.send_all, struct.pack(">I", 1_000_000) + b"\x00" * 60_000)
            await trio.sleep(1)
            assert peer.runtime_limits._buffered <= 100_000 + 8 * 4096  # the rest waits in the streams
            nursery.cancel_scope.cancel()
        await trio.sleep(35)  # the frame timeout closes them all (those that waited for room, from their first byte)
        assert peer.runtime_limits._buffered == 0 and peer.runtime_limits.open == 0
