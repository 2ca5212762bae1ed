"""The CLI as a new user meets it (issue 15): every way out is one line, never a traceback
(Ctrl-C, a closed pipe, bad arguments); messages name what is wrong; inputs from stdin, files,
directories and CityBench streams; result formats; big inputs with bounded memory."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyoxigraph as ox
import pytest
import rdflib
from rdflib.query import Result

from peers.supervisor import LocalCluster

pytestmark = pytest.mark.processes

EX = "http://cli.example/"
CITYBENCH = Path(__file__).resolve().parents[3] / "shared" / "data" / "citybench"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def cli(*args: str, timeout: float = 120, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eventcloud", *args], capture_output=True, text=True,
                          timeout=timeout, input=stdin, env=env or ENV)


def shell(command: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout, env=ENV)


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "Error:" not in text.replace("error: ", ""), text[-2000:]


def nquads(events: int, quads: int = 3, tag: str = "e") -> str:
    return "".join(f'<{EX}s{i}> <{EX}p{k}> "{i}-{k}" <{EX}{tag}/{i}> .\n' for i in range(events) for k in range(quads))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(2, data_dir=tmp_path_factory.mktemp("cluster")) as running:
        yield running


EVENTCLOUD = f"{sys.executable} -m eventcloud"


def test_bad_arguments_are_one_line(cluster, tmp_path):
    for args, words in ((("cluster", "--peers", "0"), "--peers: must be at least 1"),
                        (("publish", "--peer", cluster.entry, "--batch", "0", "x.nq"), "--batch: must be at least 1"),
                        (("publish", "--peer", cluster.entry, "--rate", "0", "x.nq"), "--rate: must be a number"),
                        (("subscribe", "--peer", cluster.entry, "--count", "-1", "SELECT"), "--count: must be at least 0"),
                        (("status",), "EVENTCLOUD_PEER"),
                        (("demo", "--peers", "zero"), "'zero' is not an integer")):
        done = cli(*args, env={k: v for k, v in ENV.items() if k != "EVENTCLOUD_PEER"})
        assert done.returncode == 2 and words in done.stderr, (args, done.stderr)
        no_traceback(done.stderr)
    done = cli("query", "--peer", cluster.entry)
    assert done.returncode == 1 and "give the query" in done.stderr


def test_ctrl_c_of_publish_says_what_was_stored_and_each_event_is_whole(cluster, tmp_path):
    path = tmp_path / "many.nq"
    path.write_text(nquads(4000, tag="ctrl-c"))
    proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "publish", "--peer", cluster.entry, "--rate", "400",
                             str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    no_traceback(err)
    found = re.search(r"interrupted: published ([\d,]+) of 4,000 events \(([\d,]+) quads\) in [\d.]+ s, each stored "
                      r"whole", err)
    assert found, err
    published = int(found.group(1).replace(",", ""))
    assert 0 < published < 4000 and int(found.group(2).replace(",", "")) == 3 * published
    done = cli("query", "--peer", cluster.entry, "--format", "json",
               f"SELECT ?g (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?s ?p ?o }} FILTER(STRSTARTS(STR(?g), "
               f"'{EX}ctrl-c/')) }} GROUP BY ?g")
    counts = [int(b["n"]["value"]) for b in json.loads(done.stdout)["results"]["bindings"]]
    assert set(counts) == {3}, "a partial event"  # each event whole
    assert published <= len(counts) <= published + 4 * 50  # plus what was in flight, whole


def test_ctrl_c_while_a_cluster_starts_leaves_no_fatal_error(tmp_path):
    # as from a terminal: SIGINT not ignored (a suite started in the background by a
    # non-interactive shell inherits it ignored, and Python then keeps ignoring it until the
    # cluster installs its handler: a Ctrl-C during the imports was lost, the cluster ran on)
    proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "cluster", "--peers", "3", "--data-dir",
                             str(tmp_path / "c")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the whole foreground process group
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)   # a cluster that did not stop leaves nothing behind
    assert "Fatal Python error" not in err and "Traceback" not in err, err
    # 130, or killed by SIGINT: CPython reports an interrupt it saw so, even one handled, when
    # it came while Python was still importing the command (over a second on a busy machine)
    assert proc.returncode in (0, 130, -signal.SIGINT), err


def test_a_closed_pipe_ends_quietly(cluster, tmp_path):
    path = tmp_path / "pipe.nq"
    path.write_text(nquads(3000, tag="pipe"))
    assert cli("publish", "--peer", cluster.entry, str(path)).returncode == 0
    for command in (f"{EVENTCLOUD} find --peer {cluster.entry} | head -1",
                    f"{EVENTCLOUD} status --peer {cluster.entry} --format json | head -1",
                    f"{EVENTCLOUD} query --peer {cluster.entry} --format csv 'SELECT * WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}'"
                    f" | head -2",
                    f"{EVENTCLOUD} demo --peers 2 --events 12 | head -2"):
        done = shell(command)
        assert done.stdout.strip(), command
        assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, (command, done.stderr)


def test_subscribe_head_and_count_zero(cluster):
    sparql = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p0> ?o }} }}"
    done = cli("subscribe", "--peer", cluster.entry, "--count", "0", sparql, timeout=30)
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "active"
    proc = subprocess.Popen(["bash", "-c", f"{EVENTCLOUD} subscribe --peer {cluster.entry} \"{sparql}\" | head -2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    time.sleep(3)
    for attempt in range(5):
        cli("publish", "--peer", cluster.entry, "-", stdin=nquads(2, tag=f"head{attempt}-{time.time()}"))
        if proc.poll() is not None:
            break
        time.sleep(1)
    out, err = proc.communicate(timeout=30)
    assert len(out.splitlines()) == 2 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_nquads_output_needs_event_notifications(cluster):
    """`--format nquads` prints events' quads: with bindings or signals it would print only
    comments, so the combination is refused before anything is made, saying what to use."""
    sparql = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p0> ?o }} }}"
    for kind in ("bindings", "signal"):
        done = cli("subscribe", "--peer", cluster.entry, "--kind", kind, "--format", "nquads", "--count", "1", sparql,
                   timeout=30)
        assert done.returncode == 2 and done.stdout == "", done
        assert "--kind event" in done.stderr and "--format jsonl" in done.stderr and kind in done.stderr
        no_traceback(done.stderr)
    made = cli("subscribe", "--peer", cluster.entry, "--kind", "event", "--format", "nquads", "--count", "0", sparql,
               timeout=30)
    assert made.returncode == 0, made


def test_the_cli_pointed_at_an_http_server_says_so_promptly():
    """Python's own HTTP server on a port of its own: `status` fails within the handshake's bound
    (not 30 s and more), naming HTTP and where a peer's address comes from; no traceback."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        done = cli("status", "--peer", f"127.0.0.1:{server.server_address[1]}", timeout=60)
        took = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 1 and took < 25, (took, done)
    assert "HTTP" in done.stderr and ("peer" in done.stderr), done.stderr
    assert "frame of" not in done.stderr and "--tls-ca" not in done.stderr
    no_traceback(done.stderr)


