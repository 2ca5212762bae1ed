"""An optional publish policy: publish tokens bound to graph IRI namespaces, checked at the entry
peer, so that one publisher cannot squat another's namespace. Without a token nothing is
published; a token publishes only under its prefixes; a wrong token is refused and counted;
the admin token publishes anywhere; without a policy anyone publishes anywhere."""

from __future__ import annotations

import json

import pytest

from eventcloud.cli.credentials import CredentialError, read_publish_policy
from eventcloud.client import ClientError, connect
from eventcloud.rdf.model import IRI, CompoundEvent, Literal, make_quad
from eventcloud.testing import open_overlay

POLICY = {"token-of-alice": ("http://alice.example/",), "token-of-bob": ("http://bob.example/", "urn:bob:")}


def event(graph: str) -> CompoundEvent:
    g = IRI(graph)
    return CompoundEvent(g, (make_quad(g, IRI("http://x/s"), IRI("http://x/p"), Literal("1")),))


async def test_a_publish_token_publishes_only_under_its_namespaces(autojump_clock):
    async with open_overlay(3, publish_policy=POLICY, admin_token="admin-12345") as overlay:
        address, network = overlay.peers[1].address, overlay.network
        async with connect(address, transport=network, publish_token="token-of-alice") as alice:
            await alice.publish(event("http://alice.example/e1"))
            with pytest.raises(ClientError, match="outside the namespaces your publish token allows") as info:
                await alice.publish_batch([event("http://alice.example/e2"), event("http://bob.example/e1")])
            assert info.value.code == "forbidden" and "http://alice.example/" in info.value.message
        async with connect(address, transport=network) as nobody:
            with pytest.raises(ClientError, match="publishing needs a publish token") as info:
                await nobody.publish(event("http://bob.example/e1"))
            assert info.value.code == "forbidden"
            assert await nobody.count() == 1   # reading needs no token
        with pytest.raises(ClientError, match="unknown publish token"):
            async with connect(address, transport=network, publish_token="guessed-token") as guesser:
                await guesser.publish(event("http://bob.example/e1"))
        async with connect(address, transport=network, publish_token="token-of-bob") as bob:
            await bob.publish(event("urn:bob:e1"))
        async with connect(address, transport=network, admin_token="admin-12345") as admin:
            await admin.publish(event("http://anywhere.example/e1"))
            assert await admin.count() == 3
        assert overlay.peers[1].counters["failed_publish_auth"] == 1


async def test_without_a_policy_a_publish_token_changes_nothing(autojump_clock):
    async with open_overlay(2) as overlay:
        async with connect(overlay.peers[0].address, transport=overlay.network, publish_token="whatever-1") as client:
            await client.publish(event("http://anywhere.example/e1"))


def test_the_policy_file_is_checked(tmp_path):
    good = tmp_path / "policy.json"
    good.write_text(json.dumps({"token-of-alice": ["http://alice.example/"], "token-of-bob": "urn:bob:"}))
    good.chmod(0o600)
    assert read_publish_policy(good) == {"token-of-alice": ("http://alice.example/",), "token-of-bob": ("urn:bob:",)}
    for text, why in (("[1]", "JSON object"), ("{", "not JSON"), ('{"short": ["x"]}', "at least 8 characters"),
                      ('{"long-enough": []}', "list of graph IRI prefixes")):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(CredentialError, match=why):
            read_publish_policy(bad)


async def test_a_publish_token_is_a_credential_for_the_reserved_slots(autojump_clock):
    """Connections without credentials leave reserved slots free; a newcomer entering them on
    probation gets in with a publish token (or the secret, or the admin token), not without."""
    # 4 slots, one of them reserved (at most a quarter is)
    async with open_overlay(1, publish_policy=POLICY, max_connections=4, reserved_connections=2) as overlay:
        address, network = overlay.peers[0].address, overlay.network
        async with connect(address, transport=network) as one, connect(address, transport=network) as two, \
                connect(address, transport=network) as three:
            for client in (one, two, three):   # anonymous, holding subscriptions: nothing to evict
                await client.subscribe("SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }")
            with pytest.raises(ClientError, match="slots left are for peers") as info:
                async with connect(address, transport=network, reconnect=0) as nobody:
                    await nobody.count()
            assert info.value.code == "busy"
            async with connect(address, transport=network, publish_token="token-of-alice") as alice:
                await alice.publish(event("http://alice.example/reserved"))
