"""Real peer processes with a real etcd (Debian's etcd-server) as their ownership authority:
a crashed peer's zone is taken over only through the authority, a frozen one is deposed by it,
and nothing acknowledged is lost either way."""

from __future__ import annotations

import os
import signal

import pytest
import trio

from eventcloud.client import connect
from eventcloud.testing.etcd import EtcdCluster, etcd_binary
from peers.authority import EtcdAuthority, lease_ttl
from peers.supervisor import LocalCluster
from tests.helpers import assert_exact_neighbour_tables, spread_events

pytestmark = [pytest.mark.processes,
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (Debian's etcd-server)")]


async def _epochs(url: str) -> dict[str, int]:
    authority = EtcdAuthority(url)
    try:
        return {e.key.rsplit("/", 1)[1]: int(e.value) for e in await authority.scan("eventcloud/")
                if "/epoch/" in e.key}
    finally:
        await authority.aclose()


async def _settled(client, address: str, old_id: str, peers: int, seconds: float = 60):
    """Until a peer other than `old_id` serves at `address` and no peer is down (bounded)."""
    with trio.fail_after(seconds):
        while True:
            await trio.sleep(1)
            status = await client.status()
            at = [p for p in status.peers if p.address == address]
            if at and at[0].id != old_id and not any(p.down for p in status.peers) and len(status.peers) == peers:
                return status


async def _overlay_with_etcd(tmp_path, nursery_body) -> None:
    etcd = EtcdCluster(tmp_path / "etcd")
    await trio.to_thread.run_sync(etcd.start)
    cluster = LocalCluster(4, data_dir=tmp_path / "peers", seed=5, authority=etcd.url)
    try:
        await trio.to_thread.run_sync(cluster.start)
        async with connect(cluster.entry, source="etcd") as client:
            events = spread_events(20, "before")
            for event in events:
                await client.publish(event)
            status = await client.status()
            epochs = await _epochs(etcd.url)
            assert {p.id for p in status.peers} <= set(epochs)   # every serving peer registered there
            events += await nursery_body(cluster, etcd, client, status, epochs)
            assert await client.count() == sum(len(e) for e in events)
            for event in events:
                assert len(await client.find(event.graph)) == len(event)
    finally:
        await trio.to_thread.run_sync(cluster.stop)
        await trio.to_thread.run_sync(etcd.stop)


async def test_with_etcd_a_killed_peer_is_taken_over_through_the_authority_losing_nothing(tmp_path):
    async def kill(cluster, etcd, client, status, epochs):
        killed = next(p for p in status.peers if p.address == cluster.addresses[3])
        os.kill(cluster.processes[3].pid, signal.SIGKILL)
        more = spread_events(10, "after-kill")
        with trio.fail_after(60):
            for event in more:
                await client.publish(event)
        with trio.fail_after(60):   # the replica claimed the zone at etcd once the lease lapsed
            while (await _epochs(etcd.url)).get(killed.id) != epochs[killed.id] + 1:
                await trio.sleep(0.5)
        return more

    await _overlay_with_etcd(tmp_path, kill)


async def test_with_etcd_a_frozen_peer_is_deposed_through_the_authority_and_rejoins_losing_nothing(tmp_path):
    async def freeze(cluster, etcd, client, status, epochs):
        frozen = next(p for p in status.peers if p.address == cluster.addresses[2])
        process = cluster.processes[2]
        os.kill(process.pid, signal.SIGSTOP)
        try:
            # past its lease (12 s at the default failure timeout; 36 s had it been extended, its
            # renewals slow) and the detection
            await trio.sleep(lease_ttl(3.0) + 6)
        finally:
            os.kill(process.pid, signal.SIGCONT)
        status = await _settled(client, cluster.addresses[2], frozen.id, peers=5)
        assert process.poll() is None   # the same process, serving again as a new peer
        assert (await _epochs(etcd.url))[frozen.id] == epochs[frozen.id] + 1
        ids = [p.id for p in status.peers]
        assert len(ids) == len(set(ids)) and frozen.id in ids   # its stand-in keeps the zone's id
        assert_exact_neighbour_tables(status)
        after = spread_events(10, "after-freeze")
        async with connect(cluster.addresses[2], source="again") as again:
            for event in after:
                await again.publish(event)
        return after

    await _overlay_with_etcd(tmp_path, freeze)
