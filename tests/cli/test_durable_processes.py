"""Durable subscriptions with real processes: `eventcloud subscribe --durable` is killed (kill -9)
and resumed, and separately its entry peer is killed, while a publisher streams events; every
acknowledged matching event is printed exactly once, in number order."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import trio

from eventcloud.client import connect
from eventcloud.testing.processes import CliSubscriber as Subscriber
from peers.supervisor import LocalCluster
from tests.helpers import spread_events

pytestmark = pytest.mark.processes
ACCEPT_ALL = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"


async def _wait_for(predicate, seconds: float, what: str) -> None:
    with trio.move_on_after(seconds):
        while not predicate():
            await trio.sleep(0.1)
        return
    pytest.fail(f"timed out waiting for {what}")


def _notes(*subscribers: Subscriber) -> list[dict]:
    return [line for s in subscribers for line in s.notifications]


async def test_a_killed_durable_subscriber_resumes_through_another_peer(tmp_path):
    events = spread_events(90, "k")
    env = {"EVENTCLOUD_STATE_DIR": str(tmp_path / "state")}
    with LocalCluster(4, data_dir=tmp_path / "c") as cluster:
        first = Subscriber(["--peer", cluster.addresses[1], "--durable", "--kind", "signal", ACCEPT_ALL], env)
        second = None
        async with trio.open_nursery() as nursery:
            await nursery.start(first.run)
            header = await first.first_line()
            assert header["status"] == "active" and header["durable"] and header["ticket"]
            ident = header["subscription"]
            async with connect(cluster.addresses[3]) as publisher:
                for i, event in enumerate(events):
                    if i == 30:
                        first.kill()   # mid-stream: whatever it had not printed is kept by the overlay
                    if i == 60:
                        second = Subscriber(["--peer", cluster.addresses[2], "--resume", ident], env)
                        await nursery.start(second.run)
                    await publisher.publish(event)
                    await trio.sleep(0.01)
            await _wait_for(lambda: len(_notes(first, second)) >= 90, 90, "every notification")
            await trio.sleep(1)   # nothing more may come
            second.kill()
        notes = _notes(first, second)
        assert [n["seq"] for n in notes] == list(range(1, 91)), second.stderr.decode()
        assert sorted(n["event"] for n in notes) == sorted(e.graph.value for e in events)
        assert second.lines[0]["status"] == "resumed", second.lines[0]
        assert second.lines[0]["after"] == len(_notes(first)), (second.lines[0], len(_notes(first)))


async def test_a_durable_subscriber_survives_the_death_of_its_entry_peer(tmp_path):
    events = spread_events(80, "e")
    env = {"EVENTCLOUD_STATE_DIR": str(tmp_path / "state")}
    with LocalCluster(5, data_dir=tmp_path / "c") as cluster:
        subscriber = Subscriber(["--peer", cluster.addresses[2], "--peer", cluster.addresses[4], "--durable",
                                 "--kind", "signal", ACCEPT_ALL], env)
        async with trio.open_nursery() as nursery:
            await nursery.start(subscriber.run)
            await subscriber.first_line()
            async with connect([cluster.addresses[0], cluster.addresses[1]]) as publisher:
                for i, event in enumerate(events):
                    if i == 25:
                        cluster.processes[2].send_signal(signal.SIGKILL)   # the subscriber's entry peer
                    await publisher.publish(event)
                    await trio.sleep(0.01)
            await _wait_for(lambda: len(_notes(subscriber)) >= 80, 120, "every notification")
            await trio.sleep(1)
            subscriber.kill()
        notes = _notes(subscriber)
        assert [n["seq"] for n in notes] == list(range(1, 81)), subscriber.stderr.decode()
        assert sorted(n["event"] for n in notes) == sorted(e.graph.value for e in events)
        assert b"reconnected to" in subscriber.stderr


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eventcloud", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


async def test_subscriptions_list_renew_and_cancel_from_the_command_line(tmp_path):
    env = {"EVENTCLOUD_STATE_DIR": str(tmp_path / "state")}
    with LocalCluster(3, data_dir=tmp_path / "c") as cluster:
        token = {"EVENTCLOUD_ADMIN_TOKEN": cluster.admin_token}
        async with connect(cluster.entry) as client:
            sub = await client.subscribe(ACCEPT_ALL, kind="signal", durable=True, lease=600)
            ticket_file = tmp_path / "ticket"
            ticket_file.write_text(sub.ticket)
            done = _cli("subscriptions", "list", "--peer", cluster.entry, env=env)
            assert done.returncode == 1 and "admin token" in done.stderr   # it shows everyone's SPARQL
            done = _cli("subscriptions", "list", "--peer", cluster.entry, "--format", "json", env={**env, **token})
            assert done.returncode == 0, done.stderr
            listed = {s["id"]: s for s in json.loads(done.stdout)}
            assert listed[sub.id]["durable"] and listed[sub.id]["peers"] == 3 and "ticket" not in listed[sub.id]
            done = _cli("subscriptions", "renew", sub.id, "--peer", cluster.entry, "--lease", "7200", env=env)
            assert done.returncode == 1 and "no ticket" in done.stderr
            done = _cli("subscriptions", "renew", sub.id, "--peer", cluster.entry, "--lease", "7200",
                        "--ticket-file", str(ticket_file), env=env)
            assert done.returncode == 0 and "renewed until" in done.stdout, done.stderr
            done = _cli("subscriptions", "cancel", sub.id, "--peer", cluster.addresses[2], env={
                **env, "EVENTCLOUD_TICKET": "not-the-ticket"})
            assert done.returncode == 1 and "wrong ticket" in done.stderr and "Traceback" not in done.stderr
            done = _cli("subscriptions", "cancel", sub.id, "--peer", cluster.addresses[2],
                        env={**env, "EVENTCLOUD_TICKET": sub.ticket})
            assert done.returncode == 0 and "cancelled" in done.stdout, done.stderr
            with trio.fail_after(30):
                with pytest.raises(Exception, match="cancelled"):
                    await sub.receive()
            done = _cli("subscribe", "--peer", cluster.entry, "--resume", sub.id, env={
                **env, "EVENTCLOUD_TICKET": sub.ticket})
            assert done.returncode == 1 and "has ended: cancelled" in done.stderr, done.stderr
            done = _cli("subscribe", "--peer", cluster.entry, env=env)
            assert done.returncode == 2 and "--resume" in done.stderr
