"""Durable subscriptions in one process (real peers over memory streams, a mock clock): numbered
notifications kept until acknowledged and replayed to a subscriber that comes back through any
peer, after its entry peer or its home died; leases, tickets, retention gaps; every refusal."""

from __future__ import annotations

import pytest
import trio

from eventcloud.client import ClientError, connect
from eventcloud.errors import ErrorCode
from eventcloud.rdf.model import IRI, CompoundEvent, Literal, event_graph, make_quad
from peers.publish.claims import claim_point
from eventcloud.testing import open_overlay, trio_ms
from tests.helpers import sample_events, spread_events

ACCEPT_ALL = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"
ALGORITHMS = ["osma", "csma"]


async def _take(sub, n: int, seconds: float = 60) -> list:
    notes = []
    with trio.fail_after(seconds):
        while len(notes) < n:
            notes.append(await sub.receive())
    return notes


def _client(overlay, indexes, **options):
    addresses = [overlay.peers[i].address for i in indexes]
    return connect(addresses, transport=overlay.network, physical_ms=trio_ms, **options)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_a_subscriber_that_leaves_gets_what_it_missed_through_another_peer(autojump_clock, algorithm):
    events = spread_events(30, "d")
    async with open_overlay(5, algorithm, seed=3) as overlay:
        async with overlay.client(4, "pub") as publisher:
            async with _client(overlay, [0]) as first:
                sub = await first.subscribe(ACCEPT_ALL, kind="bindings", durable=True)
                assert sub.durable and len(sub.ticket) >= 24 and sub.expires > trio_ms()
                ident, ticket = sub.id, sub.ticket
                for event in events[:10]:
                    await publisher.publish(event)
                notes = await _take(sub, 10)
                assert [n.seq for n in notes] == list(range(1, 11))
                assert {n.event for n in notes} == {e.graph.value for e in events[:10]}
                assert all(n.solutions for n in notes)  # CSMA's were completed at the home
            # the subscriber is gone; the overlay keeps what it misses
            for event in events[10:25]:
                await publisher.publish(event)
            async with _client(overlay, [2]) as second:
                again = await second.resume(ident, ticket)   # after the last acknowledged
                assert again.kind == "bindings" and again.sparql == ACCEPT_ALL
                notes = await _take(again, 15)
                assert [n.seq for n in notes] == list(range(11, 26))
                assert [n.event for n in notes] == [e.graph.value for e in events[10:25]]  # publication order
                for event in events[25:]:
                    await publisher.publish(event)
                notes = await _take(again, 5)
                assert [n.seq for n in notes] == list(range(26, 31))
                with trio.move_on_after(5):
                    extra = await again.receive()
                    pytest.fail(f"a notification twice: {extra}")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_the_entry_peer_dies_and_the_client_fails_over_without_loss_or_duplicates(autojump_clock, algorithm):
    events = spread_events(40, "f")
    async with open_overlay(6, algorithm, seed=5) as overlay:
        entry = overlay.peers[3]
        lines: list[str] = []
        async with overlay.client(5, "pub") as publisher, \
                _client(overlay, [3, 1], on_event=lines.append) as subscriber:
            sub = await subscriber.subscribe(ACCEPT_ALL, kind="signal", durable=True)
            received = []

            async def listen() -> None:
                async for note in sub:
                    received.append(note)
                    if len(received) == 40:
                        return

            async with trio.open_nursery() as nursery:
                nursery.start_soon(listen)
                for i, event in enumerate(events):
                    if i == 15:
                        entry.stop()
                        await overlay.network.kill(entry.address)
                    await publisher.publish(event)
                with trio.fail_after(120):
                    while len(received) < 40:
                        await trio.sleep(0.5)
            assert [n.seq for n in received] == list(range(1, 41))
            assert sorted(n.event for n in received) == sorted(e.graph.value for e in events)
            assert subscriber.link.reconnects >= 1 and subscriber.address != entry.address
            assert any("reconnected to" in line for line in lines)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_the_home_dies_and_its_replica_keeps_the_mailbox(autojump_clock, algorithm):
    events = spread_events(30, "h")
    async with open_overlay(6, algorithm, seed=7) as overlay:
        async with _client(overlay, range(6)) as subscriber:
            sub = await subscriber.subscribe(ACCEPT_ALL, kind="signal", durable=True)
            home = next(p for p in overlay.peers if p.homes.boxes.get(sub.id) is not None)
            entry = next(i for i, p in enumerate(overlay.peers) if p is not home)
            async with overlay.client(entry, "pub") as publisher:
                got = []
                for event in events[:10]:
                    await publisher.publish(event)
                got += await _take(sub, 10)
                home.stop()   # (it may be the subscriber's entry peer too: then that fails over as well)
                await overlay.network.kill(home.address)
                for event in events[10:]:
                    await publisher.publish(event)
                got += await _take(sub, 20, seconds=120)
            assert [n.seq for n in got] == list(range(1, 31))
            assert {n.event for n in got} == {e.graph.value for e in events}
            standin = next(p for p in overlay.peers if p is not home and p.standins.holds(home.id) is not None)
            assert standin.standins.holds(home.id).homes.boxes.get(sub.id) is not None


