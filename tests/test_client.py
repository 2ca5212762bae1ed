"""The SDK against an in-process overlay: its typed API, and every failure as a ClientError with a code."""

from __future__ import annotations

import pytest
import trio

from eventcloud.client import ClientError, connect
from eventcloud.client.api import COALESCED_PUBLISHES
from eventcloud.errors import ErrorCode
from eventcloud.rdf.model import IRI, Literal
from eventcloud.testing import open_overlay
from tests.helpers import EXO, sample_events

S, P = IRI(EXO + "s"), IRI(EXO + "p")


async def test_publish_read_delete_and_status(autojump_clock):
    async with open_overlay(3) as overlay:
        async with overlay.client(1, "sdk") as client:
            event = client.event([(S, P, Literal("1"))])
            assert event.graph.value.startswith("http://eventcloud.io/events/sdk/")
            receipt = await client.publish(event)
            assert (receipt.graph, receipt.quads) == (event.graph.value, 1) and receipt.published > 0
            assert await client.find(event.graph) == list(event.quads)
            assert await client.count(None, None, P) == 1
            assert (await client.query("ASK { GRAPH ?g { ?s ?p ?o } }"))["boolean"] is True
            status = await client.status()
            assert len(status.peers) == 3 and sum(p.quads for p in status.peers) == 1
            assert await client.delete(event.graph.value) == 1
            assert await client.count() == 0


async def test_bad_input_is_a_client_error_never_a_raw_exception(autojump_clock):
    async with open_overlay(1) as overlay:
        async with overlay.client() as client:
            with pytest.raises(ClientError, match="not valid Unicode") as info:
                await client.publish(client.event([(S, P, Literal("bad \ud800 surrogate"))]))
            assert info.value.code is ErrorCode.BAD_REQUEST
            with pytest.raises(ClientError, match="unknown notification kind"):
                await client.subscribe("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", kind="loud")
            with pytest.raises(ClientError) as info:
                await client.subscribe("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } } LIMIT 1")
            assert info.value.code is ErrorCode.BAD_SUBSCRIPTION and "LIMIT" in info.value.message
            with pytest.raises(ClientError) as info:
                await client.query("SELECT WHERE {")
            assert info.value.code is ErrorCode.BAD_QUERY
            with pytest.raises(ClientError, match="IRI"):
                await client.delete("not an iri")
            with pytest.raises(ClientError, match="graph of a quad must be an IRI|must be an IRI"):
                client.event([(S, Literal("p"), S)])


async def test_connecting_to_nothing_is_a_client_error(autojump_clock):
    async with open_overlay(1) as overlay:
        with pytest.raises(ClientError, match="cannot reach peer:42") as info:
            async with connect("peer:42", transport=overlay.network):
                pass
        assert info.value.code is ErrorCode.UNREACHABLE
    with pytest.raises(ClientError, match="expected HOST:PORT"):
        async with connect("nonsense"):
            pass


async def test_a_lost_entry_peer_ends_the_subscription_with_an_error_not_a_hang(autojump_clock):
    async with open_overlay(2) as overlay:
        async with overlay.client(1) as client:
            sub = await client.subscribe("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", kind="signal")
            entry = overlay.peers[1]
            entry.stop()
            await overlay.network.kill(entry.address)
            with trio.fail_after(10):
                with pytest.raises(ClientError, match="ended") as info:
                    async for _ in sub:
                        pass
            assert info.value.code is ErrorCode.UNREACHABLE
            with pytest.raises(ClientError) as info:
                await client.count()
            assert info.value.code is ErrorCode.UNREACHABLE


async def test_unsubscribe_ends_the_iteration_cleanly(autojump_clock):
    async with open_overlay(2) as overlay:
        async with overlay.client() as client:
            sub = await client.subscribe("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", kind="signal")
            await client.publish(sample_events(1)[0])
            with trio.fail_after(10):
                note = await sub.receive()
            assert note.kind == "signal"
            await sub.unsubscribe()
            with trio.fail_after(10):
                assert [n async for n in sub] == []


