"""Popular subscriptions on one peer: what identical subscriptions cost, stored and matched.

    python -m experiments.popular_bench [--subscriptions 20000] [--distinct 1000] [--events 300]
                                        [--baseline COMMIT] [--seed 0]

Many subscribers often send the *same* subscription (a dashboard's query, an application's
fixed templates). Workload: `--distinct` chain subscriptions of the paper's workload (k = 5),
and `--subscriptions` subscribers, each picking one of them with Zipf popularity (s = 1), so a
few texts are held by thousands; kinds alternate signal / bindings / event. Events are the
workload's, one matching chain each, drawn so that popular chains come up as often as they are
held (an event matching a subscription picked at random).

Measured in one process, as one peer holds them (`peers.matching.registry.Subscriptions` with its
`SubscriptionIndex`): memory per stored subscription (tracemalloc: the registry's records and
parsed forms with its index, and the index's entries apart, measured in a second index), the index's entries, and OSMA's matching work
per event (the index's match, then the notifier rule and solutions of every matched
subscription, as `peers.matching.matcher` does), in microseconds. With `--baseline COMMIT` the same script
runs first on that commit's code (a temporary worktree), so both rows come from one run.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

KINDS = ("signal", "bindings", "event")


def workload(args: argparse.Namespace) -> tuple[list[tuple[str, str]], list[Any]]:
    """(id, text, kind) of every subscriber, and the events, in a fixed order."""
    from experiments.workloads import generate

    made = generate(events=args.distinct, subscriptions=args.distinct, k=5, seed=args.seed)
    rng = random.Random(args.seed)
    weights = [1 / (rank + 1) for rank in range(args.distinct)]
    picks = rng.choices(range(args.distinct), weights=weights, k=args.subscriptions)
    subscribers = [(f"{i:032x}", made.subscriptions[pick], KINDS[i % 3]) for i, pick in enumerate(picks)]
    # the event matching chain j is made.events[j] (round-robin, one per chain): pick by holder
    events = [made.events[picks[rng.randrange(len(picks))]] for _ in range(args.events)]
    return subscribers, events


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import msgpack

    import eventcloud
    from eventcloud.matching import osma
    from eventcloud.matching.reference import event_index
    from eventcloud.sparql.subscription import parse_subscription
    from eventcloud.wire.messages import SubscriptionRecord
    from eventcloud.wire.parsed import subscription_to_wire
    from experiments.benchkit import memory_of, percentile
    from peers.store import AsyncStore
    from peers.store import PeerState
    from peers.store import PeerStore
    from peers.matching import Subscriptions

    subscribers, events = workload(args)
    parsed = {text: subscription_to_wire(parse_subscription(text)) for _, text, _ in subscribers}
    frames = [msgpack.packb(SubscriptionRecord(ident, text, kind, "127.0.0.1:7000", 10 ** 15 + n,
                                               parsed=parsed[text]).to_wire())
              for n, (ident, text, kind) in enumerate(subscribers)]
    registry = Subscriptions(PeerState(), AsyncStore(PeerStore(None), False), Counter(), tombstone_ttl=60)
    index = registry.index
    held, records = memory_of(lambda: [registry._put(SubscriptionRecord.from_wire(msgpack.unpackb(f)))
                                       for f in frames])
    again = type(index)()  # the index's entries apart, measured in a second index and taken off
    indexed, _ = memory_of(lambda: [again.add(s.id, s.sub) for s in records])
    held -= indexed
    del again

    shared = "memo" in inspect.signature(osma.decide).parameters
    timings, notified = [], 0
    for round_ in range(2):  # the first round warms up
        for event in events:
            started = time.perf_counter()
            ordered = osma.in_notifier_order(event)
            view = event_index(ordered)
            memo: dict = {}
            count = 0
            for ident in index.match_event(ordered):
                stored = registry.get(ident)
                want = stored.kind == "bindings"
                if shared:
                    position, _ = osma.decide(stored.sub, view, want_solutions=want, memo=memo)
                else:
                    position, _ = osma.decide(stored.sub, view, want_solutions=want)
                count += position is not None
            if round_:
                timings.append((time.perf_counter() - started) * 1e6)
                notified += count
    stats = index.stats()
    return {
        "code": str(Path(eventcloud.__file__).resolve().parent.parent),
        "subscriptions": len(subscribers), "distinct": len(set(t for _, t, _ in subscribers)),
        "entries": stats.get("entries", stats["subscriptions"]),
        "registry_b": held / len(subscribers), "index_b": indexed / len(subscribers),
        "us_p50": statistics.median(timings), "us_p99": percentile(timings, 99),
        "notified_per_event": notified / len(events),
    }


def run_on(commit: str, args: argparse.Namespace) -> dict[str, Any]:
    """This script, run on `commit`'s code (its eventcloud and peers packages)."""
    from experiments.clusterkit import baseline_tree

    with baseline_tree(commit) as tree:
        here = Path(__file__).resolve()
        env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{here.parent.parent}"}
        argv = [sys.executable, "-c", f"import runpy, sys; sys.argv = {[str(here), *_own_args(args)]!r}; "
                f"runpy.run_path({str(here)!r}, run_name='__main__')"]
        done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the baseline run failed:\n{done.stderr[-2000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if not result["code"].startswith(str(tree)):
            raise SystemExit(f"the baseline run used {result['code']}, not {tree}")
        return result


def _own_args(args: argparse.Namespace) -> list[str]:
    return ["--json", "--subscriptions", str(args.subscriptions), "--distinct", str(args.distinct),
            "--events", str(args.events), "--seed", str(args.seed)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=20000, help="subscribers [20000]")
    parser.add_argument("--distinct", type=int, default=1000, help="distinct subscription texts [1000]")
    parser.add_argument("--events", type=int, default=300, help="events matched [300]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", help="also run this commit's code, first, in the same run")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.subscriptions < 1 or not 1 <= args.distinct or args.events < 1:
        parser.error("--subscriptions, --distinct and --events must be ≥ 1")
    if args.json:
        print(json.dumps(measure(args)))
        return
    rows = []
    if args.baseline:
        rows.append((args.baseline[:8], run_on(args.baseline, args)))
    rows.append(("this", measure(args)))
    from experiments.benchkit import table

    print(f"{args.subscriptions:,} subscriptions of {args.distinct:,} distinct chains (Zipf), "
          f"{args.events} events, one peer's registry and index, OSMA matching")
    print(table(["code", "index entries", "registry B/sub", "index B/sub", "B/sub", "match µs/event p50",
                 "p99", "notified/event"],
                [(name, f"{r['entries']:,}", f"{r['registry_b']:,.0f}", f"{r['index_b']:,.0f}",
                  f"{r['registry_b'] + r['index_b']:,.0f}", f"{r['us_p50']:,.0f}", f"{r['us_p99']:,.0f}",
                  f"{r['notified_per_event']:,.1f}") for name, r in rows]))


if __name__ == "__main__":
    main()
