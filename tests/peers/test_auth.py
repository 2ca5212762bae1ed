"""Peers prove the cluster secret to each other; a client gets client operations only; admin
operations need the admin token. Tried as an attacker would, on a real in-process overlay."""

from __future__ import annotations

import pytest
import trio

from eventcloud.client import ClientError, connect
from eventcloud.errors import ErrorCode
from eventcloud.net.rpc import RpcConnection
from eventcloud.testing import open_overlay
from eventcloud.wire import messages as m
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.ops import Op
from tests.helpers import sample_events

SECRET = b"correct horse battery staple"
ACCEPT_ALL = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"


async def test_an_overlay_with_a_secret_works_for_its_peers_and_clients(autojump_clock):
    async with open_overlay(5, secret=SECRET, seed=1) as overlay:
        async with overlay.client(0) as sub_client, overlay.client(3) as publisher:
            sub = await sub_client.subscribe(ACCEPT_ALL, kind="signal")
            for event in sample_events(10):
                await publisher.publish(event)
            got = set()
            with trio.fail_after(30):
                while len(got) < 10:
                    got.add((await sub.receive()).event)
            assert await publisher.count() == 50
            assert len((await publisher.status()).peers) == 5


async def test_an_unauthenticated_client_cannot_use_peer_operations(autojump_clock):
    async with open_overlay(3, secret=SECRET, admin_token="tok-12345", seed=2) as overlay:
        async with overlay.client(0) as victim, overlay.client(1) as attacker:
            sub = await victim.subscribe(ACCEPT_ALL, kind="signal")
            attempts = {
                Op.ROUTE: m.Route((0, 0, 0, 0), Op.REMOVE_SUB.value, m.SubscriptionId(sub.id).to_wire()),
                Op.NOTIFY: m.Notify(sub.id, "http://ex/forged", 1, 1),
                Op.JOIN_COMMIT: m.JoinCommit("fake"),
                Op.NEIGHBOURS: m.Announce(removed=(overlay.peers[0].id,)),
                Op.TABLE: m.Empty(),
                Op.REPLICATE: m.Replicate("x", 0, ()),
                Op.DELIVER: m.Deliver(()),
            }
            for op, body in attempts.items():
                with pytest.raises(ClientError) as info:
                    await attacker.call(op, body)
                assert info.value.code is ErrorCode.FORBIDDEN and "peers only" in info.value.message, op
            for op, body in {Op.LEAVE: m.Empty(), Op.DELETE: m.Delete(sample_events(1)[0].graph)}.items():
                with pytest.raises(ClientError) as info:
                    await attacker.call(op, body)
                assert info.value.code is ErrorCode.FORBIDDEN and "admin token" in info.value.message
            with pytest.raises(ClientError, match="wrong admin token"):
                await attacker.call(Op.ADMIN, m.Admin("guess"))
            # nothing was affected: the subscription still delivers, every peer still serves
            await attacker.publish(sample_events(1)[0])
            with trio.fail_after(30):
                assert (await sub.receive()).event == sample_events(1)[0].graph.value
            assert len((await attacker.status()).peers) == 3
        async with connect(overlay.peers[0].address, transport=overlay.network, admin_token="tok-12345") as admin:
            assert await admin.delete(sample_events(1)[0].graph) == 5


async def test_a_client_cannot_push_peer_messages_either(autojump_clock):
    """Commits travel between peers as pushes (no reply): one pushed by a client is refused
    and counted, nothing is committed, and the connection still serves the client."""
    async with open_overlay(3, secret=SECRET, seed=2) as overlay:
        peer = overlay.peers[1]
        stream = await overlay.network.connect(peer.state.address)
        conn = RpcConnection(stream, HybridClock(lambda: int(trio.current_time() * 1000)), name="attacker")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.run)
            committed = peer.counters["events_committed"]
            await conn.push(Op.COMMIT, m.Commit(("http://ex/g",)))
            await conn.push(Op.NOTIFY, m.Notifies(()))  # not a push at all
            with trio.fail_after(10):
                while peer.counters["pushes_failed"] < 2:
                    await trio.sleep(0.05)
            assert peer.counters["events_committed"] == committed
            assert (await conn.call(Op.PING, m.Empty()))["id"] == peer.state.id
            nursery.cancel_scope.cancel()


async def test_a_peer_with_a_wrong_secret_is_refused_and_so_is_a_forged_proof(autojump_clock):
    from eventcloud.errors import RemoteError, RequestError
    from eventcloud.net.rpc import open_connection
    from eventcloud.wire.hlc import HybridClock

    async with open_overlay(2, secret=SECRET, seed=3) as overlay:
        with pytest.raises(RequestError, match="same cluster secret|not a peer of this overlay") as info:
            await overlay.add_peer(secret=b"a guess of the secret")
        assert info.value.code is ErrorCode.FORBIDDEN
        assert len(overlay.peers) == 2
        # the attacker's side of the handshake: it cannot compute the proof, and a forged one
        # is refused, counted and disconnected
        stream = await overlay.network.connect(overlay.peers[0].address)
        async with open_connection(stream, HybridClock(lambda: 0), name="attacker") as conn:
            challenge = m.Challenge.from_wire(await conn.call(Op.HELLO, m.Hello("00" * 16)))
            assert challenge.challenge and challenge.proof  # the server proves itself; learns nothing
            with pytest.raises(RemoteError, match="wrong proof of the cluster secret"):
                await conn.call(Op.AUTH, m.Auth("fake", "ab" * 32))
            with pytest.raises(Exception):
                await conn.call(Op.TABLE, m.Empty())  # disconnected
        assert overlay.peers[0].counters["failed_peer_auth"] == 1
        # a replayed challenge does not serve twice: AUTH without a fresh HELLO is refused
        stream = await overlay.network.connect(overlay.peers[0].address)
        async with open_connection(stream, HybridClock(lambda: 0), name="replayer") as conn:
            with pytest.raises(RemoteError, match="wrong proof"):
                await conn.call(Op.AUTH, m.Auth("fake", "ab" * 32))
        assert overlay.peers[0].counters["failed_peer_auth"] == 2
        async with overlay.client() as client:
            assert len((await client.status()).peers) == 2