def test_cluster_reports_a_peer_exit_once(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "cluster", "--peers", "2", "--data-dir",
                             str(tmp_path / "c")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    entry = proc.stdout.readline().strip()
    assert entry, proc.stderr.read()
    status = json.loads(cli("status", "--peer", entry, "--format", "json").stdout)
    other = next(p["address"] for p in status["peers"] if p["address"] != entry)
    assert cli("leave", "--peer", other, "--admin-token-file", str(tmp_path / "c" / "admin.token")).returncode == 0
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert err.count("exited with code") == 1 and f"({other}) exited with code 0" in err, err


def test_cluster_restarts_a_peer_that_dies_and_its_printed_address_keeps_working(tmp_path):
    """Issue 44.7: `eventcloud cluster` only reported a peer that exited; the address it printed
    was dead from then on when that peer was the entry. A peer killed (kill -9) is restarted
    with its command, on its port, and answers at the printed address with every event."""
    data = tmp_path / "c"
    proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "cluster", "--peers", "3", "--data-dir", str(data)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        entry = proc.stdout.readline().strip()
        assert entry, proc.stderr.read()
        token = str(data / "admin.token")
        assert cli("publish", "--peer", entry, "-", stdin=nquads(20, tag="restart")).returncode == 0
        pid = int(subprocess.run(["pgrep", "-f", "--", f"--data-dir {data / 'peer-0'} "], capture_output=True,
                                 text=True).stdout.split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 90
        counted = None
        while time.monotonic() < deadline:
            done = cli("find", "--peer", entry, "--count", timeout=30)
            if done.returncode == 0 and done.stdout.strip() == "60":
                counted = 60
                break
            time.sleep(1)
        assert counted == 60, (done.stdout, done.stderr)
        assert cli("subscriptions", "list", "--peer", entry, "--admin-token-file", token).returncode == 0
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "peer 0 (" in err and "exited with code -9; restarting it" in err, err
    assert f"peer 0 serves again at {entry}" in err, err
    no_traceback(err)


def test_a_one_peer_cluster_says_1_peer(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "cluster", "--peers", "1", "--data-dir",
                             str(tmp_path / "c")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    entry = proc.stdout.readline().strip()
    time.sleep(1)   # its summary line follows the address
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert entry and "1 peer (" in out + err and "1 peers" not in out + err, out + err


def test_messages_name_the_function_and_the_address(cluster, tmp_path):
    typo = f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s ?p ?o }} FILTER(contians(?o, 'x')) }}"
    for command in ("subscribe", "query"):
        done = cli(command, "--peer", cluster.entry, typo, timeout=30)
        assert done.returncode == 1 and "unknown function `contians`" in done.stderr and "CONTAINS" in done.stderr
        no_traceback(done.stderr)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        done = cli("peer", "--listen", address, "--data-dir", str(tmp_path / "p"), timeout=30)
        assert done.returncode == 1 and address in done.stderr and "already in use" in done.stderr, done.stderr
        done = cli("gateway", "--peer", cluster.entry, "--listen", address, timeout=30)
        assert done.returncode == 1 and address in done.stderr and "already in use" in done.stderr, done.stderr
    for text in (done.stderr,):
        no_traceback(text)


