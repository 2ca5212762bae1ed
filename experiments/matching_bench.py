"""One peer's matcher: the shared subscription index against the naive baseline (docs/matching.md).

    python -m experiments.matching_bench [--sizes 1,100,1000,10000,100000] [--events 200]
                                         [--baseline-max 10000] [--baseline-events 5] [--seed 0]

Workload (deterministic by seed). 1,000 predicates with Zipf weights (s = 1); 200 anchors
(constant subjects: a sensor, a feed), each with two paths of 5 predicates drawn from that law.
Subscription i picks an anchor, one of its paths and a length k in 1..5 and is the chain

    SELECT ?vk WHERE { GRAPH ?g { <anchor> <q1> ?v1 . ?v1 <q2> ?v2 . … ?v(k-1) <qk> ?vk } }

30% of them add a range FILTER on the numeric object: ?vk > t, ?vk < t, or t <= ?vk && ?vk <= t+w
(integer, decimal or double constants; event values are integers, decimals and doubles).
Each event is built from one stored subscription chosen at random: its anchor, its path up to
its own length with fresh nodes, and a last value satisfying its filter; the remaining quads
(to 5 or 25) are noise: Zipf predicates on other anchors or on fresh subjects, numeric or IRI
objects. The chosen subscription matches, and so do the others on the same anchor and path whose
chain the event completes — about 0.1% of the stored subscriptions at every size from 1,000 up
(the measured fraction is printed).

Measured per size N: the index's matching time per event (p50, p99, microseconds, one core),
insertions per second (`SubscriptionIndex.add` of parsed subscriptions), memory of the index per
subscription, per stored pattern and per distinct pattern (tracemalloc, a separate build), and
the naive baseline: every subscription's SPARQL run separately by pyoxigraph on a Store holding
the event as its only named graph, on a few events, for N up to --baseline-max; above that the
baseline is extrapolated linearly from the largest measured N and labelled so. On the events
the baseline runs, its answers are compared with the index's (they must agree).
"""

from __future__ import annotations

import argparse
import gc
import math
import platform
import random
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass

from eventcloud.sparql.filters.compiler import compile_filter
from eventcloud.matching.index import SubscriptionIndex
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, Quad
from eventcloud.sparql.subscription import Subscription, TriplePattern, Var, parse_subscription

BASE = "http://bench.example/"
PREDICATES = 1000
ANCHORS = 200
PATHS = 2
DEPTH = 5
FILTERED = 0.30
XSD_INTEGER, XSD_DECIMAL, XSD_DOUBLE = XSD + "integer", XSD + "decimal", XSD + "double"


@dataclass
class Spec:
    """What a generated subscription is, so that events can be built to match it."""

    anchor: int
    path: int
    k: int
    low: float | None   # the filter accepts low < v < high (bounds inclusive where `closed`)
    high: float | None


