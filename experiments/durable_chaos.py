"""Durable subscribers under fire, with real processes, and a check of what they printed.

    python -m experiments.durable_chaos [--peers 6] [--events 600] [--rate 20] [--algorithms osma,csma]
                                        [--rounds 4] [--every 5] [--away 3] [--down 4] [--seed 1]

Starts a local cluster, a durable `eventcloud subscribe` process (a FILTER subscription that
matches about half of the events) entering through the victim peers, and an SDK publisher on
peers 0 and 1 streaming events at --rate. Every --every seconds one of two things happens, in
turn: the subscriber process is killed (kill -9) and a new one resumes the subscription
(`--resume ID`, ticket and place from the state directory) through another peer --away
seconds later; or the subscriber's entry peer is killed (kill -9; the subscriber fails over)
and restarted --down seconds later. When publishing is over it waits for the notifications to
settle and prints, per algorithm:

    acknowledged   publications the SDK saw succeed
    expected       acknowledged events the subscription matches
    printed        notification lines printed, by every incarnation of the subscriber
    missing        expected events never printed
    duplicated     events printed more than once (reprints below apart)
    reprinted      the last line of a killed subscriber printed again, with the same number,
                   first thing by the one that resumed (killed between printing and saving
                   its place: the CLI prints at least once across its own kill -9; the
                   overlay delivered it once)
    out of order   places where the numbers printed did not go up by exactly one (reprints apart)
    gaps           gap notices (retention overflowed; none expected at these sizes)
    unexpected     printed events that were not expected (unacknowledged or not matching)
    reconnects     fail-overs the subscribers reported on stderr

The exit code is 1 when anything was missing, duplicated or out of order.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import trio

from eventcloud.client import ClientError, connect
from eventcloud.testing.processes import CliSubscriber
from experiments.chaos import FILTERED, events, expected_pairs, print_reports, settle
from peers.supervisor import LocalCluster


@dataclass
class Report:
    algorithm: str
    acknowledged: int = 0
    expected: int = 0
    printed: int = 0
    missing: int = 0
    duplicated: int = 0
    reprinted: int = 0
    out_of_order: int = 0
    gaps: int = 0
    unexpected: int = 0
    reconnects: int = 0
    actions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.out_of_order)


async def run_once(algorithm: str, args: argparse.Namespace) -> Report:
    report = Report(algorithm)
    evs = events(args.events, args.seed)
    matching = expected_pairs(evs)["filtered"]
    rng = random.Random(args.seed)
    state = Path(tempfile.mkdtemp(prefix="durable-chaos-"))
    env = {"EVENTCLOUD_STATE_DIR": str(state)}
    cluster = LocalCluster(args.peers, algorithm=algorithm, seed=args.seed, log_level=args.log_level,
                           extra=["--failure-timeout", str(args.failure_timeout)])
    started = time.monotonic()
    await trio.to_thread.run_sync(cluster.start)
    victims = list(range(2, args.peers))
    incarnations: list[CliSubscriber] = []
    acked: set[str] = set()

    def entries(first: int) -> list[str]:
        order = [first] + [i for i in victims if i != first]
        return [a for i in order for a in ("--peer", cluster.addresses[i])]

    def entry_of(sub: CliSubscriber, first: int) -> int:
        """The peer the subscriber is connected to now (its last reconnection, else its first peer)."""
        text = sub.stderr.decode(errors="replace")
        reconnected = [line.rsplit(" ", 1)[-1] for line in text.splitlines() if "reconnected to" in line]
        if reconnected and reconnected[-1] in cluster.addresses:
            return cluster.addresses.index(reconnected[-1])
        return first

    def printed() -> list[dict]:
        return [n for s in incarnations for n in s.notifications]

    try:
        async with trio.open_nursery() as nursery:
            first = rng.choice(victims)
            sub = CliSubscriber([*entries(first), "--durable", "--kind", "signal", FILTERED], env)
            incarnations.append(sub)
            await nursery.start(sub.run)
            header = await sub.first_line()
            ident = header["subscription"]

            async def chaos(done: trio.Event) -> None:
                nonlocal sub, first
                for k in range(args.rounds):
                    await trio.sleep(args.every)
                    if done.is_set():
                        return
                    at = f"{time.monotonic() - started:.1f} s"
                    if k % 2 == 0:
                        sub.kill()
                        await trio.sleep(args.away)
                        first = rng.choice(victims)
                        sub = CliSubscriber([*entries(first), "--resume", ident], env)
                        incarnations.append(sub)
                        await nursery.start(sub.run)
                        report.actions.append(f"subscriber killed at {at}, resumed through peer {first}")
                    else:
                        index = entry_of(sub, first)
                        await trio.to_thread.run_sync(cluster.stop_peer, index, signal.SIGKILL)
                        await trio.sleep(args.down)
                        await trio.to_thread.run_sync(cluster.start_peer, index, cluster.commands[index])
                        report.actions.append(f"entry peer {index} killed at {at}, restarted {args.down:g} s later")
                    print(f"  {report.actions[-1]}", file=sys.stderr)

            done = trio.Event()
            nursery.start_soon(chaos, done)
            async with connect([cluster.addresses[0], cluster.addresses[1]], source="durable-chaos") as publisher:
                for event in evs:
                    try:
                        await publisher.publish(event)
                        acked.add(event.graph.value)
                    except ClientError as exc:
                        print(f"  publication failed: {exc}", file=sys.stderr)
                    await trio.sleep(1 / args.rate)
            done.set()
            want = matching & acked
            await settle(lambda: len(printed()), lambda: want <= {n["event"] for n in printed()},
                         quiet=30, at_most=args.settle)
            await trio.sleep(2)   # late repeats, if any, are printed too
            for s in incarnations:
                s.kill()
            nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    notes, reprints = _without_reprints([s.notifications for s in incarnations])
    report.reprinted = len(reprints)
    report.problems += [f"reprinted after a kill: #{n['seq']} {n['event']}" for n in reprints]
    seen = Counter(n["event"] for n in notes if n.get("kind") != "gap")
    want = matching & acked
    report.acknowledged, report.expected = len(acked), len(want)
    report.printed = len(notes) + len(reprints)
    report.missing = len(want - set(seen))
    report.problems += [f"missing {g}" for g in sorted(want - set(seen))[:20]]
    report.duplicated = sum(1 for n in seen.values() if n > 1)
    report.problems += [f"printed {n}x {g}" for g, n in seen.items() if n > 1][:20]
    report.gaps = sum(1 for n in notes if n.get("kind") == "gap")
    report.unexpected = len(set(seen) - want)
    numbers = [n["seq"] for n in notes]
    report.out_of_order = sum(1 for a, b in zip(numbers, numbers[1:]) if b != a + 1) + (numbers[:1] not in ([], [1]))
    report.reconnects = sum(s.stderr.count(b"reconnected to") for s in incarnations)
    report.seconds = time.monotonic() - started
    return report


def _without_reprints(printed: list[list[dict]]) -> tuple[list[dict], list[dict]]:
    """Every incarnation's lines in order, and apart the reprints: the first line of an
    incarnation equal (event and number) to the last line of the one before it, which was
    killed (every incarnation but the last is)."""
    notes: list[dict] = []
    reprints: list[dict] = []
    last: dict | None = None
    for lines in printed:
        for i, note in enumerate(lines):
            if i == 0 and last is not None and (note.get("event"), note.get("seq")) == (last.get("event"), last.get("seq")):
                reprints.append(note)
            else:
                notes.append(note)
        if lines:
            last = lines[-1]
    return notes, reprints


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=6)
    parser.add_argument("--events", type=int, default=600)
    parser.add_argument("--rate", type=float, default=20.0, help="events per second [20]")
    parser.add_argument("--algorithms", default="osma,csma")
    parser.add_argument("--rounds", type=int, default=4, help="kills, alternating subscriber and entry peer [4]")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between kills [5]")
    parser.add_argument("--away", type=float, default=3.0, help="seconds before a killed subscriber resumes [3]")
    parser.add_argument("--down", type=float, default=4.0, help="seconds a killed entry peer stays down [4]")
    parser.add_argument("--failure-timeout", type=float, default=3.0)
    parser.add_argument("--settle", type=float, default=180.0, help="longest wait for the last notifications [180]")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="also print the reports as JSON lines")
    parser.add_argument("--log-level", default="error", help="of the peers [error]")
    args = parser.parse_args(argv)
    if args.peers < 4:
        parser.error("--peers must be at least 4 (two publisher entries and two victims)")
    reports = []
    for algorithm in args.algorithms.split(","):
        print(f"== {algorithm}: {args.peers} peers, {args.events} events at {args.rate:g}/s, {args.rounds} kills",
              file=sys.stderr)
        reports.append(trio.run(run_once, algorithm, args))
    return print_reports(reports, ["acknowledged", "expected", "printed", "missing", "duplicated", "reprinted",
                                   "out_of_order", "gaps", "unexpected", "reconnects"], "actions", args.json)


if __name__ == "__main__":
    raise SystemExit(main())