def test_publish_wording_directories_stdin_and_files(cluster, tmp_path):
    one = tmp_path / "one.nq"
    one.write_text(nquads(1, tag="one"))
    done = cli("publish", "--peer", cluster.entry, str(one))
    assert re.fullmatch(r"published 1 event \(3 quads\) in \d+\.\d\d s( \([\d.]+ events/s\))?\n", done.stdout), done.stdout
    assert "0 events/s" not in done.stdout
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.nq").write_text(nquads(2, tag="dir-a"))
    (folder / "sub" / "b.ttl").write_text(f"<{EX}t> <{EX}p> 1 .")
    (folder / "notes.txt").write_text("not RDF")
    done = cli("publish", "--peer", cluster.entry, str(folder))
    assert done.returncode == 0 and "published 3 events (7 quads)" in done.stdout, done.stderr
    (tmp_path / "empty").mkdir()
    done = cli("publish", "--peer", cluster.entry, str(tmp_path / "empty"))
    assert done.returncode == 1 and "is a directory holding no file" in done.stderr
    done = cli("publish", "--peer", cluster.entry, "-", stdin=nquads(4, tag="stdin"))
    assert done.returncode == 0 and "published 4 events (12 quads)" in done.stdout
    done = cli("publish", "--peer", cluster.entry, "--format", "turtle", "--source", "pipe", "-",
               stdin=f"<{EX}x> <{EX}p> 'turtle' .")
    assert done.returncode == 0 and "published 1 event (1 quad)" in done.stdout
    bad = tmp_path / "bad.nq"
    bad.write_text(nquads(3, tag="bad") + "<broken\n")
    done = cli("publish", "--peer", cluster.entry, str(bad))
    assert done.returncode == 1 and "bad.nq:10" in done.stderr and "nothing was published" in done.stderr
    unsorted = tmp_path / "unsorted.nq"
    unsorted.write_text(nquads(2, tag="u") + nquads(1, tag="u").replace("p0", "p9"))
    done = cli("publish", "--peer", cluster.entry, str(unsorted))
    assert done.returncode == 1 and "comes back after other graphs" in done.stderr


