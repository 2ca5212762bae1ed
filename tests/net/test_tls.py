"""TLS on every connection, on real TCP sockets of 127.0.0.1: peers and clients with a CA
verify each other; a plain-text client, a client trusting another CA and a silent one are
refused with a clear error, and the peer keeps serving."""

from __future__ import annotations

import pytest
import trio

from eventcloud.client import ClientError, connect
from eventcloud.errors import ErrorCode
from eventcloud.net.tls import TLSConfigError, client_context, server_context
from peers.config import PeerConfig
from peers.runtime import run_peer
from tests.helpers import sample_events
from tests.net.certificates import make_certificates

ACCEPT_ALL = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("tls"))


async def _start(nursery, certificates, join=None, **knobs):
    ca, cert, key = certificates
    config = PeerConfig(listen="127.0.0.1:0", join=join, tls_cert=cert, tls_key=key, tls_ca=ca,
                        retry_window=2.0, **knobs)
    return await nursery.start(run_peer, config)


async def test_a_tls_overlay_serves_tls_clients(certificates):
    ca = certificates[0]
    async with trio.open_nursery() as nursery:
        first = await _start(nursery, certificates, secret=b"s" * 32)
        second = await _start(nursery, certificates, join=first.address, secret=b"s" * 32)
        third = await _start(nursery, certificates, join=second.address, secret=b"s" * 32)
        with trio.fail_after(30):
            async with connect(first.address, tls=ca) as subscriber, connect(third.address, tls=ca) as publisher:
                sub = await subscriber.subscribe(ACCEPT_ALL, kind="signal")
                for event in sample_events(5):
                    await publisher.publish(event)
                got = {(await sub.receive()).event for _ in range(5)}
                assert got == {e.graph.value for e in sample_events(5)}
                assert len((await publisher.status()).peers) == 3
        nursery.cancel_scope.cancel()


async def test_plain_wrong_ca_and_silent_clients_are_refused(certificates, tmp_path):
    other_ca = make_certificates(tmp_path / "other", name="other")[0]
    async with trio.open_nursery() as nursery:
        peer = await _start(nursery, certificates, frame_timeout=1.0)
        with trio.fail_after(30):
            with pytest.raises(ClientError) as info:  # plain text against a TLS peer
                async with connect(peer.address, publish_retry=0) as client:
                    await client.status()
            assert info.value.code is ErrorCode.UNREACHABLE and "--tls-ca" in info.value.message
            with pytest.raises(ClientError, match="certificate was refused") as info:
                async with connect(peer.address, tls=other_ca):
                    pass
            assert info.value.code is ErrorCode.UNREACHABLE
            # a connection that never starts the handshake is dropped after the frame timeout
            stream = await trio.open_tcp_stream("127.0.0.1", int(peer.address.rpartition(":")[2]))
            assert await stream.receive_some(100) == b""
            async with connect(peer.address, tls=certificates[0]) as client:
                assert len((await client.status()).peers) == 1
        nursery.cancel_scope.cancel()


def test_unusable_tls_files_are_named(certificates, tmp_path):
    ca, cert, key = certificates
    with pytest.raises(TLSConfigError, match="no such file"):
        server_context(tmp_path / "missing.pem", key)
    with pytest.raises(TLSConfigError, match="cannot use the certificate"):
        server_context(cert, ca)  # a certificate is not a key
    with pytest.raises(TLSConfigError, match="CA file"):
        client_context(tmp_path / "missing.pem")
    with pytest.raises(ValueError, match="both a certificate"):
        PeerConfig(tls_cert=cert)
