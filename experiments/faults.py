"""Faults a real network makes, with real processes: peers and a three-member etcd, each in a
network namespace of its own on a bridge (experiments/netns.py), the harness in the root one.

    sudo python -m experiments.faults [--scenarios replica-cut,minority,pause,slow,loaded,kill-restart,wipe-first]
                                      [--algorithms osma,csma] [--peers 6] [--rate 20] [--seconds 15]

Each scenario starts a fresh overlay (`eventcloud peer --authority etcd://… --failure-timeout 2`,
R = 2, fsync), subscribes on peer 0 (a subscription matching every event), publishes through
peers 0 and 1 at `--rate` events/s, injects its fault after 5 s for `--seconds`, heals, publishes
10 s more, lets notifications settle, and prints per scenario and algorithm:

    acked / failed      publications the SDK saw succeed / fail for good
    whole / partial / lost
                        acknowledged events read back with all their quads / some / none
    missing / dup       acknowledged events never notified / notified more than once
    converged           seconds after healing until COUNT(*) through every peer was exact (- : never, 60 s)
    live-deposed        peers never faulted whose zone the authority moved (a takeover of a live peer)
    minority-refused    (minority) a publication inside the minority, 4 s into the cut: refused, not acknowledged;
                        (wipe-first, clock-*) the restarted peer refused to serve

Scenarios: `replica-cut` (a peer holding copies of others' zones cut off), `minority` (2 of 6 on a
bridge of their own: they reach each other, nothing else), `pause` (SIGSTOP), `slow` (16 kbit/s
both ways: a live peer that must not be taken over), `loaded` (7 busy loops beside the peers on
the machine's cores: no live peer may be taken over), `kill-restart` (kill -9, the same command 5 s
later, fixed ports), `wipe-first` (peer 0 killed, its data directory wiped, restarted with its own
command: it must refuse to start a second overlay), `clock-ahead` / `clock-behind` (the last peer
stopped, restarted with its command under libfaketime at +2h / -2h: it must refuse to serve,
saying its clock is off, and lose nothing; restarted with the right clock after `--seconds`).

Needs root, iproute2, tc, Debian's etcd-server and faketime (clock scenarios). Every namespace and link it makes is removed,
also when a scenario fails; `--cleanup` only removes what a killed run left behind.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import trio

from eventcloud.client import ClientError, connect
from eventcloud.rdf.files import write_nquads
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, make_quad
from eventcloud.testing.etcd import EtcdCluster
from experiments.netns import Hosts, remove_leftovers
from peers.authority import EtcdAuthority
from peers.supervisor import LocalCluster

SCENARIOS = ("replica-cut", "minority", "pause", "slow", "loaded", "kill-restart", "wipe-first", "clock-ahead",
             "clock-behind")
#: Busy processes of the `loaded` scenario: with the peers and etcd, a run queue of 7+ on 2 cores.
BUSY_LOOPS = 7
PORT = 7000
ALNUM = "0123456789abcdefghijklmnopqrstuvwxyz"
EVERYTHING = "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }"
FAKETIME_LIBRARY = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"   # Debian's libfaketime


@dataclass
class Outcome:
    scenario: str
    algorithm: str
    acked: int = 0
    failed: int = 0
    whole: int = 0
    partial: int = 0
    lost: int = 0
    missing: int = 0
    dup: int = 0
    converged: float | None = None
    live_deposed: int = 0
    minority_refused: bool | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (not (self.partial or self.lost or self.missing or self.dup or self.live_deposed)
                and self.converged is not None and self.minority_refused is not False)


class NetnsCluster(LocalCluster):
    """Peer `i` runs on host `p<i>` of `hosts`, on a fixed port (restarts keep it)."""

    def __init__(self, hosts: Hosts, size: int, **kwargs) -> None:
        super().__init__(size, port=PORT, **kwargs)
        self.hosts = hosts

    def command(self, index: int) -> list[str]:
        cmd = super().command(index)
        cmd[cmd.index("--listen") + 1] = f"{self.hosts.addresses[f'p{index}']}:{PORT}"
        return self.hosts.run(f"p{index}", cmd)


def events(n: int, tag: str) -> list[CompoundEvent]:
    out = []
    for i in range(n):
        g = IRI(f"http://eventcloud.io/events/faults/{tag}/{i}")
        out.append(CompoundEvent(g, tuple(
            make_quad(g, IRI(f"http://faults.example/{ALNUM[(7 * j + i) % 36]}{ALNUM[(5 * i + j) % 36]}s"),
                      IRI(f"http://faults.example/{ALNUM[(11 * j) % 36]}p"), Literal(str(j), XSD + "integer"))
            for j in range(4))))
    return out


async def _epochs(url: str) -> dict[str, tuple[int, str]]:
    """Zone id -> (epoch, owner address) as etcd holds them."""
    authority = EtcdAuthority(url)
    try:
        entries = await authority.scan("eventcloud/")
    finally:
        await authority.aclose()
    epochs = {e.key.rsplit("/", 1)[1]: int(e.value) for e in entries if "/epoch/" in e.key}
    owners = {e.key.rsplit("/", 1)[1]: json.loads(e.value).get("address", "") for e in entries if "/owner/" in e.key}
    return {ident: (epoch, owners.get(ident, "")) for ident, epoch in epochs.items()}


async def run_scenario(scenario: str, algorithm: str, args: argparse.Namespace) -> Outcome:
    outcome = Outcome(scenario, algorithm)
    workdir = Path(tempfile.mkdtemp(prefix="eventcloud-faults-"))
    with Hosts() as hosts:
        members = [hosts.add(f"e{i}") for i in range(3)]
        for i in range(args.peers):
            hosts.add(f"p{i}")
        etcd = EtcdCluster(workdir / "etcd", hosts=members, wrap=lambda i, cmd: hosts.run(f"e{i}", cmd))
        cluster = NetnsCluster(hosts, args.peers, data_dir=workdir / "peers", algorithm=algorithm, seed=args.seed,
                               authority=etcd.url, secure=False, log_level=args.log_level,
                               extra=["--failure-timeout", str(args.failure_timeout)])
        try:
            await trio.to_thread.run_sync(etcd.start)
            await trio.to_thread.run_sync(cluster.start)
            await _exercise(scenario, cluster, hosts, etcd, outcome, args)
        finally:
            await trio.to_thread.run_sync(cluster.stop)
            await trio.to_thread.run_sync(etcd.stop)
    shutil.rmtree(workdir, ignore_errors=True)
    return outcome


async def _exercise(scenario: str, cluster: NetnsCluster, hosts: Hosts, etcd: EtcdCluster, outcome: Outcome,
                    args: argparse.Namespace) -> None:
    entry = [cluster.addresses[1], cluster.addresses[0]] if scenario == "wipe-first" else cluster.addresses[:2]
    acked: dict[str, CompoundEvent] = {}
    failed: dict[str, CompoundEvent] = {}
    seen: dict[str, int] = {}
    faulted: set[int] = set()
    async with connect(entry, source="faults-sub") as subscriber, \
            connect(entry, source="faults-pub", publish_retry=30.0) as publisher:
        sub = await subscriber.subscribe(EVERYTHING, kind="signal")
        await trio.sleep(3)   # replicas made, leases registered
        before = await _epochs(etcd.url)

        async def listen() -> None:
            async for note in sub:
                seen[note.event] = seen.get(note.event, 0) + 1

        async def publish(batch: list[CompoundEvent]) -> None:
            async def one(event: CompoundEvent) -> None:
                try:
                    with trio.fail_after(90):
                        await publisher.publish(event)
                    acked[event.graph.value] = event
                except (ClientError, trio.TooSlowError) as exc:
                    failed[event.graph.value] = event
                    outcome.notes.append(f"publication failed: {exc}"[:200])

            async with trio.open_nursery() as nursery:
                for event in batch:
                    nursery.start_soon(one, event)
                    await trio.sleep(1 / args.rate)

        total = int(args.rate * (5 + args.seconds + 10))
        stream = events(total, f"{scenario}-{outcome.algorithm}")
        healed_at: list[float] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen)
            async with trio.open_nursery() as work:
                work.start_soon(publish, stream)
                await trio.sleep(5)
                await _inject(scenario, cluster, hosts, args, faulted, outcome, publisher)
                healed_at.append(time.monotonic())
            # notifications settle (bounded): every acknowledged event seen, or 60 s
            with trio.move_on_after(60):
                while not all(g in seen for g in acked):
                    await trio.sleep(0.5)
            await trio.sleep(3)   # late duplicates arrive too
            nursery.cancel_scope.cancel()

        expected_total = sum(len(e) for e in acked.values())
        outcome.converged = await _converged(cluster, healed_at[0], expected_total, failed, publisher, outcome)
        outcome.acked, outcome.failed = len(acked), len(failed)
        for graph, event in acked.items():
            n = await _held(publisher, event, outcome)
            if n is None:
                continue
            if n == len(event):
                outcome.whole += 1
            elif n == 0:
                outcome.lost += 1
            else:
                outcome.partial += 1
        for graph, event in failed.items():
            n = await _held(publisher, event, outcome)
            if n is not None and n not in (0, len(event)):
                outcome.partial += 1
        outcome.missing = sum(1 for g in acked if g not in seen)
        outcome.dup = sum(1 for n in seen.values() if n > 1)
        after = await _epochs(etcd.url)
        for ident, (epoch, address) in before.items():
            port_host = address.rpartition(":")[0]
            index = next((i for i in range(len(cluster.addresses)) if hosts.addresses.get(f"p{i}") == port_host), None)
            if index is not None and index not in faulted and ident in after and after[ident][0] > epoch:
                outcome.live_deposed += 1
                outcome.notes.append(f"peer {index} ({ident}) was never faulted, yet its epoch went {epoch} -> "
                                     f"{after[ident][0]}")


async def _holder_of_most_copies(cluster: NetnsCluster, publisher) -> int:
    """The index of the peer (past the clients' two entries) holding the most copies of others' zones."""
    status = await publisher.status()
    held = {p.address: p.counters.get("replicas_held", 0) for p in status.peers}
    return max(range(2, len(cluster.addresses)), key=lambda i: held.get(cluster.addresses[i], 0))


async def _inject(scenario: str, cluster: NetnsCluster, hosts: Hosts, args: argparse.Namespace, faulted: set[int],
                  outcome: Outcome, publisher) -> None:
    last = len(cluster.addresses) - 1
    if scenario == "replica-cut":
        last = await _holder_of_most_copies(cluster, publisher)
        outcome.notes.append(f"cut off: peer {last}, the holder of the most copies")
        faulted.add(last)
        hosts.cut(f"p{last}")
        await trio.sleep(args.seconds)
        hosts.heal(f"p{last}")
    elif scenario == "minority":
        minority = [last - 1, last]
        faulted.update(minority)
        hosts.isolate([f"p{i}" for i in minority])
        await trio.sleep(4)
        outcome.minority_refused = await _publish_inside(hosts, f"p{last}", cluster.addresses[last],
                                                         seconds=max(1.0, args.seconds - 6))
        await trio.sleep(max(0.0, args.seconds - 4 - max(1.0, args.seconds - 6)))
        for i in minority:
            hosts.heal(f"p{i}")
    elif scenario == "pause":
        faulted.add(last)
        os.kill(cluster.processes[last].pid, signal.SIGSTOP)
        try:
            await trio.sleep(args.seconds)
        finally:
            os.kill(cluster.processes[last].pid, signal.SIGCONT)
    elif scenario == "slow":
        hosts.slow(f"p{last}", "16kbit")   # live: it must keep its zone (not counted as faulted)
        try:
            await trio.sleep(args.seconds)
        finally:
            hosts.unslow(f"p{last}")
    elif scenario == "loaded":
        # every peer live, the machine's cores taken by busy loops: no zone may change hands
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(BUSY_LOOPS)]
        try:
            await trio.sleep(args.seconds)
            outcome.notes.append(f"{BUSY_LOOPS} busy loops for {args.seconds:g} s; load average (1, 5 min) at the "
                                 f"end: {os.getloadavg()[0]:.1f}, {os.getloadavg()[1]:.1f}")
        finally:
            for proc in busy:
                proc.kill()
                proc.wait()
    elif scenario == "kill-restart":
        faulted.add(last)
        await trio.to_thread.run_sync(cluster.stop_peer, last, signal.SIGKILL)
        await trio.sleep(5)
        await trio.to_thread.run_sync(cluster.start_peer, last)
        await trio.sleep(max(0.0, args.seconds - 5))
    elif scenario == "wipe-first":
        faulted.add(0)
        await trio.to_thread.run_sync(cluster.stop_peer, 0, signal.SIGKILL)
        shutil.rmtree(cluster.data_dir / "peer-0", ignore_errors=True)
        command = [c for c in cluster.commands[0] if c != "--stop-with-stdin"]
        proc = None
        with trio.move_on_after(30):   # one that starts a second overlay serves on: stopped here
            proc = await trio.run_process(command, capture_stdout=True, capture_stderr=True, check=False,
                                          stdin=subprocess.DEVNULL)
        said = (proc.stderr or b"").decode(errors="replace").strip().splitlines() if proc else ["still serving"]
        refused = proc is not None and proc.returncode != 0 and any("second overlay" in line for line in said)
        outcome.minority_refused = refused   # reported in the same column: the forbidden write was refused
        outcome.notes.append(f"wiped first peer restarted with its command: exit {proc and proc.returncode}: "
                             f"{said[-1] if said else ''}"[:240])
        await trio.sleep(args.seconds)
    elif scenario in ("clock-ahead", "clock-behind"):
        faulted.add(last)
        await trio.to_thread.run_sync(cluster.stop_peer, last)   # SIGTERM: it keeps its zone and data
        shift = "+2h" if scenario == "clock-ahead" else "-2h"
        command = [c for c in cluster.commands[last] if c != "--stop-with-stdin"]
        at = command.index(sys.executable)
        # this host's clock, two hours off: libfaketime preloaded through env, which execs the peer
        # (the faketime command forks it instead, and a peer still serving would outlive its kill)
        command[at:at] = ["env", f"LD_PRELOAD={FAKETIME_LIBRARY}", f"FAKETIME={shift}"]
        proc = None
        with trio.move_on_after(30):   # one that serves with its clock off is killed here
            proc = await trio.run_process(command, capture_stdout=True, capture_stderr=True, check=False,
                                          stdin=subprocess.DEVNULL, deliver_cancel=_kill)
        said = (proc.stderr or b"").decode(errors="replace").strip().splitlines() if proc else ["still serving"]
        refused = proc is not None and proc.returncode != 0 and any("clock" in line for line in said)
        outcome.minority_refused = refused   # the same column: the peer with the wrong clock did not serve
        outcome.notes.append(f"peer {last} restarted {shift}: exit {proc and proc.returncode}: "
                             f"{said[-1] if said else ''}"[:300])
        await trio.sleep(max(0.0, args.seconds - 5))
        await trio.to_thread.run_sync(cluster.start_peer, last)   # its clock set right: it comes back
    else:
        raise SystemExit(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")


async def _kill(process: trio.Process) -> None:
    """A peer still serving when its time is up: killed at once (its lock freed for its restart)."""
    process.kill()
    await process.wait()


async def _publish_inside(hosts: Hosts, host: str, address: str, seconds: float) -> bool:
    """A publication from inside the minority, to a minority peer: True if it was refused (not
    acknowledged within `seconds`)."""
    event = events(1, f"minority-{time.monotonic_ns()}")[0]
    text = io.StringIO()
    write_nquads([event], text)
    command = hosts.run(host, ["timeout", f"{seconds:.0f}", sys.executable, "-m", "eventcloud", "publish",
                               "--peer", address, "-"])
    proc = await trio.run_process(command, stdin=text.getvalue().encode(), capture_stdout=True,
                                  capture_stderr=True, check=False)
    return proc.returncode != 0


async def _held(publisher, event, outcome: Outcome) -> int | None:
    """How many quads of `event` the overlay holds; None (noted) if it cannot say within 20 s: an
    overlay that did not converge is reported so, not taken for one that lost the event."""
    for _ in range(10):
        try:
            with trio.fail_after(10):
                return len(await publisher.find(event.graph))
        except (ClientError, trio.TooSlowError) as exc:
            why = str(exc)
        await trio.sleep(2)
    outcome.notes.append(f"{event.graph.value}: unreadable ({why[:80]})")
    return None


async def _converged(cluster: NetnsCluster, healed: float, expected: int, failed: dict, publisher,
                     outcome: Outcome) -> float | None:
    """Seconds after healing until COUNT(*) through every peer is exact (None: not within 60 s).
    Events whose publication failed count when they are whole (they may have committed)."""
    extra = 0
    for event in failed.values():   # read as the overlay heals: a peer still rejoining may not answer yet
        n = await _held(publisher, event, outcome)
        extra += n if n == len(event) else 0
    want = expected + extra
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        counts = []
        for index, address in enumerate(cluster.addresses):
            if cluster.processes[index].poll() is not None:
                continue   # not running (the wiped first peer refused to start)
            try:
                with trio.fail_after(5):
                    async with connect(address, source="faults-count") as client:
                        counts.append(await client.count())
            except (ClientError, trio.TooSlowError, OSError):
                counts.append(None)
        if all(c == want for c in counts):
            return round(time.monotonic() - healed, 1)
        await trio.sleep(1)
    return None


def table(outcomes: list[Outcome]) -> str:
    head = ["scenario", "algorithm", "acked", "failed", "whole", "partial", "lost", "missing", "dup", "converged",
            "live-deposed", "refused"]
    rows = [head] + [[o.scenario, o.algorithm, o.acked, o.failed, o.whole, o.partial, o.lost, o.missing, o.dup,
                      "-" if o.converged is None else f"{o.converged:g} s", o.live_deposed,
                      "" if o.minority_refused is None else ("yes" if o.minority_refused else "NO")]
                     for o in outcomes]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--algorithms", default="osma,csma")
    parser.add_argument("--peers", type=int, default=6)
    parser.add_argument("--rate", type=float, default=20.0, help="events published per second")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long each fault lasts")
    parser.add_argument("--failure-timeout", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--json", action="store_true", help="print the outcomes as JSON too")
    parser.add_argument("--cleanup", action="store_true", help="only remove namespaces and links a killed run left")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("experiments.faults needs root (network namespaces, links, tc)", file=sys.stderr)
        return 2
    if args.cleanup:
        print("removed:", ", ".join(remove_leftovers()) or "nothing")
        return 0
    if shutil.which("etcd") is None:
        print("experiments.faults needs etcd (Debian's etcd-server)", file=sys.stderr)
        return 2
    outcomes = []
    for scenario in args.scenarios.split(","):
        for algorithm in args.algorithms.split(","):
            print(f"== {scenario} ({algorithm})", file=sys.stderr, flush=True)
            outcome = trio.run(run_scenario, scenario, algorithm, args)
            for note in outcome.notes[:12]:
                print(f"   {note}", file=sys.stderr)
            outcomes.append(outcome)
            print(table([outcome]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(outcomes))
    if args.json:
        print(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