def test_query_sources_formats_and_plain_counts(cluster, tmp_path):
    path = tmp_path / "q.nq"
    path.write_text(nquads(5, tag="query"))
    assert cli("publish", "--peer", cluster.entry, str(path)).returncode == 0
    select = f"SELECT ?s ?o WHERE {{ GRAPH ?g {{ ?s <{EX}p1> ?o }} FILTER(STRSTARTS(STR(?g), '{EX}query/')) }}"
    (tmp_path / "q.rq").write_text(select)
    env = {**ENV, "EVENTCLOUD_PEER": cluster.entry}
    by_arg = cli("query", "--format", "json", select, env=env)
    for variant in (cli("query", "--format", "json", "-", stdin=select, env=env),
                    cli("query", "--format", "json", f"@{tmp_path / 'q.rq'}", env=env),
                    cli("query", "--format", "json", "--file", str(tmp_path / "q.rq"), env=env)):
        assert variant.returncode == 0 and json.loads(variant.stdout) == json.loads(by_arg.stdout), variant.stderr
    expected = {(f"{EX}s{i}", f"{i}-1") for i in range(5)}
    for fmt, parse in (("csv", lambda b: {(r["s"], r["o"]) for r in csv.DictReader(io.StringIO(b.decode()))}),
                       ("tsv", lambda b: {(str(r.s), str(r.o)) for r in Result.parse(io.BytesIO(b), format="tsv")}),
                       ("xml", lambda b: {(r["s"].value, r["o"].value) for r in
                                          ox.parse_query_results(b, ox.QueryResultsFormat.XML)})):
        done = subprocess.run([sys.executable, "-m", "eventcloud", "query", "--format", fmt, select],
                              capture_output=True, env=env, timeout=60)
        assert done.returncode == 0 and parse(done.stdout) == expected, (fmt, done.stderr)
    done = cli("query", f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH ?g {{ ?s <{EX}p1> ?o }} }}", env=env)
    assert "^^" not in done.stdout and re.search(r"^\d+\s*$", done.stdout, re.M), done.stdout
    construct = f"CONSTRUCT {{ ?s <{EX}p1> ?o }} WHERE {{ GRAPH ?g {{ ?s <{EX}p1> ?o }} FILTER(STRSTARTS(STR(?g), '{EX}query/')) }}"
    done = cli("query", "--format", "json", construct, env=env)
    graph = rdflib.Graph().parse(data=done.stdout, format="json-ld")
    assert {(str(s), str(o)) for s, _, o in graph} == expected
    done = cli("query", "--format", "turtle", construct, env=env)
    assert len(rdflib.Graph().parse(data=done.stdout, format="turtle")) == 5
    for form in ("json", "rdfxml", "turtle", "nquads"):   # a shell prompt after the output starts on a line of its own
        done = cli("query", "--format", form, construct, env=env)
        assert done.returncode == 0 and done.stdout.endswith("\n"), (form, done.stdout[-80:])
    done = cli("query", "--format", "csv", construct, env=env)
    assert done.returncode == 2 and "graph" in done.stderr
    done = cli("status", env=env)
    assert done.returncode == 0 and re.search(r'\["", "[^"]*"\)|\["[^"]*", end\)', done.stdout), done.stdout
    assert not re.search(r"[0-9a-f]{30}", done.stdout)


