"""Expensive operators and overlapping subscriptions (shared evaluation, ordering and merging), measured.

    python -m experiments.operators_bench                     # everything below, default sizes
    python -m experiments.operators_bench --part paper        # one part: paper | stats | overlap | e2e
    python -m experiments.operators_bench --part paper --events 50 --sizes 2000,20000,80000

**paper** — the paper's setting (its Table 1): N_p predicates with uniform or Zipf (α = 1)
popularity, N_s subscriptions of 3..d predicates drawn by popularity, events on which each
predicate holds independently with its selectivity, calibrated so that about 0.2% of the
subscriptions match. naive, Sequential and Sub-Order (eventcloud.matching.ordering) run on the
same events in one run; printed: predicate evaluations and wall time per event (the planner's
own time; a predicate's evaluation is a table lookup here), with the answers checked equal to
brute force on every event, and two yardsticks beside them: a lower bound on what any order
must evaluate for the event, and what the greedy set-cover rule evaluates knowing every answer
beforehand (`yardsticks`). Sub-Order reads the true selectivities (as offline statistics
would give them); a row with unequal costs (1, 10 or 100 units) shows the cost-aware extension.

**stats** — Sub-Order starting with no statistics (every predicate 0.5), with statistics learnt
online as events arrive, and with offline statistics computed by the Spark job
(experiments/spark/statistics.py) over a history of earlier events.

**overlap** — the shared index on the overlapping operator workload (eventcloud.testing.
operator_workload: identical, contained and partially overlapping subscriptions over readings):
operator calls per event evaluating each subscription alone vs shared, and residual predicate
evaluations with and without containment pruning and with access-frequency merging.

**e2e** — a local overlay (4 in-process peers over memory streams, real clock, operator calls in
threads) with the deliberately expensive text similarity: wall time per event until every
notification arrived, operator calls, and predicate evaluations, per order.
"""

from __future__ import annotations

import argparse
from collections import Counter
import heapq
import random
import time
from bisect import bisect
from itertools import accumulate
from typing import Any, Callable

from eventcloud.matching.ordering import ORDERS, ResidualPlan

__all__ = ["paper_workload", "run_orders", "yardsticks", "main"]


# --- the paper's synthetic setting --------------------------------------------------------------

def _calibrate(d: int, target: float) -> float:
    """m such that, with p ~ U(0, 2m), a subscription of U{3..d} predicates matches w.p. ~target."""
    lo, hi = 0.0, 0.5
    lengths = range(3, d + 1)
    for _ in range(60):
        m = (lo + hi) / 2
        rate = sum(min(1.0, 2 * m) ** l / (l + 1) for l in lengths) / len(lengths)
        lo, hi = (m, hi) if rate < target else (lo, m)
    return (lo + hi) / 2


def paper_workload(n_p: int, n_s: int, model: str, d: int, seed: int = 1, target: float = 0.002):
    """(selectivities, subscriptions as predicate lists) of the paper's generator."""
    rng = random.Random(seed)
    m = _calibrate(d, target)
    selectivity = [min(1.0, rng.uniform(0, 2 * m)) for _ in range(n_p)]
    weights = [1.0 / (r + 1) for r in range(n_p)] if model == "zipf" else [rng.random() for _ in range(n_p)]
    cumulative = list(accumulate(weights))
    total = cumulative[-1]
    subs = []
    for _ in range(n_s):
        length = rng.randint(3, d)
        chosen: dict[int, None] = {}
        while len(chosen) < length:
            chosen[bisect(cumulative, rng.random() * total)] = None
        subs.append(list(chosen))
    return selectivity, subs


