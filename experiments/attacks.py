"""The hostile and careless clients of issue 47, against a default local cluster (cluster secret and
admin token generated) by a client that holds neither: each step, whether the cluster refused
it, the peers' memory, and whether any traceback reached a peer's log.

    python -m experiments.attacks [--peers 3] [--subscriptions 8000] [--idle 1024]

Steps: adding quads to another client's event; publishing first under the IRI another client
is about to use; 1,024 idle keep-alive connections, then a new client; 200 admin-token guesses;
two terms the store would refuse; a 50-pattern cross product against a 2-quad event; 8,000
subscriptions whose client disconnects (how long they outlive it on every peer).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from eventcloud.client import ClientError, connect
from eventcloud.net.transport import TcpTransport
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, make_quad
from eventcloud.wire.frames import Kind, Message, encode
from eventcloud.wire.ops import Op
from experiments.clusterkit import rss_mb
from peers.supervisor import LocalCluster

EX = "http://attack.example/"


@dataclass
class Report:
    steps: list[tuple[str, bool, str]] = field(default_factory=list)   # (step, refused, what happened)
    rss_mb: list[float] = field(default_factory=list)
    tracebacks: int = 0
    subscriptions_gone_after: float | None = None

    def step(self, name: str, refused: bool, detail: str) -> None:
        self.steps.append((name, refused, detail))
        print(f"{'refused' if refused else 'GOT THROUGH':>12}  {name}: {detail}", flush=True)


def _event(graph: str, *objects: str) -> CompoundEvent:
    g = IRI(graph)
    return CompoundEvent(g, tuple(make_quad(g, IRI(EX + "s"), IRI(EX + "p"), Literal(o)) for o in objects))


async def _refused(call) -> tuple[bool, str]:
    try:
        await call()
    except ClientError as exc:
        return True, f"{exc.code}: {exc.message[:110]}"
    return False, "acknowledged"


async def attack(cluster: LocalCluster, args: argparse.Namespace, report: Report) -> None:
    entry = cluster.addresses[0]
    async with connect(entry, source="victim") as victim, connect(entry, source="attacker") as attacker:
        await victim.publish(_event(EX + "victim/1", "a", "b", "c"))
        refused, detail = await _refused(lambda: attacker.publish(_event(EX + "victim/1", "a", "b", "c", "x", "y")))
        held = await victim.count(IRI(EX + "victim/1"))
        report.step("add quads to another client's event", refused and held == 3, f"{detail}; the event holds {held}")
        await attacker.publish(_event(EX + "victim/2", "forged"))
        refused, detail = await _refused(lambda: victim.publish(_event(EX + "victim/2", "genuine")))
        report.step("publish first under the IRI a victim is about to use", refused,
                    f"the victim is told: {detail} (nothing of either is merged)")
        for data, what in ((["http://s", "http://p", "http://x/%zz"], "an IRI with %zz"),
                           (["http://s", "http://p", ["1" * 5000, XSD + "integer"]], "a 5,000-digit xsd:integer")):
            refused, detail = await _refused(lambda data=data: attacker.call(
                Op.PUBLISH, {"events": [{"graph": EX + "bad", "quads": [data]}]}))
            report.step(f"publish {what}", refused and "bad-request" in detail, detail)

    # keep-alive connections without credentials, then a newcomer
    transport, ping = TcpTransport(), encode(Message(Kind.REQUEST, Op.PING, 1, 0, {}))
    held_streams = []
    try:
        for _ in range(args.idle):
            try:
                stream = await transport.connect(entry)
                await stream.send_all(ping)
                held_streams.append(stream)
            except (OSError, trio.BrokenResourceError, Exception):
                break
        await trio.sleep(1)
        began = time.monotonic()
        try:
            with trio.fail_after(15):
                async with connect(entry, source="newcomer", reconnect=0) as newcomer:
                    await newcomer.count()
            report.step(f"lock clients out with {len(held_streams)} idle keep-alive connections", True,
                        f"a new client was served after {time.monotonic() - began:.2f} s")
        except (ClientError, trio.TooSlowError) as exc:
            report.step(f"lock clients out with {len(held_streams)} idle keep-alive connections", False, str(exc)[:120])
    finally:
        for stream in held_streams:
            with trio.move_on_after(0.1):
                await stream.aclose()

    # admin-token guessing from one host
    checked = throttled = 0
    began = time.monotonic()
    for guess in range(args.guesses):
        try:
            async with connect(entry, source="guesser", admin_token=f"guess-{guess:06d}", reconnect=0):
                pass
        except ClientError as exc:
            if "too many failed proofs" in exc.message:
                throttled += 1
            else:
                checked += 1
    report.step(f"{args.guesses} admin-token guesses", checked <= 10,
                f"{checked} checked, {throttled} refused unchecked, in {time.monotonic() - began:.1f} s")

    # an explosive subscription
    before = [rss_mb(p.pid) for p in cluster.processes]
    async with connect(entry, source="explosive") as client:
        wide = " . ".join(f"?s{i} ?p{i} ?o{i}" for i in range(50))
        sub = await client.subscribe(f"SELECT * WHERE {{ GRAPH ?g {{ {wide} }} }}", kind="bindings")
        await client.publish(_event(EX + "two-quads", "1", "2"))
        try:
            with trio.fail_after(30):
                note = await sub.receive()
            report.step("a 50-pattern cross product against a 2-quad event", note.truncated,
                        f"notified, truncated={note.truncated}, {len(note.solutions)} solutions")
        except trio.TooSlowError:
            report.step("a 50-pattern cross product against a 2-quad event", False, "no notification within 30 s")
    after = [rss_mb(p.pid) for p in cluster.processes]
    report.rss_mb = after
    print(f"peers' RSS before/after the cross product (MB): {[round(b) for b in before]} / "
          f"{[round(a) for a in after]}", flush=True)

    # thousands of subscriptions, then the client disconnects
    texts = [f'SELECT ?s WHERE {{ GRAPH ?g {{ ?s <{EX}p{i % 100}> "{i}" }} }}' for i in range(args.subscriptions)]
    async with connect(entry, source="leaver") as leaver:
        for start in range(0, len(texts), 1000):
            await leaver.subscribe_many(texts[start:start + 1000], kind="signal")
        async with connect(entry, source="watcher") as watcher:
            stored = sum(p.subscriptions for p in (await watcher.status()).peers)
    gone_at = time.monotonic()
    async with connect(entry, source="watcher") as watcher:
        left = stored
        while time.monotonic() - gone_at < 120:
            left = sum(p.subscriptions for p in (await watcher.status()).peers)
            if left == 0:
                report.subscriptions_gone_after = time.monotonic() - gone_at
                break
            await trio.sleep(0.5)
    report.step(f"{args.subscriptions} subscriptions left behind by a disconnected client", left == 0,
                f"{stored} stored over the peers; {left} left after "
                f"{report.subscriptions_gone_after or time.monotonic() - gone_at:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", type=int, default=3)
    parser.add_argument("--subscriptions", type=int, default=8000)
    parser.add_argument("--idle", type=int, default=1024)
    parser.add_argument("--guesses", type=int, default=200)
    args = parser.parse_args(argv)
    report = Report()
    with tempfile.TemporaryDirectory(prefix="eventcloud-attacks-") as folder:
        log_path = Path(folder) / "peers.log"
        with open(log_path, "w") as log:
            saved = os.dup(2)
            os.dup2(log.fileno(), 2)   # the peers inherit it: their logs land in the file
            try:
                cluster = LocalCluster(args.peers, data_dir=Path(folder) / "cluster", log_level="warning")
                cluster.start()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
        try:
            trio.run(attack, cluster, args, report)
        finally:
            cluster.stop()
        text = log_path.read_text(errors="replace")
        report.tracebacks = text.count("Traceback")
    refused = sum(1 for _, ok, _ in report.steps if ok)
    print(f"\n{refused} of {len(report.steps)} steps refused; tracebacks in the peers' logs: {report.tracebacks}")
    return 0 if refused == len(report.steps) and report.tracebacks == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