async def test_leases_renew_and_expire_on_every_peer(autojump_clock):
    async with open_overlay(4, seed=9, lease_check_every=0.5, lease_grace=5, max_clock_offset=2) as overlay:
        async with overlay.client(0) as client:
            sub = await client.subscribe(ACCEPT_ALL, kind="signal", durable=True, lease=20)
            kept = await client.subscribe(ACCEPT_ALL, kind="signal", durable=True, lease=20)
            before = sub.expires
            await trio.sleep(10)
            renewed = await kept.renew(60)
            assert renewed > before + 40_000
            await trio.sleep(15)   # `sub` expired 5 s ago, `kept` lives
            with trio.fail_after(5):
                with pytest.raises(ClientError) as info:
                    async for _ in sub:
                        pass
            assert info.value.code is ErrorCode.GONE and "expired" in info.value.message
            status = await client.status()
            assert sum(p.subscriptions for p in status.peers) == len(status.peers)  # `kept` only
            with pytest.raises(ClientError) as info:
                await client.resume(sub.id, sub.ticket)
            assert info.value.code is ErrorCode.GONE and "expired" in info.value.message
            await client.publish(sample_events(1)[0])
            assert (await kept.receive()).seq == 1


async def test_cancel_from_another_connection_with_the_ticket_and_every_refusal(autojump_clock):
    async with open_overlay(3, seed=11) as overlay:
        async with overlay.client(0) as owner, overlay.client(2) as other:
            sub = await owner.subscribe(ACCEPT_ALL, kind="signal", durable=True)
            await other.publish(sample_events(1)[0])
            assert (await sub.receive()).seq == 1
            refusals = {
                "wrong ticket": (other.resume(sub.id, "guess"), ErrorCode.FORBIDDEN),
                "unknown id": (other.resume("0" * 32, sub.ticket), ErrorCode.NOT_FOUND),
                "from the future": (other.resume(sub.id, sub.ticket, after=99), ErrorCode.BAD_REQUEST),
                "renew, wrong ticket": (other.renew(sub.id, "guess", 10), ErrorCode.FORBIDDEN),
                "cancel, wrong ticket": (other.unsubscribe(sub.id, "guess"), ErrorCode.FORBIDDEN),
            }
            for what, (attempt, code) in refusals.items():
                with pytest.raises(ClientError) as info:
                    await attempt
                assert info.value.code is code, (what, info.value)
            sub.ack()
            await trio.sleep(1)
            with pytest.raises(ClientError) as info:  # notification 1 was acknowledged, so it is gone
                await other.resume(sub.id, sub.ticket, after=0)
            assert info.value.code is ErrorCode.GONE and "resume after 1" in info.value.message
            await other.unsubscribe(sub.id, sub.ticket)
            with trio.fail_after(30), pytest.raises(ClientError) as info:
                await sub.receive()
            assert info.value.code is ErrorCode.GONE and "cancelled" in info.value.message
            status = await other.status()
            assert sum(p.subscriptions for p in status.peers) == 0


