"""Security with real peer processes: a cluster made by `eventcloud cluster` has a secret and an
admin token; an unauthenticated client and an impostor peer are refused and change nothing; a
TLS cluster serves TLS clients of the CLI."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
import trio

from eventcloud.client import ClientError, connect
from eventcloud.errors import ErrorCode
from eventcloud.wire import messages as m
from eventcloud.wire.ops import Op
from peers.supervisor import LocalCluster
from tests.helpers import sample_events
from tests.net.certificates import make_certificates

pytestmark = pytest.mark.processes
ACCEPT_ALL = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"


def cli(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eventcloud", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


async def test_an_unauthenticated_client_and_an_impostor_peer_change_nothing(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "c") as cluster:
        assert stat.S_IMODE(cluster.secret_file.stat().st_mode) == 0o600
        events = sample_events(20)
        with trio.fail_after(90):
            async with connect(cluster.entry) as victim, connect(cluster.addresses[1]) as attacker:
                sub = await victim.subscribe(ACCEPT_ALL, kind="signal")
                for event in events[:10]:
                    await attacker.publish(event)  # publishing is a client operation
                forged = {
                    Op.ROUTE: m.Route((0, 0, 0, 0), Op.REMOVE_SUB.value, m.SubscriptionId(sub.id).to_wire()),
                    Op.REMOVE_SUB: m.SubscriptionId(sub.id),
                    Op.NOTIFY: m.Notify(sub.id, "http://ex/forged", 1, 1),
                    Op.JOIN_SPLIT: m.JoinRequest("impostor", "127.0.0.1:1"),
                }
                for op, body in forged.items():
                    with pytest.raises(ClientError) as info:
                        await attacker.call(op, body)
                    assert info.value.code is ErrorCode.FORBIDDEN, op
                for op, body in {Op.LEAVE: m.Empty(), Op.DELETE: m.Delete(events[0].graph)}.items():
                    with pytest.raises(ClientError, match="admin token") as info:
                        await attacker.call(op, body)
                    assert info.value.code is ErrorCode.FORBIDDEN
                # an impostor peer without the secret cannot join
                impostor = cli("peer", "--listen", "127.0.0.1:0", "--join", cluster.entry, "--data-dir",
                               str(tmp_path / "impostor"), timeout=60)
                assert impostor.returncode == 1 and "cluster secret" in impostor.stderr, impostor.stderr
                assert "Traceback" not in impostor.stderr
                for event in events[10:]:
                    await attacker.publish(event)
                got = set()
                while len(got) < 20:
                    note = await sub.receive()
                    assert note.event != "http://ex/forged"
                    got.add(note.event)
                assert got == {e.graph.value for e in events}
                status = await victim.status()
                assert len(status.peers) == 3 and sum(p.quads for p in status.peers) == 100
        done = cli("delete", "--peer", cluster.entry, events[0].graph.value,
                   env={"EVENTCLOUD_ADMIN_TOKEN": cluster.admin_token})
        assert done.returncode == 0 and "deleted 5 quads" in done.stdout, done.stderr


def test_a_tls_cluster_serves_the_cli(tmp_path):
    ca, cert, key = make_certificates(tmp_path / "tls")
    with LocalCluster(2, data_dir=tmp_path / "c", tls=(cert, key, ca)) as cluster:
        done = cli("status", "--peer", cluster.entry, "--format", "json", "--tls-ca", str(ca))
        assert done.returncode == 0, done.stderr
        assert len(json.loads(done.stdout)["peers"]) == 2
        done = cli("status", "--peer", cluster.entry, env={"EVENTCLOUD_TLS_CA": str(tmp_path / "missing.pem")})
        assert done.returncode == 1 and "no such CA file" in done.stderr
        done = cli("status", "--peer", cluster.entry, "--tls")  # the system's CAs do not know ours
        assert done.returncode == 1 and "certificate was refused" in done.stderr, done.stderr
