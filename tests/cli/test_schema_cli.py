"""`eventcloud schema load|show` against real peer processes, and an is-a subscription through the
CLI that follows the loaded taxonomy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from peers.supervisor import LocalCluster

pytestmark = pytest.mark.processes
EX = "http://ex.org/"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
TAXONOMY = f"""@prefix rdfs: <{RDFS}> . @prefix ex: <{EX}> .
ex:Car rdfs:subClassOf ex:Vehicle . ex:Bus rdfs:subClassOf ex:Vehicle . ex:Minibus rdfs:subClassOf ex:Bus .
ex:Vehicle rdfs:label "vehicle" .
"""
IS_VEHICLE = (f"PREFIX ex: <{EX}> PREFIX rdfs: <{RDFS}> "
              "SELECT ?x WHERE { GRAPH ?g { ?x a/rdfs:subClassOf* ex:Vehicle } }")


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eventcloud", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_schema_load_and_show_and_an_is_a_subscription(tmp_path):
    taxonomy = tmp_path / "vehicles.ttl"
    taxonomy.write_text(TAXONOMY)
    events = tmp_path / "events.nq"
    rdf_type = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
    events.write_text(f"<{EX}m1> <{rdf_type}> <{EX}Minibus> <{EX}g/1> .\n"
                      f"<{EX}t1> <{rdf_type}> <{EX}Tram> <{EX}g/2> .\n")
    with LocalCluster(3, data_dir=tmp_path / "c") as cluster:
        token = ["--admin-token-file", str(cluster.admin_token_file)]
        refused = cli("schema", "load", str(taxonomy), "--peer", cluster.entry)
        assert refused.returncode == 1 and "admin token" in refused.stderr and "Traceback" not in refused.stderr
        done = cli("schema", "load", str(taxonomy), "--peer", cluster.entry, *token)
        assert done.returncode == 0, done.stderr
        assert "3 subclass edges" in done.stdout and "loaded on 3 peers" in done.stdout
        shown = json.loads(cli("schema", "show", "--peer", cluster.addresses[2], "--format", "json").stdout)
        assert len(shown["peers"]) == 3 and len({p["version"] for p in shown["peers"]}) == 1
        assert sorted(map(tuple, shown["taxonomy"]["edges"])) == [
            (f"{EX}Bus", f"{EX}Vehicle"), (f"{EX}Car", f"{EX}Vehicle"), (f"{EX}Minibus", f"{EX}Bus")]
        turtle = cli("schema", "show", "--peer", cluster.entry, "--format", "turtle").stdout
        assert f"<{EX}Minibus> rdfs:subClassOf <{EX}Bus> ." in turtle
        proc = subprocess.Popen([sys.executable, "-m", "eventcloud", "subscribe", "--peer", cluster.addresses[1],
                                 "--count", "1", "--kind", "bindings", IS_VEHICLE],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert json.loads(proc.stdout.readline())["status"] == "active"
            assert cli("publish", "--peer", cluster.entry, str(events)).returncode == 0
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        (note,) = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert note["event"] == f"{EX}g/1" and note["solutions"] == [{"x": f"<{EX}m1>"}], err
        bad = tmp_path / "cycle.ttl"
        bad.write_text(f"<{EX}A> <{RDFS}subClassOf> <{EX}B> . <{EX}B> <{RDFS}subClassOf> <{EX}A> .\n")
        refused = cli("schema", "load", str(bad), "--peer", cluster.entry, *token)
        assert refused.returncode == 1 and "cycle" in refused.stderr and "Traceback" not in refused.stderr