def run_orders(subs: list[list[int]], truths: list[list[bool]], estimate: Callable[[Any], tuple[float, float]],
               cost: Callable[[int], float] = lambda k: 1.0, orders=ORDERS) -> dict[str, dict[str, float]]:
    """Per order: mean evaluations, mean evaluated cost and mean µs per event; answers checked."""
    out: dict[str, dict[str, float]] = {}
    expected = [[i for i, s in enumerate(subs) if all(truth[k] for k in s)] for truth in truths]
    for order in orders:
        evaluations = spent = seconds = 0.0
        for truth, want in zip(truths, expected):
            started = time.perf_counter()
            plan = ResidualPlan(order, estimate)
            for i, preds in enumerate(subs):
                plan.add(i, i, [preds])
            while (key := plan.next()) is not None:
                spent += cost(key)
                plan.record(key, truth[key])
            got = plan.matched()
            seconds += time.perf_counter() - started
            if got != want:
                raise AssertionError(f"{order}: answers differ from brute force")
            evaluations += plan.evaluations
        n = len(truths)
        out[order] = {"evaluations": evaluations / n, "cost": spent / n, "ms": seconds / n * 1000}
    return out


def yardsticks(subs: list[list[int]], truth: list[bool]) -> tuple[float, int]:
    """Two figures no order is measured against directly, to read the orders' counts by: a lower
    bound on the evaluations of *any* order for this event, and what the greedy set-cover rule
    evaluates when it knows every answer beforehand.

    Any correct evaluation evaluates every predicate of a matched subscription and, for each other
    one, one of its false predicates: the false predicates it evaluates cover the unmatched
    subscriptions. Giving each unmatched subscription the weight 1 / (the most unmatched
    subscriptions one of its false predicates holds) is a feasible dual of that set cover's linear
    relaxation, so the weights' sum (plus the matched ones' predicates) is a lower bound. The greedy
    rule evaluates the matched ones' predicates, then the false predicate holding the most still
    undecided subscriptions, until none is left.
    """
    matched = [preds for preds in subs if all(truth[k] for k in preds)]
    must = {k for preds in matched for k in preds}
    unmatched = [i for i, preds in enumerate(subs) if not all(truth[k] for k in preds)]
    holders: dict[int, set[int]] = {}
    for i in unmatched:
        for k in subs[i]:
            if not truth[k]:
                holders.setdefault(k, set()).add(i)
    bound = len(must) + sum(1 / max(len(holders[k]) for k in subs[i] if not truth[k]) for i in unmatched)
    undecided, greedy = set(unmatched), 0
    heap = [(-len(held), k) for k, held in holders.items()]
    heapq.heapify(heap)
    while undecided:
        _, k = heapq.heappop(heap)
        gain = len(holders[k] & undecided)
        if gain and heap and gain < -heap[0][0]:
            heapq.heappush(heap, (-gain, k))   # stale count: put it back with the true one
        elif gain:
            greedy += 1
            undecided -= holders[k]
    return bound, len(must) + greedy


def _events(selectivity: list[float], n: int, seed: int) -> list[list[bool]]:
    rng = random.Random(seed)
    return [[rng.random() < p for p in selectivity] for _ in range(n)]