@pytest.mark.skipif(not CITYBENCH.is_dir(), reason="needs shared/data/citybench (the CityBench data)")
def test_publish_a_citybench_stream_at_a_rate(cluster, tmp_path):
    rows = (CITYBENCH / "AarhusTrafficData158324.stream").read_text().splitlines()
    part = tmp_path / "AarhusTrafficData158324.stream"
    part.write_text("\n".join(rows[:21]) + "\n")  # the header and 20 readings
    started = time.monotonic()
    done = cli("publish", "--peer", cluster.entry, "--rate", "10", str(part))
    took = time.monotonic() - started
    assert done.returncode == 0 and "published 20 events" in done.stdout, done.stderr
    assert took >= 1.9, f"20 events at 10/s took {took:.1f} s"
    done = cli("query", "--peer", cluster.entry, "--format", "json",
               "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?o <http://purl.oclc.org/NET/ssnx/ssn#observedBy> "
               "<http://www.insight-centre.org/dataset/SampleEventService#AarhusTrafficData158324> } }")
    assert int(json.loads(done.stdout)["results"]["bindings"][0]["n"]["value"]) >= 60  # 3 readings a row


def test_a_big_file_is_read_with_bounded_memory_and_progress(tmp_path):
    """The check pass streams: the peak memory of publishing a 40 MB file (up to the failed
    connection) stays near that of a tiny one; the old reader held 4x the file."""
    big = tmp_path / "big.nq"
    with open(big, "w") as handle:
        for chunk in range(40):
            handle.write(nquads(3000, 4, tag=f"big{chunk}"))
    tiny = tmp_path / "tiny.nq"
    tiny.write_text(nquads(2))
    size_mb = big.stat().st_size / 1e6
    assert size_mb > 35

    def peak_rss_mb(path: Path) -> tuple[float, str]:
        proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "publish", "--peer", "127.0.0.1:1", "--progress",
                                 str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read().decode()
        proc.returncode = os.waitstatus_to_exitcode(status)
        return usage.ru_maxrss / 1024, err

    tiny_mb, _ = peak_rss_mb(tiny)
    big_mb, err = peak_rss_mb(big)
    assert "checking" in err and "%" in err and "MB" in err, err  # progress while parsing
    assert "\x1b[K" not in err and "\r" not in err, err[:300]  # not a terminal: plain lines, no redrawing
    assert "127.0.0.1:1" in err and "Traceback" not in err
    assert big_mb - tiny_mb < 30, f"{size_mb:.0f} MB file: peak {big_mb:.0f} MB vs {tiny_mb:.0f} MB for a tiny one"