class Workload:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        weights = [1.0 / (rank + 1) for rank in range(PREDICATES)]
        self.predicates = [IRI(f"{BASE}p{i}") for i in range(PREDICATES)]
        self._cumulative = list(_accumulate(weights))
        self.anchors = [IRI(f"{BASE}anchor/{i}") for i in range(ANCHORS)]
        self.paths = [[[self.zipf() for _ in range(DEPTH)] for _ in range(PATHS)] for _ in range(ANCHORS)]
        self.events_made = 0

    def zipf(self) -> IRI:
        from bisect import bisect_left
        x = self.rng.random() * self._cumulative[-1]
        return self.predicates[bisect_left(self._cumulative, x)]

    def subscription(self) -> tuple[str, Subscription, Spec]:
        r = self.rng
        anchor, path, k = r.randrange(ANCHORS), r.randrange(PATHS), r.randint(1, DEPTH)
        preds = self.paths[anchor][path][:k]
        names = [f"v{i}" for i in range(1, k + 1)]
        patterns = []
        subject: IRI | Var = self.anchors[anchor]
        for predicate, name in zip(preds, names):
            patterns.append(TriplePattern(subject, predicate, Var(name)))
            subject = Var(name)
        last = names[-1]
        filters, text_filter, low, high = (), "", None, None
        if r.random() < FILTERED:
            shape = r.randrange(3)
            t = r.randint(0, 100)
            const, lexical = _constant(r, t)
            if shape == 0:
                expr = (">", ("var", last), ("const", const))
                text_filter = f"FILTER(?{last} > {lexical})"
                low = t
            elif shape == 1:
                expr = ("<", ("var", last), ("const", const))
                text_filter = f"FILTER(?{last} < {lexical})"
                high = t
            else:
                w = r.randint(5, 30)
                const2, lexical2 = _constant(r, t + w)
                expr = ("and", ((">=", ("var", last), ("const", const)), ("<=", ("var", last), ("const", const2))))
                text_filter = f"FILTER(?{last} >= {lexical} && ?{last} <= {lexical2})"
                low, high = t - 0.5, t + w + 0.5
            filters = (compile_filter(expr),)
        body = " . ".join(p.n3() for p in patterns)
        sparql = f"SELECT ?{last} WHERE {{ GRAPH ?g {{ {body} }} {text_filter} }}"
        sub = Subscription(sparql, Var("g"), tuple(patterns), filters, (last,), False)
        return sparql, sub, Spec(anchor, path, k, low, high)

    def event(self, spec: Spec, size: int) -> CompoundEvent:
        r = self.rng
        self.events_made += 1
        n = self.events_made
        graph = IRI(f"{BASE}event/{n}")
        quads: list[Quad] = []
        subject: IRI = self.anchors[spec.anchor]
        preds = self.paths[spec.anchor][spec.path][:spec.k]
        for depth, predicate in enumerate(preds, start=1):
            if depth == spec.k:
                quads.append(Quad(graph, subject, predicate, _value(r, spec)))
            else:
                node = IRI(f"{BASE}node/{n}/{depth}")
                quads.append(Quad(graph, subject, predicate, node))
                subject = node
        seen = set(quads)
        while len(quads) < size:
            if r.random() < 0.5:
                s = self.anchors[r.randrange(ANCHORS)]
            else:
                s = IRI(f"{BASE}thing/{n}/{len(quads)}")
            o = (Literal(str(r.randint(0, 100)), XSD_INTEGER) if r.random() < 0.6
                 else IRI(f"{BASE}thing/{n}/{r.randrange(size)}"))
            quad = Quad(graph, s, self.zipf(), o)
            if quad not in seen:
                seen.add(quad)
                quads.append(quad)
        return CompoundEvent(graph, tuple(quads))


def _accumulate(values: list[float]):
    total = 0.0
    for v in values:
        total += v
        yield total


def _constant(r: random.Random, t: int) -> tuple[Literal, str]:
    """The threshold t as an integer, a decimal or a double constant (and its SPARQL text)."""
    from eventcloud.sparql.filters.values import canonical_term
    kind = r.randrange(3)
    if kind == 0:
        return Literal(str(t), XSD_INTEGER), str(t)
    if kind == 1:
        return canonical_term(Literal(f"{t}.5", XSD_DECIMAL)), f"{t}.5"  # type: ignore[return-value]
    return canonical_term(Literal(f"{t}.0E0", XSD_DOUBLE)), f"{t}.0e0"  # type: ignore[return-value]


def _value(r: random.Random, spec: Spec) -> Literal:
    low = -10 if spec.low is None else math.floor(spec.low) + 1
    high = 110 if spec.high is None else math.ceil(spec.high) - 1
    v = r.randint(low + 1, max(low + 1, high - 1))
    kind = r.randrange(3)
    if kind == 0:
        return Literal(str(v), XSD_INTEGER)
    if kind == 1:
        return Literal(f"{v}.0", XSD_DECIMAL)
    return Literal(f"{v}.0E0", XSD_DOUBLE)


