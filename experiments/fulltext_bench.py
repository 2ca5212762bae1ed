"""Full-text filtering on one peer (RTF's `ftcontains` trie): the shared index against evaluating each subscription.

    python -m experiments.fulltext_bench [--sizes 20000,40000,60000,80000,100000] [--ft 0,50,100]
        [--layouts rtfm,rtfs] [--publications 500] [--baseline-events 5] [--seed 0]

Publications are CityBench's real city events (experiments.citybench_text: 1,647 observations
of library and cultural events, 14 quads each, with a title and a place name). Subscriptions
have at most 4 triple patterns over that vocabulary; a share of them (--ft, in %) carry a text
constraint on the title or the place name, the others structural constraints like RTF's
(constants of the data in the patterns: a feature of interest, a place, an instant). A text
constraint holds at most 3 words drawn from the real word distribution (the multiset of the
titles' and names' words, so frequent words are drawn often, as RTF draws from DBpedia's):
80% plain conjunctions (RTF's workload), the rest phrases and NEAR/2 pairs taken from a real
title, ORs and prefixes.

Per share, one index per text layout grows by steps to each size (RTF inserts 20 K queries a
step); at each size: filtering time per publication (p50, p99, on --publications distinct
publications, the layouts taking each publication in turn, the token cache emptied before
each), throughput, the index's memory (tracemalloc,
subscriptions not counted; "+subs" adds the parsed subscriptions), the time to insert the last
step, and the naive baseline (every subscription evaluated separately) on --baseline-events
publications, whose answers must equal the index's.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time

from eventcloud.matching.index import SubscriptionIndex
from eventcloud.rdf.model import IRI, RDF, XSD, Literal
from eventcloud.sparql.filters.compiler import compile_filter
from eventcloud.sparql.filters.extensions import FTCONTAINS
from eventcloud.sparql.filters.fulltext import tokenize
from eventcloud.sparql.filters.values import canonical_term
from eventcloud.sparql.subscription import Subscription, TriplePattern, Var, parse_subscription
from experiments.benchkit import baseline, index_memory, memory_of, percentile, table, time_interleaved
from experiments.citybench_text import CT, SAO, SSN, TL, TextCorpus, load_corpus

RTF_MS, RTF_MB = 36.0, 183.0  # RTFs at 100 K queries, 50% with text (C++, Core i7 3.6 GHz)
TYPE, DATETIME = IRI(RDF + "type"), XSD + "dateTime"
O, V, T, D, F, N, NAME = (Var(n) for n in ("o", "v", "t", "d", "f", "n", "name"))


def _iri(ns: str, local: str) -> IRI:
    return IRI(ns + local)


VALUE, TIME, AT = _iri(SAO, "value"), _iri(SAO, "time"), _iri(TL, "at")
FOI, FIRST, NODE_NAME = _iri(SSN, "featureOfInterest"), _iri(CT, "hasFirstNode"), _iri(CT, "hasNodeName")
OBSERVATION = _iri(SSN, "Observation")


def make(patterns: list[tuple], filters: list[tuple], sparql: str | None = None) -> tuple[str, Subscription]:
    """A subscription built directly (parsing 100 K texts with rdflib would take minutes), and its text
    (written from the parts unless given)."""
    body = tuple(TriplePattern(*p) for p in patterns)
    compiled = tuple(compile_filter(expr) for expr in filters)
    sparql = sparql or ("SELECT * WHERE { GRAPH ?g { " + " . ".join(p.n3() for p in body) + " } "
                        + " ".join(f"FILTER({c.text})" for c in compiled) + " }")
    projection = tuple(dict.fromkeys(["g"] + [t.name for p in body for t in p.terms()
                                              if isinstance(t, Var) and not t.name.startswith("_:")]))
    return sparql, Subscription(sparql, Var("g"), body, compiled, projection, False)


class TextWorkload:
    """Subscriptions over the corpus' vocabulary, `share` of them with a text constraint."""

    def __init__(self, corpus: TextCorpus, share: float, seed: int) -> None:
        self.corpus = corpus
        self.share = share
        self.rng = random.Random(seed)
        self.name_words = [w for name in corpus.names for w in tokenize(name).words]
        self.titles = [t for t in corpus.titles if len(t) >= 2]

    def expression(self, names: bool) -> str:
        r = self.rng
        pool = self.name_words if names else self.corpus.words
        words = [r.choice(pool) for _ in range(r.randint(1, 3))]
        roll = r.random()
        if roll < 0.80 or names:
            return " ".join(words)
        if roll < 0.86 or roll >= 0.96:
            title = r.choice(self.titles)
            i = r.randrange(len(title) - 1)
            if roll < 0.86:
                return f'"{title[i]} {title[i + 1]}"'
            return f"{title[i]} NEAR/2 {title[min(len(title) - 1, i + r.randint(1, 3))]}"
        if roll < 0.92:
            return " OR ".join(words) if len(words) > 1 else f"{words[0]} OR {r.choice(pool)}"
        stem = words[0][:max(1, min(len(words[0]), r.randint(3, 5)))]
        return " ".join([stem + "*"] + words[1:])

    def subscription(self) -> tuple[str, Subscription]:
        r = self.rng
        if r.random() < self.share:
            shape = r.randrange(6)
            on_name = shape == 5 or (shape == 3 and r.random() < 0.5)
            target = NAME if on_name else V
            filters = [("ext", FTCONTAINS, (("var", target.name), ("const", Literal(self.expression(on_name)))))]
            patterns = [
                [(O, VALUE, V)],
                [(O, TYPE, OBSERVATION), (O, VALUE, V)],
                [(O, VALUE, V), (O, TIME, T), (T, AT, D)],
                [(O, VALUE, V), (O, FOI, F), (F, FIRST, N), (N, NODE_NAME, NAME)],
                [(O, FOI, r.choice(self.corpus.contexts)), (O, VALUE, V)],
                [(F, FIRST, N), (N, NODE_NAME, NAME)],
            ][shape]
            if shape == 2 and r.random() < 0.5:
                filters.append((">=", ("var", "d"), ("const", Literal(r.choice(self.corpus.times), DATETIME))))
            return make(patterns, filters)
        shape = r.randrange(4)  # RTF's structural queries: constants of the data in the patterns
        if shape == 0:
            return make([(O, FOI, r.choice(self.corpus.contexts)), (O, TIME, T), (T, AT, D)], [])
        if shape == 1:
            return make([(O, FOI, r.choice(self.corpus.contexts)), (O, VALUE, V)], [])
        if shape == 2:
            return make([(F, FIRST, N), (N, NODE_NAME, Literal(r.choice(self.corpus.names)))], [])
        instant = Literal(r.choice(self.corpus.times), DATETIME)
        return make([(O, TYPE, OBSERVATION), (O, TIME, T), (T, AT, D)], [("=", ("var", "d"), ("const", instant))])


