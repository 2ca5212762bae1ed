"""Real peer processes started without --authority: the first hosts the overlay's ownership
authority (peers/authority/hosted.py), the peers joining it learn it and use it."""

from __future__ import annotations

import json
import signal

import pytest
import trio

from eventcloud.client import connect
from peers.authority import EtcdAuthority
from peers.supervisor import LocalCluster
from tests.helpers import assert_exact_neighbour_tables, spread_events, until_counted

pytestmark = pytest.mark.processes


async def test_a_lone_first_peer_hosts_the_authority_its_joiners_use_through_kills_and_its_own_restart(tmp_path):
    """No --authority anywhere (`LocalCluster(authority="hosted")`, as `eventcloud peer` run by
    hand): the first peer hosts the overlay's authority in its data directory, the others learn
    it when they join and register there. A killed peer's zone is taken over through it; the
    first peer killed and restarted with its command serves it again at the same URL with its
    keys, and nothing acknowledged is lost."""
    from eventcloud.cli.credentials import read_secret
    from peers.authority import authority_token

    cluster = LocalCluster(4, data_dir=tmp_path / "peers", seed=5, authority="hosted", log_level="info")
    try:
        await trio.to_thread.run_sync(cluster.start)
        hosted = json.loads((cluster.data_dir / "peer-0" / "authority.json").read_text())
        url = f"http://127.0.0.1:{hosted['port']}"
        assert all((cluster.data_dir / f"peer-{i}" / "authority.url").read_text().strip() == url for i in (1, 2, 3))
        token = authority_token(read_secret(cluster.secret_file))
        async with connect(cluster.entry, source="hosted") as client:
            events = spread_events(20, "before")
            await client.publish_batch(events)
            status = await client.status()
            authority = EtcdAuthority(url, token=token)
            epochs = {e.key.rsplit("/", 1)[1] for e in await authority.scan("eventcloud/") if "/epoch/" in e.key}
            await authority.aclose()
            assert {p.id for p in status.peers} <= epochs   # every peer registered at the hosted authority
            victim = next(p for p in status.peers if p.address == cluster.addresses[3])
            await trio.to_thread.run_sync(cluster.stop_peer, 3, signal.SIGKILL)
            events += spread_events(10, "after-kill")
            with trio.fail_after(90):
                await client.publish_batch(events[-10:])
            await trio.to_thread.run_sync(cluster.stop_peer, 0, signal.SIGKILL)
            await trio.sleep(1)
            await trio.to_thread.run_sync(cluster.start_peer, 0)
            hosted_again = json.loads((cluster.data_dir / "peer-0" / "authority.json").read_text())
            assert hosted_again["port"] == hosted["port"]
        async with connect(cluster.addresses[1], source="hosted-2") as client:
            events += spread_events(10, "after-restart")
            with trio.fail_after(90):
                await client.publish_batch(events[-10:])
            await until_counted(client, sum(len(e) for e in events), seconds=90)
            for event in events:
                assert len(await client.find(event.graph)) == len(event)
            status = await client.status()
            assert victim.id in {p.id for p in status.peers} and not any(p.down for p in status.peers)
            assert_exact_neighbour_tables(status)
    finally:
        await trio.to_thread.run_sync(cluster.stop)
