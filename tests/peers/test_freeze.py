"""A peer process frozen (SIGSTOP) past the failure timeout has its zone taken over by its
replica; when it runs again it must not go on serving that zone beside the stand-in (two
owners of one zone split its data, and writes it acknowledged would be lost): it steps down
and rejoins as a new peer on the same address, and nothing acknowledged is lost."""

from __future__ import annotations

import os
import signal

import pytest
import trio

from eventcloud.client import connect
from peers.supervisor import LocalCluster
from tests.helpers import assert_exact_neighbour_tables, spread_events

pytestmark = pytest.mark.processes


async def test_a_peer_frozen_past_the_failure_timeout_steps_down_and_rejoins(tmp_path):
    cluster = LocalCluster(3, data_dir=tmp_path, seed=3)  # the default 3 s failure timeout
    await trio.to_thread.run_sync(cluster.start)
    try:
        async with connect(cluster.entry, source="freeze") as client:
            before = spread_events(10, "before")
            for event in before:
                await client.publish(event)
            status = await client.status()
            frozen = next(p for p in status.peers if p.address == cluster.addresses[2])
            process = cluster.processes[2]
            os.kill(process.pid, signal.SIGSTOP)
            try:
                await trio.sleep(8)  # its replica takes its zone over meanwhile
            finally:
                os.kill(process.pid, signal.SIGCONT)
            with trio.fail_after(40):
                while True:
                    await trio.sleep(1)
                    status = await client.status()
                    at = [p for p in status.peers if p.address == cluster.addresses[2]]
                    if at and at[0].id != frozen.id and not any(p.down for p in status.peers):
                        break
            assert process.poll() is None  # the same process, serving again
            ids = [p.id for p in status.peers]
            assert frozen.id in ids and len(ids) == len(set(ids)) == 4  # the stand-in keeps the zone's id
            assert_exact_neighbour_tables(status)
            async with connect(cluster.addresses[2], source="after") as again:  # through the rejoined peer
                after = spread_events(10, "after")
                for event in after:
                    await again.publish(event)
            assert await client.count() == sum(len(e) for e in before + after)
            for event in before + after:
                assert len(await client.find(event.graph)) == len(event)
    finally:
        await trio.to_thread.run_sync(cluster.stop)
