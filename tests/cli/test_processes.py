"""Real peer processes on 127.0.0.1 (port 0): the CLI, TCP, on-disk stores and restarts."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pyoxigraph
import pytest
import trio

from eventcloud.client import connect
from eventcloud.rdf.files import write_nquads
from peers.supervisor import LocalCluster
from tests.helpers import COUNT, count_of, sample_events

pytestmark = pytest.mark.processes


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eventcloud", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def cluster(tmp_path):
    # a restart here must find its zone untaken, however loaded the machine: no takeover within 60 s
    with LocalCluster(4, data_dir=tmp_path / "cluster", extra=["--failure-timeout", "60"]) as running:
        yield running


async def test_cli_publish_query_status_and_restart(cluster, tmp_path):
    events = sample_events(200)
    path = tmp_path / "events.nq"
    with open(path, "w") as handle:
        write_nquads(events, handle)
    done = cli("publish", "--peer", cluster.entry, str(path))
    assert done.returncode == 0, done.stderr
    assert "published 200 events (1,000 quads)" in done.stdout
    done = cli("query", "--peer", cluster.addresses[2], "--format", "json", COUNT)
    assert done.returncode == 0, done.stderr
    assert count_of(json.loads(done.stdout)) == 1000
    done = cli("find", "--peer", cluster.entry, "-p", "<http://example.org/p1>", "--count")
    assert done.returncode == 0 and done.stdout.strip() == "200", done.stderr
    graph = events[7].graph.value
    done = cli("find", "--peer", cluster.entry, "-g", f"<{graph}>")
    assert sorted(done.stdout.splitlines()) == sorted(q.n_quads() for q in events[7].quads)
    done = cli("delete", "--peer", cluster.entry, graph)  # the cluster has an admin token
    assert done.returncode == 1 and "deleting an event needs the overlay's admin token" in done.stderr, done.stderr
    assert "`eventcloud delete --admin-token-file FILE" in done.stderr and "Traceback" not in done.stderr
    assert "'delete'" not in done.stderr   # no wire operation names
    done = cli("delete", "--peer", cluster.entry, graph, "--admin-token-file", str(cluster.admin_token_file))
    assert done.returncode == 0 and "deleted 5 quads" in done.stdout
    assert cli("find", "--peer", cluster.entry, "--count").stdout.strip() == "995"
    assert cli("publish", "--peer", cluster.entry, str(path)).returncode == 0  # republish: back to 1000
    done = cli("find", "--peer", cluster.entry, "-s", "not-a-term")
    assert done.returncode == 2 and "not an N-Triples" in done.stderr
    # the whole store out, streamed: N-Quads on stdout, TriG to a file; both parse back to every quad
    everything = {q for e in events for q in e.quads}
    done = cli("dump", "--peer", cluster.entry)
    assert done.returncode == 0 and sorted(done.stdout.splitlines()) == sorted(q.n_quads() for q in everything)
    done = cli("dump", "--peer", cluster.entry, "--format", "trig", "--output", str(tmp_path / "all.trig"))
    assert done.returncode == 0 and "dumped 1,000 quads to" in done.stderr, done.stderr
    assert len(set(pyoxigraph.parse(path=str(tmp_path / "all.trig"), format=pyoxigraph.RdfFormat.TRIG))) == 1000
    done = cli("dump", "--peer", cluster.entry, "--output", str(tmp_path / "missing" / "x.nq"))
    assert done.returncode == 1 and "cannot write" in done.stderr and "Traceback" not in done.stderr
    done = cli("status", "--peer", cluster.entry, "--format", "json")
    status = json.loads(done.stdout)
    assert len(status["peers"]) == 4 and status["partition"] is True
    assert sum(p["quads"] for p in status["peers"]) == 1000

    # SIGTERM a peer that holds data, restart it with the same command: same count.
    index = max(range(1, 4), key=lambda i: next(p["quads"] for p in status["peers"] if p["address"] == cluster.addresses[i]))
    old_address = cluster.addresses[index]
    assert cluster.stop_peer(index) == 0
    assert cluster.start_peer(index) == old_address  # same command, same port (it is free)
    async with connect(cluster.entry) as client:
        with trio.fail_after(30):
            while True:  # neighbours learn the restarted peer's new port from its announcement
                try:
                    assert count_of(await client.query(COUNT)) == 1000
                    break
                except Exception:
                    await trio.sleep(0.2)
        status2 = await client.status()
    assert len(status2.peers) == 4


async def test_garbage_on_a_peer_port_leaves_it_serving(cluster):
    host, port = cluster.entry.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"\xff" * 64 + b"GET / HTTP/1.1\r\n\r\n")
        sock.settimeout(5)
        reply = sock.recv(65536)
        assert reply  # an error frame, then the peer closes this connection
        assert sock.recv(65536) == b""
    async with connect(cluster.entry) as client:
        await client.publish(sample_events(1)[0])
        assert await client.count() == 5


def test_cli_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.nq"
    bad.write_text('<http://a> <http://b> "unterminated <http://g> .\n')
    done = cli("publish", "--peer", "127.0.0.1:1", str(bad))
    assert done.returncode == 1 and "bad.nq:1" in done.stderr and "nothing was published" in done.stderr
    good = tmp_path / "good.nq"
    good.write_text("<http://a> <http://b> <http://c> <http://g> .\n")
    done = cli("publish", "--peer", "127.0.0.1:1", str(good))
    assert done.returncode == 1 and "cannot reach 127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr
    done = cli("peer", "--listen", "127.0.0.1:0", "--join", "127.0.0.1:1", "--data-dir", str(tmp_path / "p"))
    assert done.returncode == 1 and "cannot join through 127.0.0.1:1" in done.stderr
    done = cli("query", "--peer", "nonsense", "SELECT * {}")
    assert done.returncode == 2 and "expected HOST:PORT" in done.stderr


def test_cluster_command_prints_the_entry_address_first_and_stops_cleanly(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "cluster", "--peers", "2", "--port", "0",
                             "--data-dir", str(tmp_path / "c")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = proc.stdout.readline().strip()
        host, port = first.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        done = cli("status", "--peer", first)
        assert "zones partition the space: yes (2 zones" in done.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0


def test_stop_with_stdin_needs_a_pipe(tmp_path):
    done = subprocess.run([sys.executable, "-m", "eventcloud", "peer", "--stop-with-stdin", "--data-dir",
                           str(tmp_path / "p")], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--stop-with-stdin needs standard input to be a pipe" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_peers_of_a_killed_cluster_stop_instead_of_serving_on_as_orphans(tmp_path):
    """kill -9 of `eventcloud cluster` gives it no chance to stop its peers; they notice their
    stdin pipe closing and stop as on SIGTERM (each in a session of its own, so nothing else would)."""
    proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "cluster", "--peers", "2", "--open",
                             "--data-dir", str(tmp_path / "c")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        entry = proc.stdout.readline().strip()
        status = json.loads(cli("status", "--peer", entry, "--format", "json").stdout)
        addresses = [peer["address"] for peer in status["peers"]]
        assert len(addresses) == 2
    finally:
        proc.kill()
    # the peers share the cluster's stderr: it reaches its end once both have exited
    _, err = proc.communicate(timeout=60)
    assert err.count("standard input closed (the process that started this peer has gone): stopping") == 2, err
    assert "Traceback" not in err, err
    for address in addresses:
        host, port = address.rsplit(":", 1)
        with socket.socket() as probe:
            assert probe.connect_ex((host, int(port))) != 0, f"{address} still serves"


@pytest.mark.parametrize("algorithm", ["osma", "csma"])
def test_cli_subscribe_jsonl_receives_matching_events(tmp_path, algorithm):
    from tests.helpers import oracle_solutions

    query = "SELECT ?s ?v WHERE { GRAPH ?g { ?s <http://example.org/p1> ?v } FILTER(?v > 100) }"
    events = sample_events(40)
    expected = {e.graph.value: oracle_solutions(query, e) for e in events}
    expected = {g: s for g, s in expected.items() if s}
    path = tmp_path / "events.nq"
    with open(path, "w") as handle:
        write_nquads(events, handle)
    with LocalCluster(3, data_dir=tmp_path / "c", algorithm=algorithm) as cluster:
        proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "subscribe", "--peer", cluster.entry,
                                 "--format", "jsonl", "--count", str(len(expected)), query],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = json.loads(proc.stdout.readline())
            assert first["status"] == "active" and first["subscription"]
            done = cli("publish", "--peer", cluster.addresses[-1], str(path))
            assert done.returncode == 0, done.stderr
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    notes = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert sorted(n["event"] for n in notes) == sorted(expected)
    for note in notes:
        assert note["subscription"] == first["subscription"] and note["kind"] == "bindings"
        got = {frozenset(s.items()) for s in note["solutions"]}
        assert got == expected[note["event"]]


def test_the_documented_sdk_example_runs():
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pubsub_example.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "notified: attic is at 31 °C" in done.stdout and "notified: office is at 26.5" in done.stdout
    assert "kitchen" not in done.stdout


def test_the_readme_python_example_runs(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    with LocalCluster(2, data_dir=tmp_path / "c") as cluster:
        code = code.replace("127.0.0.1:40123", cluster.entry)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "http://eventcloud.io/events/" in done.stdout and "21.5" in done.stdout


def test_cli_leave_hands_the_zone_over_and_stops_the_peer(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "c") as cluster:
        path = tmp_path / "e.nq"
        with open(path, "w") as handle:
            write_nquads(sample_events(50), handle)
        assert cli("publish", "--peer", cluster.entry, str(path)).returncode == 0
        done = cli("leave", "--peer", cluster.addresses[2], "--admin-token-file", str(cluster.admin_token_file))
        assert done.returncode == 0, done.stderr
        assert "left; its zone went to peer" in done.stdout
        assert cluster.processes[2].wait(30) == 0
        status = json.loads(cli("status", "--peer", cluster.entry, "--format", "json").stdout)
        assert len(status["peers"]) == 2 and status["partition"] is True
        done = cli("query", "--peer", cluster.entry, "--format", "json", COUNT)
        assert count_of(json.loads(done.stdout)) == 250


def test_a_peer_refuses_a_corrupt_state_or_a_data_directory_of_another_overlay(tmp_path):
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "peer.json").write_text("{ not json")
    done = cli("peer", "--listen", "127.0.0.1:0", "--data-dir", str(corrupt), timeout=60)
    assert done.returncode == 1 and "corrupt peer state" in done.stderr and "move it away" in done.stderr
    assert "Traceback" not in done.stderr
    with LocalCluster(1, data_dir=tmp_path / "a") as first, LocalCluster(1, data_dir=tmp_path / "b") as second:
        first.stop_peer(0)  # its data directory belongs to overlay A; try to bring it into overlay B
        done = cli("peer", "--listen", "127.0.0.1:0", "--join", second.entry, "--data-dir",
                   str(tmp_path / "a" / "peer-0"), timeout=60)
    assert done.returncode == 1 and "belongs to overlay" in done.stderr and "use another --data-dir" in done.stderr
    assert "Traceback" not in done.stderr