async def test_concurrent_publishes_travel_together_and_keep_their_own_receipts(autojump_clock):
    async with open_overlay(3) as overlay:
        async with overlay.client(1, "sdk") as client:
            events = [client.event([(S, P, Literal(str(i)))]) for i in range(40)]
            receipts = {}

            async def publish(event):
                receipts[event.graph.value] = await client.publish(event)

            before = sum(p.counters["in:publish"] for p in overlay.peers)
            async with trio.open_nursery() as nursery:
                for event in events:
                    nursery.start_soon(publish, event)
            requests = sum(p.counters["in:publish"] for p in overlay.peers) - before
            assert requests == -(-40 // COALESCED_PUBLISHES)  # full merged requests, not one per event
            assert all(receipts[e.graph.value].graph == e.graph.value for e in events)
            assert await client.count() == 40
            await client.publish(client.event([(S, P, Literal("alone"))]))  # at low load: at once
            assert await client.count() == 41


async def test_a_bad_event_among_concurrent_publishes_fails_alone(autojump_clock):
    """The merged request fails; each event is then published alone, so the good ones are
    stored and only the bad one raises, with its own error."""
    async with open_overlay(3) as overlay:
        async with overlay.client(1, "sdk") as client:
            good = [client.event([(S, P, Literal(str(i)))]) for i in range(6)]
            bad = client.event([(S, P, Literal("bad \ud800 surrogate"))])
            outcomes = {}

            async def publish(event):
                try:
                    outcomes[event.graph.value] = await client.publish(event)
                except ClientError as exc:
                    outcomes[event.graph.value] = exc

            async with trio.open_nursery() as nursery:
                for event in good[:3] + [bad] + good[3:]:
                    nursery.start_soon(publish, event)
            assert isinstance(outcomes[bad.graph.value], ClientError)
            assert outcomes[bad.graph.value].code is ErrorCode.BAD_REQUEST
            assert all(outcomes[e.graph.value].graph == e.graph.value for e in good)
            assert client.coalesced_retried == 7 and await client.count() == 6


async def test_a_request_the_entry_peer_never_answers_ends_with_a_timeout_error(autojump_clock):
    """A peer that accepts a request and never answers (seen once while 8 real peers moved: a
    look at the counts waited for ever) must not hang the application: after `request_timeout`
    the call fails with a typed, transient error, and the client goes on serving other calls."""
    from eventcloud.testing.overlay import trio_ms

    async with open_overlay(2, seed=1) as overlay:
        entry = overlay.peers[0]

        async def never(*args, **kwargs):
            await trio.sleep_forever()

        multicast = entry.router.multicast
        entry.router.multicast = never
        async with connect(entry.address, transport=overlay.network, physical_ms=trio_ms,
                           request_timeout=20) as client:
            started = trio.current_time()
            with pytest.raises(ClientError) as info:
                await client.count()
            assert info.value.code is ErrorCode.TIMEOUT and info.value.transient
            assert "no answer to count within 20 s" in info.value.message
            assert 20 <= trio.current_time() - started < 21
            entry.router.multicast = multicast
            assert await client.count() == 0


async def test_a_request_waiting_while_the_client_reconnects_goes_out_on_the_new_connection(autojump_clock):
    """The entry is lost, and the first peer tried answers that it does not serve a zone yet
    (it is rejoining, as the rebalancer's moves do). A request made meanwhile waited for a
    connection on an event that the refused attempt replaced; the connection that came later
    set the new one, and the request waited on, with no request at any peer, until
    `request_timeout` (8 real peers moving while CityBench was published: 4 publishers, 300 s).
    Each refused attempt also sent the client back to the same peer, never to the others."""
    from eventcloud.testing.overlay import trio_ms

    async with open_overlay(4, seed=1) as overlay:
        entry, rejoining, *others = overlay.peers
        ready = rejoining.router.dispatcher.ready
        rejoining.router.dispatcher.ready = trio.Event()        # it serves no zone (yet)
        seeds = [entry.address, rejoining.address, *(p.address for p in others)]
        events = sample_events(3)
        async with connect(seeds, transport=overlay.network, physical_ms=trio_ms, request_timeout=120,
                           reconnect=60) as client:
            await client.publish(events[0])
            entry.stop()
            await overlay.network.kill(entry.address)
            started = trio.current_time()
            with trio.fail_after(100):
                await client.publish(events[1])
            assert trio.current_time() - started < 30
            assert client.link.address in {p.address for p in others}
            rejoining.router.dispatcher.ready = ready
            await trio.sleep(30)                            # the entry's replica took its zone over
            assert await client.count() == sum(len(e.quads) for e in events[:2])


async def test_a_request_waiting_for_a_connection_that_never_comes_ends_with_a_timeout_error(autojump_clock):
    """The deadline covers the whole request: also the wait for a connection while the client
    reconnects (a look at the counts once waited for ever with no request at any peer)."""
    from eventcloud.testing.overlay import trio_ms

    async with open_overlay(2, seed=1) as overlay:
        entry = overlay.peers[0]
        async with connect(entry.address, transport=overlay.network, physical_ms=trio_ms,
                           request_timeout=20) as client:
            never = trio.Event()

            async def no_connection():
                await never.wait()

            client.link.connection = no_connection
            with pytest.raises(ClientError) as info:
                await client.count()
            assert info.value.code is ErrorCode.TIMEOUT