def check_parse(corpus: TextCorpus, seed: int, count: int) -> float:
    """Generated subscriptions equal their parsed text; returns parse_subscription's rate."""
    workload = TextWorkload(corpus, 0.5, seed)
    sample = [workload.subscription() for _ in range(count)]
    started = time.perf_counter()
    for sparql, sub in sample:
        parsed = parse_subscription(sparql)
        if (parsed.patterns, parsed.filters, parsed.projection, parsed.graph) != (sub.patterns, sub.filters,
                                                                                 sub.projection, sub.graph):
            raise SystemExit(f"a generated subscription differs from its parse:\n{sparql}")
    return count / (time.perf_counter() - started)


def run_share(share: int, corpus: TextCorpus, args: argparse.Namespace) -> list[dict]:
    sizes = args.sizes
    workload = TextWorkload(corpus, share / 100, args.seed + share)
    subs = [(f"s{i}", workload.subscription()[1]) for i in range(sizes[-1])]
    sub_bytes = memory_of(lambda: [TextWorkload(corpus, share / 100, 99).subscription() for _ in range(2000)])[0] / 2000
    pubs = random.Random(args.seed).sample(corpus.publications, min(args.publications, len(corpus.publications)))
    kilobytes = statistics.mean(len(p.n_quads().encode()) for p in pubs) / 1000
    memory = {layout: index_memory(subs, sizes, text_layout=layout) for layout in args.layouts}
    indexes = [SubscriptionIndex(text_layout=layout) for layout in args.layouts]
    print(f"  {share}% text …", file=sys.stderr, flush=True)
    rows, done = [], 0
    for n in sizes:
        inserts = []
        for index in indexes:
            started = time.perf_counter()
            for ident, sub in subs[done:n]:
                index.add(ident, sub)
            inserts.append((time.perf_counter() - started) * 1000)
        step, done = n - done, n
        # the layouts take each publication in turn; the token cache is emptied before each
        timings = time_interleaved(indexes, pubs, before=tokenize.cache_clear)
        for layout, index, insert_ms, (times, answers) in zip(args.layouts, indexes, inserts, timings):
            row = {"share": share, "layout": layout, "n": n, "p50": percentile(times, 0.5) / 1000,
                   "p99": percentile(times, 0.99) / 1000, "rate": len(times) / (sum(times) / 1e6),
                   "kb": kilobytes, "mb": memory[layout][n] / 1e6, "mb_subs": (memory[layout][n] + sub_bytes * n) / 1e6,
                   "insert_ms": insert_ms, "step": step, "matches": statistics.mean(len(a) for a in answers),
                   "stats": index.stats()}
            if layout == args.layouts[0] and args.baseline_events:
                b_times, b_answers = baseline(subs[:n], pubs[:args.baseline_events])
                row["baseline"] = statistics.median(b_times) * 1000
                row["agree"] = b_answers == answers[:args.baseline_events] and all(
                    t[1] == answers for t in timings)  # every layout answers alike
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.fulltext_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,40000,60000,80000,100000")
    parser.add_argument("--ft", default="0,50,100", help="shares of subscriptions with a text constraint, in %%")
    parser.add_argument("--layouts", default="rtfm,rtfs", help="text index layouts: rtfm (a trie per pattern node), rtfs (one)")
    parser.add_argument("--publications", type=int, default=500, help="distinct publications timed per row [500]")
    parser.add_argument("--baseline-events", type=int, default=5, help="publications the baseline runs per size [5]")
    parser.add_argument("--check-parse", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.sizes = sorted(int(s) for s in args.sizes.split(","))
    args.layouts = args.layouts.split(",")
    corpus = load_corpus()
    parse_rate = check_parse(corpus, args.seed + 1, args.check_parse)
    results = []
    for share in (int(s) for s in args.ft.split(",")):
        results += run_share(share, corpus, args)

    print(f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, one core. "
          f"{len(corpus.publications):,} CityBench publications ({args.publications} timed per row, "
          f"{statistics.mean(r['kb'] for r in results):.1f} KB of N-Quads each); words drawn from "
          f"{len(corpus.words):,} occurrences of {len(set(corpus.words)):,} distinct words.\n")
    for share in sorted({r["share"] for r in results}):
        print(f"### {share}% of subscriptions with a text constraint\n")
        rows = []
        for r in (r for r in results if r["share"] == share):
            base = speed = "—"
            if "baseline" in r:
                base, speed = f"{r['baseline']:,.0f}", f"{r['baseline'] / r['p50']:,.0f}×"
                if not r["agree"]:
                    base += " DISAGREE"
            rows.append([f"{r['n']:,}", r["layout"], f"{r['p50']:.2f}", f"{r['p99']:.2f}", f"{r['rate']:,.0f}",
                         f"{r['rate'] * r['kb']:,.0f}", f"{r['mb']:,.1f}", f"{r['mb_subs']:,.0f}",
                         f"{r['insert_ms']:,.0f}", f"{r['matches']:,.1f}", base, speed])
        print(table(["N", "layout", "p50 ms", "p99 ms", "pubs/s", "KB/s", "index MB", "+subs MB",
                     "insert last step ms", "matches/pub", "baseline p50 ms", "speed-up p50"], rows))
        print()
    print(f"Against RTF (C++, 100 K queries, 50% with text): {RTF_MS:.0f} ms per publication in {RTF_MB:.0f} MB; "
          f"the goal is ≤ {RTF_MS / 10:.1f} ms p50 within {RTF_MB:.0f} MB.")
    for r in results:
        if r["n"] == args.sizes[-1]:
            print(f"  {r['share']}% text, {r['layout']}: p50 {r['p50']:.2f} ms ({RTF_MS / r['p50']:.0f}× faster than RTF), "
                  f"index {r['mb']:.0f} MB, with the parsed subscriptions {r['mb_subs']:.0f} MB; "
                  f"index contents {r['stats']}")
    agree = [r["agree"] for r in results if "agree" in r]
    print(f"Generated subscriptions equal their parsed text (parse_subscription: {parse_rate:,.0f}/s). "
          f"Baseline answers equal the index's on every sampled publication: {'yes' if all(agree) else 'NO'} "
          f"({len(agree)} rows).")
    return 0 if all(agree) else 1


if __name__ == "__main__":
    sys.exit(main())