async def test_an_overflowing_mailbox_says_what_was_dropped(autojump_clock):
    events = sample_events(12)
    async with open_overlay(3, seed=13, retain_count=5) as overlay:
        async with overlay.client(1) as publisher:
            async with overlay.client(0) as first:
                sub = await first.subscribe(ACCEPT_ALL, kind="signal", durable=True)
                ident, ticket = sub.id, sub.ticket
            for event in events:
                await publisher.publish(event)
            async with overlay.client(2) as second:
                again = await second.resume(ident, ticket, after=0)
                gap, *rest = await _take(again, 6)
                assert gap.kind == "gap" and tuple(gap.gap) == (1, 7) and "dropped" in gap.error
                assert [n.seq for n in rest] == [8, 9, 10, 11, 12]
                assert [n.event for n in rest] == [e.graph.value for e in events[7:]]
            async with connect(overlay.peers[0].address, transport=overlay.network) as admin:
                (info,) = [i for i in await admin.subscriptions() if i.id == ident]
                assert info.durable and info.last == info.acked == 12 and info.dropped == 7 and info.retained == 0
                assert "ticket" not in info.to_wire()


async def test_a_non_durable_subscription_ends_loudly_when_its_entry_peer_dies(autojump_clock):
    async with open_overlay(4, seed=15) as overlay:
        async with _client(overlay, [2, 0]) as client:
            sub = await client.subscribe(ACCEPT_ALL, kind="signal")
            overlay.peers[2].stop()
            await overlay.network.kill(overlay.peers[2].address)
            with trio.fail_after(30), pytest.raises(ClientError) as info:
                await sub.receive()
            assert info.value.code is ErrorCode.UNREACHABLE and "durable=True" in info.value.message
            assert len((await client.status()).peers) == 4   # the client itself went on elsewhere


async def test_a_mailbox_moves_with_its_zone_when_peers_join_and_leave(autojump_clock):
    events = spread_events(30, "m")
    async with open_overlay(2, seed=17) as overlay:
        async with _client(overlay, [0, 1]) as subscriber:
            sub = await subscriber.subscribe(ACCEPT_ALL, kind="signal", durable=True)
            async with _client(overlay, [0, 1]) as publisher:
                for event in events[:10]:
                    await publisher.publish(event)
            got = await _take(sub, 10)
            for _ in range(4):
                await overlay.add_peer()
            homes = [p for p in overlay.peers if p.homes.boxes.get(sub.id) and p.homes.owns(p.homes.boxes.get(sub.id))]
            assert len(homes) == 1
            home = homes[0]
            others = [i for i, p in enumerate(overlay.peers) if p is not home]
            async with _client(overlay, others) as publisher:
                for event in events[10:20]:
                    await publisher.publish(event)
                got += await _take(sub, 10)
                async with connect(home.address, transport=overlay.network) as admin:
                    await admin.leave()   # a graceful leave hands the mailbox to a neighbour
                for event in events[20:]:
                    await publisher.publish(event)
                got += await _take(sub, 10)
            assert [n.seq for n in got] == list(range(1, 31))
            assert {n.event for n in got} == {e.graph.value for e in events}
            (now,) = [p for p in overlay.peers if p is not home and p.homes.boxes.get(sub.id)
                      and p.homes.owns(p.homes.boxes.get(sub.id))]