def _canonical(event: CompoundEvent) -> CompoundEvent:
    from eventcloud.sparql.filters.values import canonical_term
    return CompoundEvent(event.graph, tuple(Quad(q.g, q.s, q.p, canonical_term(q.o)) for q in event.quads))


# --- measurements -------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def build(n: int, seed: int) -> tuple[Workload, list[tuple[str, Subscription, Spec]]]:
    workload = Workload(seed)
    return workload, [workload.subscription() for _ in range(n)]


def measure_memory(subs: list[tuple[str, Subscription, Spec]], share: bool) -> tuple[float, int, int]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = SubscriptionIndex(share_joins=share, share_identical=share)
    for i, (_, sub, _) in enumerate(subs):
        index.add(f"s{i}", sub)
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    stats = index.stats()
    return used, stats["patterns"], stats["distinct_patterns"]


def baseline_times(subs: list[tuple[str, Subscription, Spec]], events: list[CompoundEvent]
                   ) -> tuple[list[float], list[list[str]]]:
    import pyoxigraph as ox

    from eventcloud.rdf.oxigraph import quad_to_ox

    times, answers = [], []
    for event in events:
        store = ox.Store()
        store.extend([quad_to_ox(q) for q in event.quads])
        started = time.perf_counter()
        matched = []
        for i, (sparql, _, _) in enumerate(subs):
            if next(iter(store.query(sparql)), None) is not None:
                matched.append(f"s{i}")
        times.append(time.perf_counter() - started)
        answers.append(matched)
    return times, answers