def part_paper(args: argparse.Namespace) -> None:
    print("## The paper's setting (Liu et al., Table 1)\n")
    print("evaluations = distinct predicates evaluated per event; ms = planner wall time per event; "
          f"{args.events} events per row; answers equal brute force on every event; greedy knowing answers "
          "and lower bound: yardsticks (`yardsticks`), not orders\n")
    print("| figure | model | N_p | N_s | d | matched/event | naive eval | Sequential eval | Sub-Order eval "
          "| Seq vs naive | Sub-Order vs naive | greedy knowing answers | lower bound | naive ms | Seq ms | Sub-Order ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for model, fig in (("uniform", "4"), ("zipf", "5")):
        rows += [(fig, model, 40_000, n_s, 5) for n_s in args.sizes]
    rows += [("6", "zipf", n_p, 20_000, 5) for n_p in (2_000, 10_000, 30_000)]
    rows += [("7", "zipf", 5_000, 20_000, d) for d in (5, 8, 11)]
    for fig, model, n_p, n_s, d in rows:
        selectivity, subs = paper_workload(n_p, n_s, model, d, seed=args.seed)
        truths = _events(selectivity, args.events, args.seed + 1)
        result = run_orders(subs, truths, lambda k: (1.0, selectivity[k]))
        matched = sum(sum(1 for s in subs if all(t[k] for k in s)) for t in truths) / len(truths)
        nv, sq, so = (result[o] for o in ORDERS)
        bound, greedy = (sum(v) / len(truths) for v in zip(*(yardsticks(subs, t) for t in truths)))
        print(f"| {fig} | {model} | {n_p:,} | {n_s:,} | {d} | {matched:.1f} | {nv['evaluations']:,.0f} "
              f"| {sq['evaluations']:,.0f} | {so['evaluations']:,.0f} | {1 - sq['evaluations'] / nv['evaluations']:.0%} "
              f"| {1 - so['evaluations'] / nv['evaluations']:.0%} | {greedy:,.0f} | {bound:,.0f} "
              f"| {nv['ms']:.1f} | {sq['ms']:.1f} | {so['ms']:.1f} |", flush=True)
    # unequal costs: the cost-aware extension (Sub-Order weighs nodes by cost)
    rng = random.Random(args.seed + 7)
    selectivity, subs = paper_workload(5_000, 20_000, "zipf", 5, seed=args.seed)
    costs = [rng.choice([1.0, 10.0, 100.0]) for _ in selectivity]
    truths = _events(selectivity, args.events, args.seed + 1)
    aware = run_orders(subs, truths, lambda k: (costs[k], selectivity[k]), cost=lambda k: costs[k])
    blind = run_orders(subs, truths, lambda k: (1.0, selectivity[k]), cost=lambda k: costs[k], orders=("suborder",))
    print("\nUnequal costs (1, 10 or 100 units at random; N_p 5,000, N_s 20,000, Zipf, d 5; "
          "Sequential's bound d·Cmax/Cmin = 500):\n")
    print("| order | evaluations | cost units per event | ms |")
    print("|---|---:|---:|---:|")
    for order in ORDERS:
        print(f"| {order} | {aware[order]['evaluations']:,.0f} | {aware[order]['cost']:,.0f} | {aware[order]['ms']:.1f} |")
    print(f"| suborder, costs ignored | {blind['suborder']['evaluations']:,.0f} | {blind['suborder']['cost']:,.0f} "
          f"| {blind['suborder']['ms']:.1f} |\n", flush=True)


# --- statistics: none, online, offline (Spark) -----------------------------------------------------

def part_stats(args: argparse.Namespace) -> None:
    from eventcloud.matching.statistics import Statistics

    n_p, n_s = 5_000, 20_000
    selectivity, subs = paper_workload(n_p, n_s, "zipf", 5, seed=args.seed)
    history = _events(selectivity, 200, args.seed + 3)
    truths = _events(selectivity, args.events, args.seed + 1)
    offline = _offline_statistics(history, args.spark)
    online = Statistics()

    def learnt(key: int) -> tuple[float, float]:
        return 1.0, online.selectivity(str(key))

    rows = []
    none = run_orders(subs, truths, lambda k: (1.0, 0.5), orders=("suborder",))["suborder"]
    rows.append(("no statistics (every p = 0.5)", none))
    rows.append(("offline (Spark job over 200 earlier events)",
                 run_orders(subs, truths, lambda k: (1.0, offline.selectivity(str(k))), orders=("suborder",))["suborder"]))
    # online: learn from each event's evaluated predicates, as a peer does
    evaluations = 0.0
    for truth in truths:
        plan = ResidualPlan("suborder", learnt)
        for i, preds in enumerate(subs):
            plan.add(i, i, [preds])
        while (key := plan.next()) is not None:
            plan.record(key, truth[key])
            online.observe_predicate(str(key), truth[key])
        evaluations += plan.evaluations
    rows.append(("online (learnt from the events before)", {"evaluations": evaluations / len(truths)}))
    rows.append(("true selectivities", run_orders(subs, truths, lambda k: (1.0, selectivity[k]),
                                                  orders=("suborder",))["suborder"]))
    naive = run_orders(subs, truths, lambda k: (1.0, 0.5), orders=("naive",))["naive"]
    print("## Statistics (Sub-Order; N_p 5,000, N_s 20,000, Zipf, d 5)\n")
    print(f"| statistics | evaluations per event | vs naive ({naive['evaluations']:,.0f}) |")
    print("|---|---:|---:|")
    for label, row in rows:
        print(f"| {label} | {row['evaluations']:,.0f} | {1 - row['evaluations'] / naive['evaluations']:.0%} |")
    print(flush=True)


def _offline_statistics(history: list[list[bool]], use_spark: bool):
    """Statistics of the predicates over a history, through the Spark job (or its plain-Python twin)."""
    from eventcloud.matching.statistics import Statistics
    from experiments.spark.statistics import predicate_counts

    records = [{"template": str(k), "value": v} for truth in history for k, v in enumerate(truth)]
    if use_spark:
        from experiments.spark import session

        spark = session("operators-bench", "local[2]")
        try:
            return Statistics.from_dict(predicate_counts(spark.createDataFrame(records), events=len(history)))
        finally:
            spark.stop()
    stats = Statistics()
    for record in records:
        stats.observe_predicate(record["template"], record["value"])
    return stats


# --- the shared index on overlapping operator subscriptions ----------------------------------------

def part_overlap(args: argparse.Namespace) -> None:
    from eventcloud.matching.index import SubscriptionIndex
    from eventcloud.matching.reference import matches
    from eventcloud.sparql.filters.operators import CallTable, active, call_operator
    from eventcloud.sparql.subscription import parse_subscription
    from eventcloud.testing.operator_workload import CountingOperators, overlapping_workload, reading

    rng = random.Random(args.seed)
    ops = CountingOperators()
    opset = ops.operator_set()
    texts = overlapping_workload(rng, args.overlap_subs)
    parsed: dict[str, Any] = {}
    subs = [parsed.setdefault(t, None) or parsed.__setitem__(t, parse_subscription(t, operators=opset)) or parsed[t]
            for t in texts]
    events = [reading(random.Random(10_000 + i), i, sensors=4) for i in range(args.events)]
    ops.calls.clear()
    alone_answers = [[i for i, s in enumerate(subs) if matches(s, e)] for e in events]
    alone_calls = ops.total() / len(events)
    print(f"## Overlapping operator subscriptions ({len(subs):,} subscriptions, {len(set(texts)):,} distinct texts; "
          f"{len(events)} readings of up to 4 sensors)\n")
    print(f"Each subscription alone (no sharing): {alone_calls:,.1f} operator calls per event.\n")
    print("| order | containment | merging | operator calls / event | predicate evaluations / event "
          "| pruned by containment / event | µs / event | containers found |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for order in ORDERS:
        for containment, merging in ((False, False), (True, False), (True, True)):
            if order == "naive" and (containment or merging):
                continue
            index = SubscriptionIndex(order=order, containment=containment)
            for i, sub in enumerate(subs):
                index.add(str(i), sub)
            clusters = _comatch_clusters(index, events[: len(events) // 2]) if merging else []
            ops.calls.clear()
            evaluations = pruned = 0
            started = time.perf_counter()
            for event, want in zip(events, alone_answers):
                with active(CallTable(call_operator, lambda op: True)):
                    found = index.match(event)
                    for n, members in enumerate(clusters):
                        found.plan.merge(("merger", n), list(dict.fromkeys(  # identical ones share one entry
                            index._entries[m] for m in members if m in index._entries)))
                    while (key := found.next()) is not None:
                        found.record(key, found.evaluate(key))
                    got = found.result()
                if got != [str(i) for i in want]:
                    raise AssertionError(f"{order}: answers differ from evaluating each subscription alone")
                evaluations += found.evaluations
                pruned += found.plan.pruned
            micros = (time.perf_counter() - started) / len(events) * 1e6
            print(f"| {order} | {'yes' if containment else 'no'} | {'yes' if merging else 'no'} "
                  f"| {ops.total() / len(events):,.1f} | {evaluations / len(events):,.1f} | {pruned / len(events):,.1f} "
                  f"| {micros:,.0f} | {len(index.containers()):,} |", flush=True)
    print()


def _comatch_clusters(index, training) -> list[list[str]]:
    """Seed 002's access-frequency groups: subscriptions matched together in most events either matched."""
    from eventcloud.matching.statistics import Statistics

    stats = Statistics()
    alone: dict[str, int] = {}
    for event in training:
        got = index.match_event(event)
        stats.observe_matches(got)
        for ident in got:
            alone[ident] = alone.get(ident, 0) + 1
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for (a, b), together in stats.comatch.items():
        if together >= 0.8 * max(alone[a], alone[b]) and together >= 2:
            parent[find(a)] = find(b)
    groups: dict[str, list[str]] = {}
    for ident in parent:
        groups.setdefault(find(ident), []).append(ident)
    return [g for g in groups.values() if len(g) > 1]


# --- end to end on a local overlay with the expensive operator ------------------------------------

def part_e2e(args: argparse.Namespace) -> None:
    import trio

    from eventcloud.operators import city, text
    from eventcloud.testing import open_overlay
    from eventcloud.testing.operator_workload import EX, reading

    rng = random.Random(args.seed)
    centres = [(56.15, 10.20), (56.16, 10.21), (56.20, 10.15)]
    titles = ["traffic jam on ring road", "concert in the park", "road works on main street"]
    queries = []
    for i in range(args.e2e_subs):
        c0, c1 = rng.choice(centres)
        title = rng.choice(titles)
        threshold = rng.choice([0.6, 0.8])
        radius = rng.choice([1000, 3000])
        queries.append(
            f"PREFIX ex: <{EX}> PREFIX geo: <http://eventcloud.io/ns/geo#> PREFIX txt: <http://eventcloud.io/ns/text#> "
            f"SELECT ?s WHERE {{ GRAPH ?g {{ ?s ex:value ?v . ?s ex:lat ?lat . ?s ex:long ?long . ?s ex:title ?t }} "
            f"FILTER(txt:similarity(?t, \"{title}\") > {threshold} && geo:withinRadius(?lat, ?long, {c0}, {c1}, {radius}) "
            f"&& ?v > {rng.choice([5, 15, 25])}) }}")
    events = [reading(random.Random(20_000 + i), i, sensors=3) for i in range(args.e2e_events)]
    print(f"## End to end: 4 in-process peers, {len(queries)} subscriptions calling txt:similarity (declared "
          f"800 µs, run in threads) and geo:withinRadius, {len(events)} readings\n")
    print("| order | ms per event (publish to last notification) | notifications | operator calls | "
          "predicate evaluations |")
    print("|---|---:|---:|---:|---:|")

    async def one(order: str) -> tuple[float, int, int, int]:
        async with open_overlay(4, "osma", seed=args.seed, operators=city.OPERATORS + text.OPERATORS,
                                operator_plugins=False, evaluation_order=order) as overlay:
            async with overlay.client(0, "sub") as subscriber, overlay.client(1, "pub") as publisher:
                subs = [await subscriber.subscribe(q, kind="signal") for q in queries]
                received = 0
                started = time.perf_counter()
                for event in events:
                    await publisher.publish(event)
                expected = None
                # wait until no notification arrives for a while (the count is compared across orders)
                quiet = 0
                while quiet < 5:
                    got = 0
                    for sub in subs:
                        while True:
                            try:
                                sub._receive.receive_nowait()
                                got += 1
                            except trio.WouldBlock:
                                break
                    received += got
                    if got:
                        last = time.perf_counter()
                        quiet = 0
                    else:
                        quiet += 1
                    await trio.sleep(0.1)
                elapsed = (last - started) if received else 0.0
            counters = [p.counters for p in overlay.peers]
            return (elapsed / len(events) * 1000, received, sum(c["operator_calls"] for c in counters),
                    sum(c["predicate_evaluations"] for c in counters))

    results = {}
    for order in ORDERS:
        results[order] = trio.run(one, order)
        ms, received, calls, evaluations = results[order]
        print(f"| {order} | {ms:.1f} | {received} | {calls:,} | {evaluations:,} |", flush=True)
    counts = {r[1] for r in results.values()}
    print(f"\nSame notifications under every order: {'yes' if len(counts) == 1 else 'NO'}\n")


def part_chains(args: argparse.Namespace) -> None:
    """CSMA with heavily overlapping subscriptions: contained ones riding their container's chain
    against every distinct subscription running its own (identical ones share in both)."""
    import trio

    from eventcloud.testing import open_overlay
    from eventcloud.testing.operator_workload import CountingOperators, overlapping_workload, reading

    texts = overlapping_workload(random.Random(args.seed), args.chain_subs)
    events = [reading(random.Random(30_000 + i), i) for i in range(args.e2e_events)]
    print(f"## CSMA chains: 4 in-process peers, {len(texts)} overlapping subscriptions "
          f"({len(set(texts))} distinct texts), {len(events)} readings\n")
    print("| contained subscriptions | ms per event (publish to last notification) | notifications | "
          "CSMA rewrites | riders (identical / contained) | contained dropped at delivery |")
    print("|---|---:|---:|---:|---:|---:|")

    async def one(contained: bool) -> tuple[float, dict[str, int], Counter]:
        ops = CountingOperators()
        async with open_overlay(4, "csma", seed=args.seed, operators=tuple(ops.operator_set().values()),
                                operator_plugins=False, operator_inline_cost=1e9,
                                contained_chains=contained) as overlay:
            async with overlay.client(0, "sub") as subscriber, overlay.client(1, "pub") as publisher:
                subs = [await subscriber.subscribe(text, kind="signal") for text in texts]
                got: dict[str, int] = {}
                started = last = time.perf_counter()
                for event in events:
                    await publisher.publish(event)
                quiet = 0
                while quiet < 10:  # until nothing arrives for a second
                    arrived = 0
                    for n, sub in enumerate(subs):
                        while True:
                            try:
                                note = sub._receive.receive_nowait()
                            except trio.WouldBlock:
                                break
                            key = f"{n} {note.event}"
                            got[key] = got.get(key, 0) + 1
                            arrived += 1
                    if arrived:
                        last, quiet = time.perf_counter(), 0
                    else:
                        quiet += 1
                    await trio.sleep(0.1)
            counters: Counter = Counter()
            for peer in overlay.peers:
                counters.update(peer.counters)
            return (last - started) / len(events) * 1000, got, counters

    results = {}
    for contained in (False, True):
        ms, got, c = results[contained] = trio.run(one, contained)
        print(f"| {'ride the container' if contained else 'own chains'} | {ms:.1f} | {sum(got.values()):,} | "
              f"{c['csma_rewrites']:,} | {c['csma_chains_shared']:,} / {c['csma_chains_contained']:,} | "
              f"{c['contained_rejected']:,} |", flush=True)
    same = set(results[False][1]) == set(results[True][1])
    doubled = sum(1 for r in results.values() for v in r[1].values() if v > 1)
    print(f"\nSame (subscription, event) pairs both ways: {'yes' if same else 'NO'}; repeated: {doubled}\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("all", "paper", "stats", "overlap", "e2e", "chains"), default="all")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[2_000, 20_000, 80_000],
                        help="N_s values of the paper's figures 4 and 5 [2000,20000,80000]")
    parser.add_argument("--events", type=int, default=20, help="events per row [20]")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--overlap-subs", type=int, default=2_000)
    parser.add_argument("--e2e-subs", type=int, default=200)
    parser.add_argument("--e2e-events", type=int, default=30)
    parser.add_argument("--chain-subs", type=int, default=300, help="subscriptions of the CSMA chains part")
    parser.add_argument("--spark", action="store_true", help="compute the offline statistics with PySpark (local)")
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("peers").setLevel(logging.ERROR)  # in-process peers warn about their open test overlay
    parts = ("paper", "stats", "overlap", "e2e", "chains") if args.part == "all" else (args.part,)
    for part in parts:
        globals()[f"part_{part}"](args)


if __name__ == "__main__":
    main()