def test_ctrl_c_of_the_demo_says_what_happened_and_stops_its_cluster(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "demo", "--peers", "2", "--events", "3000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "notification" in line and "==" not in line:
            break
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Fatal Python error" not in err, err
    assert re.search(r"== interrupted: \d+ of 3000 events published \(each stored whole\), \d+ notifications", out), out
    peers = re.search(r"peers (\S+), (\S+)\n", "".join(lines)).groups()
    for address in peers:  # the cluster was stopped
        host, port = address.rsplit(":", 1)
        with socket.socket() as probe:
            assert probe.connect_ex((host, int(port))) != 0, f"{address} still serves"


def test_an_event_iri_reused_with_other_content_is_refused(cluster):
    """The newcomer's case: "C" then "D" under one graph IRI. The same content again is a retry;
    other content is a conflict that names the event and what to do, with nothing stored."""
    first = f'<{EX}c> <{EX}q> "C" <{EX}g3> .\n'
    assert cli("publish", "--peer", cluster.entry, "-", stdin=first).returncode == 0
    again = cli("publish", "--peer", cluster.entry, "-", stdin=first)
    assert again.returncode == 0 and "published 1 event (1 quad)" in again.stdout, again.stderr
    other = cli("publish", "--peer", cluster.entry, "-", stdin=first.replace('"C"', '"D"'))
    assert other.returncode == 1, other.stdout
    assert f"{EX}g3 already holds an event with other content" in other.stderr
    assert "new IRI" in other.stderr and "delete the event first" in other.stderr
    no_traceback(other.stderr)
    found = cli("query", "--peer", cluster.entry, f"SELECT ?o WHERE {{ GRAPH <{EX}g3> {{ ?s ?p ?o }} }}")
    assert "C" in found.stdout and "D" not in found.stdout, found.stdout


def test_a_literal_over_16_mib_is_refused_without_a_traceback(cluster):
    big = f'<{EX}s> <{EX}p> "ok" <{EX}big> .\n<{EX}s> <{EX}p> "' + "a" * (17 << 20) + f'" <{EX}big> .\n'
    done = cli("publish", "--peer", cluster.entry, "-", stdin=big)
    assert done.returncode == 1 and "stdin: a statement over 16 MiB" in done.stderr, done.stderr[-500:]
    assert "once the input is mended" in done.stderr
    no_traceback(done.stderr)


def _parsers(parser, name="eventcloud"):
    """Every parser of the CLI, with the command line that reaches it."""
    import argparse
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_help_says_what_the_command_and_each_option_are_for():
    """The --help walkthrough of issue 46: a command without a description, an argument without
    help, or a help that is only its default ("[table]") left a new user guessing."""
    from eventcloud.cli.main import build_parser

    bare = []
    for name, parser in _parsers(build_parser()):
        if name != "eventcloud" and not any(a.dest == "action" for a in parser._actions) and not parser.description:
            bare.append(f"{name}: no description")
        for action in parser._actions:
            if action.dest in ("help", "command", "action"):
                continue
            words = re.sub(r"\[[^\]]*\]", "", action.help or "").strip()
            if len(words.split()) < 2:
                bare.append(f"{name} {'/'.join(action.option_strings) or action.dest}: help {action.help!r}")
    assert not bare, "\n".join(bare)


def test_hints_work_when_followed_literally(cluster):
    """What a refusal tells the user to type works as typed (issue 46.3): the admin-token hint of a
    command with an action names the action; usage errors come under the command's own usage."""
    no_peer = {k: v for k, v in ENV.items() if k != "EVENTCLOUD_PEER"}
    done = cli("subscriptions", "list", env=no_peer)
    assert done.returncode == 2 and "usage: eventcloud subscriptions list" in done.stderr, done.stderr
    assert "eventcloud subscriptions list: error: give an entry peer" in done.stderr
    done = cli("subscriptions", "list", "--peer", cluster.entry, env=no_peer)
    assert done.returncode == 1, done.stderr
    hint = re.search(r"`(eventcloud subscriptions list --admin-token-file FILE) …`", done.stderr)
    assert hint, done.stderr
    followed = hint.group(1).replace("FILE", str(cluster.admin_token_file)).split()[1:]
    done = cli(*followed, "--peer", cluster.entry, env=no_peer)
    assert done.returncode == 0 and "rows)" in done.stdout, done.stderr
    done = cli("find", "--peer", cluster.entry, "-s", "http://cli.example/s1", env=no_peer)
    assert done.returncode == 2 and "<http://cli.example/s1>" in done.stderr, done.stderr
    done = cli("find", "--peer", cluster.entry, "-s", "<http://cli.example/s1>", "--count", env=no_peer)
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stderr
    done = cli("delete", "--peer", cluster.entry, "--admin-token-file", str(cluster.admin_token_file),
               f"{EX}never-published", env=no_peer)
    assert done.returncode == 0 and "nothing to delete" in done.stdout, done.stdout + done.stderr
    no_traceback(done.stderr)
