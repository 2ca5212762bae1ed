"""A peer whose disk fills up (a real 3 MiB tmpfs under its data directory) refuses writes with a
typed `unavailable` naming the full disk, never `internal`, and logs no traceback (oxigraph's
own write failed after the log had taken the mutation: 'handler for publish failed' at ERROR)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
import trio

from eventcloud.client import ClientError, connect
from eventcloud.rdf.model import IRI, CompoundEvent, Literal, make_quad

pytestmark = [pytest.mark.processes,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="needs root to mount a tmpfs")]


def test_a_full_disk_is_a_typed_refusal_without_a_traceback(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], check=True)
    log = tmp_path / "peer.log"
    try:
        with open(log, "w") as err:
            peer = subprocess.Popen([sys.executable, "-m", "eventcloud", "peer", "--listen", "127.0.0.1:0",
                                     "--data-dir", str(disk / "p"), "--replicas", "1"],
                                    stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            address = peer.stdout.readline().split("listening on ")[1].split()[0]
            errors: list[ClientError] = []

            async def publish() -> int:
                stored = 0
                async with connect(address, publish_retry=0) as client:
                    for i in range(2000):   # 32 KB each: the 3 MiB fill after some tens
                        g = IRI(f"http://full.example/e{i}")
                        event = CompoundEvent(g, (make_quad(g, IRI(f"http://full.example/s{i}"), IRI("http://full.example/p"),
                                                            Literal(f"{i}-" + "x" * 32_000)),))
                        try:
                            await client.publish(event)
                            stored += 1
                        except ClientError as exc:
                            errors.append(exc)
                            if len(errors) >= 3:
                                break
                return stored

            stored = trio.run(publish)
            assert stored > 0 and len(errors) == 3, (stored, errors)
            assert {e.code for e in errors} == {"unavailable"}, [str(e) for e in errors]
            assert all("disk is full" in e.message for e in errors), errors[0].message
        finally:
            peer.send_signal(signal.SIGTERM)
            peer.wait(30)
        assert "Traceback" not in log.read_text()
    finally:
        subprocess.run(["umount", str(disk)], check=False)