def run_size(n: int, args: argparse.Namespace, baseline_rate: dict) -> dict[int, dict]:
    workload, subs = build(n, args.seed)
    index = SubscriptionIndex(share_joins=not args.no_shared_joins, share_identical=not args.no_shared_joins)
    gc.collect()
    started = time.perf_counter()
    for i, (_, sub, _) in enumerate(subs):
        index.add(f"s{i}", sub)
    insert_rate = n / (time.perf_counter() - started)
    memory, patterns, distinct = measure_memory(subs, not args.no_shared_joins)
    stats = index.stats()
    rows = {}
    for size in (5, 25):
        events = [_canonical(workload.event(subs[workload.rng.randrange(n)][2], size)) for _ in range(args.events)]
        for event in events[:10]:  # warm-up
            index.match_event(event)
        gc.disable()
        times, found = [], 0
        for event in events:
            t0 = time.perf_counter_ns()
            result = index.match_event(event)
            times.append((time.perf_counter_ns() - t0) / 1000)
            found += len(result)
        gc.enable()
        row = {
            "p50": percentile(times, 0.5), "p99": percentile(times, 0.99),
            "fraction": found / (n * len(events)), "insert_rate": insert_rate,
            "mem_sub": memory / n, "mem_pattern": memory / patterns, "mem_distinct": memory / distinct,
            "distinct": distinct, "patterns": patterns, "groups": stats["join_groups"],
            "tabled": stats["constraint_entries"],
        }
        if n <= args.baseline_max:
            sample = events[:max(1, min(len(events), args.baseline_events))]
            b_times, answers = baseline_times(subs, sample)
            agree = all(index.match_event(e) == a for e, a in zip(sample, answers))
            row["baseline_ms"] = statistics.median(b_times) * 1000
            row["baseline_label"] = "measured"
            row["agree"] = agree
            baseline_rate[size] = (n, row["baseline_ms"])
        elif size in baseline_rate:
            ref_n, ref_ms = baseline_rate[size]
            row["baseline_ms"] = ref_ms * n / ref_n
            row["baseline_label"] = f"extrapolated from N={ref_n:,}"
            row["agree"] = None
        rows[size] = row
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.matching_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,100,1000,10000,100000", help="stored subscriptions, comma-separated")
    parser.add_argument("--events", type=int, default=200, help="events per size and event size [200]")
    parser.add_argument("--baseline-max", type=int, default=10000,
                        help="run the pyoxigraph baseline up to this N, extrapolate above [10000]")
    parser.add_argument("--baseline-events", type=int, default=5, help="events the baseline runs per size [5]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-shared-joins", action="store_true",
                        help="ablation: one join group per subscription (equal bodies do not share joins)")
    parser.add_argument("--check-parse", type=int, default=200,
                        help="check this many generated subscriptions against parse_subscription [200]")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    _, sample = build(max(1, args.check_parse), args.seed + 1)
    started = time.perf_counter()
    for sparql, sub, _ in sample:
        parsed = parse_subscription(sparql)
        if (parsed.patterns, parsed.filters, parsed.projection, parsed.graph) != (sub.patterns, sub.filters, sub.projection, sub.graph):
            print(f"generated subscription differs from its parse:\n{sparql}", file=sys.stderr)
            return 1
    parse_rate = len(sample) / (time.perf_counter() - started)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = [parse_subscription(sparql) for sparql, _, _ in sample]
    gc.collect()
    sub_bytes = (tracemalloc.get_traced_memory()[0] - before) / len(held)
    tracemalloc.stop()
    del held

    results: dict[int, dict[int, dict]] = {}
    baseline_rate: dict = {}
    for n in sizes:
        print(f"N = {n:,} …", file=sys.stderr, flush=True)
        results[n] = run_size(n, args, baseline_rate)

    print(f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"one core; {args.events} events per row; baseline on {args.baseline_events} events per row"
          f"{'; ABLATION: joins not shared between equal bodies' if args.no_shared_joins else ''}.\n")
    for size in (5, 25):
        print(f"### Events of {size} quads\n")
        print("| N | index p50 µs | index p99 µs | baseline p50 ms | speed-up (p50) | matching | "
              "B / sub | B / pattern | B / distinct pattern | inserts/s |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        notes = []
        for n in sizes:
            row = results[n][size]
            if "baseline_ms" in row:
                base = f"{row['baseline_ms']:,.1f}"
                if row["baseline_label"] != "measured":
                    base += " *"
                    notes.append(f"* N={n:,}: baseline {row['baseline_label']} (linear in N)")
                ratio = f"{row['baseline_ms'] * 1000 / row['p50']:,.0f}×"
                if row.get("agree") is False:
                    notes.append(f"N={n:,}: THE BASELINE AND THE INDEX DISAGREE")
            else:
                base, ratio = "—", "—"
            if row.get("baseline_ms", 100) < 10 and "*" not in base:
                base = f"{row['baseline_ms']:.2f}"
            print(f"| {n:,} | {row['p50']:,.0f} | {row['p99']:,.0f} | {base} | {ratio} | {row['fraction']:.3%} | "
                  f"{row['mem_sub']:,.0f} | {row['mem_pattern']:,.0f} | {row['mem_distinct']:,.0f} | "
                  f"{row['insert_rate']:,.0f} |")
        print()
        for note in notes:
            print(note)
        if notes:
            print()
    print("Index contents: " + "; ".join(
        f"N={n:,}: {results[n][5]['patterns']:,} patterns, {results[n][5]['distinct']:,} distinct, "
        f"{results[n][5]['groups']:,} join groups, {results[n][5]['tabled']:,} tabled constraints" for n in sizes) + ".")
    print(f"Not counted above: a parsed Subscription (held by the peer in any case) takes "
          f"{sub_bytes:,.0f} B; parse_subscription runs at {parse_rate:,.0f} subscriptions/s.")
    agree = [row["agree"] for rows in results.values() for row in rows.values() if row.get("agree") is not None]
    if agree:
        print(f"Baseline answers equal the index's on every sampled event: {'yes' if all(agree) else 'NO'} "
              f"({len(agree)} rows checked).")
    else:
        print("Baseline not run (--baseline-max below every size).")
    return 0 if all(agree) else 1


if __name__ == "__main__":
    sys.exit(main())