async def test_a_notification_kept_while_its_home_hands_its_zone_over_is_not_lost(autojump_clock):
    """A home leaving gracefully snapshots its mailboxes and hands them to its heir. A
    notification arriving after the snapshot used to be kept (and acknowledged to its
    notifier) in the leaving copy, and was lost with it. Mailbox writes now wait for the zone
    change: that one fails once the home stops, and the notifier keeps it at the heir.
    (The admin client that asks for the leave runs on the real wall clock, an hour and more
    ahead of the overlay's mock clock: the peers' hybrid clocks jump an hour ahead, which the
    notifier's retries must survive: they used to be abandoned at once, or wait that hour.)"""
    events = spread_events(12, "h")
    async with open_overlay(2, seed=17) as overlay:  # two peers: either can always leave to the other
        async with _client(overlay, range(2)) as subscriber:
            sub = await subscriber.subscribe(ACCEPT_ALL, kind="signal", durable=True)
            (home,) = [p for p in overlay.peers if p.homes.boxes.get(sub.id) and p.homes.owns(p.homes.boxes.get(sub.id))]
            others = [i for i, p in enumerate(overlay.peers) if p is not home]
            snapshot_taken, go_on = trio.Event(), trio.Event()
            handover = home.membership._handover

            async def slow_handover(zone):
                taken = await handover(zone)
                snapshot_taken.set()
                await go_on.wait()  # the leave goes on once a publication reached this home
                return taken

            home.membership._handover = slow_handover
            heir = overlay.peers[others[0]]
            # the events published during the handover are stored, claimed and matched at the heir only
            # (stores at the leaving home wait for its zone change); their notifications go home
            space = heir.state.space
            events[4:8] = [e for e in spread_events(200, "heir")
                           if all(heir.state.zone.contains(space.point(q)) for q in e.quads)
                           and heir.state.zone.contains(claim_point(space, e.graph.value))][:4]
            assert len(events[4:8]) == 4
            async with _client(overlay, others) as publisher:
                for event in events[:4]:
                    await publisher.publish(event)
                got = await _take(sub, 4)
                async with trio.open_nursery() as nursery:
                    async def leave() -> None:
                        async with connect(home.address, transport=overlay.network) as admin:
                            await admin.leave()

                    nursery.start_soon(leave)
                    await snapshot_taken.wait()
                    kept = home.counters["notifications_kept"]
                    for event in events[4:8]:  # notified while the home hands its zone over
                        await publisher.publish(event)
                    await trio.sleep(5)
                    assert home.counters["notifications_kept"] == kept, "kept after the snapshot"
                    go_on.set()
                for event in events[8:]:
                    await publisher.publish(event)
                got += await _take(sub, 8)
            assert [n.seq for n in got] == list(range(1, 13))
            assert {n.event for n in got} == {e.graph.value for e in events}


@pytest.mark.parametrize("kind", ["bindings", "event"])
async def test_a_durable_csma_subscription_whose_home_is_outside_its_box_is_notified(kind, autojump_clock):
    """Under CSMA the home completes the notification (gathers the event, evaluates the query)
    and is seldom a peer of the subscription's box: it reads the subscription from its mailbox.
    (It used to answer "unknown here", and the notifier then removed the subscription.)"""
    p0, p1 = "http://ex.org/d0", "http://ex.org/d1"
    text = f"SELECT ?x WHERE {{ GRAPH ?g {{ ?s <{p0}> ?o . ?o <{p1}> ?x }} }}"
    async with open_overlay(8, "csma", seed=4) as overlay:
        async with overlay.client(0, "pub") as publisher, overlay.client(1, "sub") as client:
            def home(sub):
                return next(p.state.id for p in overlay.peers if p.state.zone.contains(p.state.space.key_point(sub.id)))

            subs = [await client.subscribe(text, kind=kind, durable=True)]
            box = {p.state.id for p in overlay.peers if p.subscriptions.get(subs[0].id) is not None}
            assert len(box) < len(overlay.peers)
            while sum(home(s) not in box for s in subs) < 2 and len(subs) < 60:  # ids are random
                subs.append(await client.subscribe(text, kind=kind, durable=True))
            assert sum(home(s) not in box for s in subs) >= 2  # the case this is about
            g = event_graph("durable-csma", 1, 1)
            event = CompoundEvent(g, (make_quad(g, IRI("http://ex.org/a"), IRI(p0), IRI("http://ex.org/b")),
                                      make_quad(g, IRI("http://ex.org/b"), IRI(p1), Literal("1"))))
            await publisher.publish(event)
            for sub in subs:
                with trio.fail_after(30):
                    note = await sub.receive()
                assert note.event == g.value
                assert (note.solutions[0]["x"] == Literal("1")) if kind == "bindings" else set(note.quads) == set(event.quads)
            assert all({p.state.id for p in overlay.peers if p.subscriptions.get(s.id)} == box for s in subs)
