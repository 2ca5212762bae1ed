"""The scenario runner end to end on tiny points: real peers, logs in the schema, and the
SSH host-list path through a shim that runs the remote command on this machine."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from experiments.hosts import SshCluster, read_hosts
from experiments.logs import read_log
from experiments.scenarios import SCENARIOS, Point, run_point

pytestmark = pytest.mark.processes


@pytest.mark.parametrize("algorithm", ["osma", "csma"])
async def test_a_run_writes_complete_logs(tmp_path, algorithm):
    point = Point(x=2, peers=2, events=30, subscriptions=2)
    result = await run_point("fig2c", point, 0, algorithm, tmp_path, hosts=None, concurrency=3, timeout=60,
                             seed=1, progress=lambda m: None)
    assert result["notified"] == result["expected"] == 30
    records = list(read_log(tmp_path / "fig2c" / "x=2" / "run=0" / f"{algorithm}-run.jsonl"))
    kinds = [r["type"] for r in records]
    assert kinds.count("publication") == 30 and kinds.count("notification") == 30
    assert kinds.count("peer") == 2 and kinds.count("run") == 1
    assert {r["subscription"] for r in records if r["type"] == "notification"} == {"s0", "s1"}


def test_every_scenario_defines_local_and_paper_sweeps():
    for name, scales in SCENARIOS.items():
        assert len(scales["local"]()) >= 3 and len(scales["paper"]()) >= 3, name


async def test_host_list_runs_peers_through_ssh(tmp_path):
    shim = tmp_path / "fake-ssh"
    shim.write_text(f"#!/bin/sh\nshift\nexec /bin/sh -c \"$1\"\n")  # drop the host, run the command here
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("# two hosts\n127.0.0.1\n\n127.0.0.1  # same machine, other port\n")
    hosts = read_hosts(hosts_file)
    assert hosts == ["127.0.0.1", "127.0.0.1"]
    cluster = SshCluster(hosts[:1], port=0, ssh_command=[str(shim)], data_root=str(tmp_path / "data"),
                         remote_dir=str(Path(__file__).resolve().parents[2]))
    command = cluster.command(0)
    assert command[0] == str(shim) and "--advertise" in command[-1]
    cluster.start()
    try:
        host, port = cluster.entry.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        from eventcloud.client import connect

        async with connect(cluster.entry) as client:
            assert len((await client.status()).peers) == 1
    finally:
        cluster.stop()
