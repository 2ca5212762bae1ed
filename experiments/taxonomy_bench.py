"""Is-a matching on one peer (G-ToPSS's taxonomy constraints): subscriptions mixing value and class constraints.

    python -m experiments.taxonomy_bench [--sizes 1000,10000,50000,100000] [--events 300]
        [--baseline-events 5] [--seed 0]

The taxonomy is experiments/data/citybench-taxonomy.ttl (CityBench's kinds of observed property,
service qualities, observation and sensor classes, under 75 classes with multiple inheritance).
Publications are CityBench's real sensor readings (eventcloud.rdf.citybench: the six stream
files, one event per row, 8 to 20 quads; each observed property is typed with its kind, e.g.
`<property> a ct:AvgSpeed`). Subscriptions, in the shares of G-ToPSS's "constrained variables":

    50%  a sensor, its property under a class (the path), an alert threshold on the value
         ?o ssn:observedBy <sensor> . ?o ssn:observedProperty ?p . ?p rdf:type/rdfs:subClassOf* C .
         ?o sao:hasValue ?v  FILTER(?v > t)
    25%  the same with an is-a FILTER function on the property's class (childOf, descendantOf,
         ancestorOf) and a low threshold:  ?p a ?c … FILTER(ec:childOf(?c, C) && ?v < t)
    24%  a value constraint only:
         ?o ssn:observedBy <sensor> . ?o ssn:observedProperty <property> . ?o sao:hasValue ?v FILTER(?v > t)
     1%  a class only, for any sensor:  ?o ssn:observedProperty ?p . ?p rdf:type/rdfs:subClassOf* C

C is the property's own kind (ct:AvgSpeed …) three times in five, one of the classes above it
one time in five, else any class of the taxonomy; a threshold is a high (or low) quantile of
that sensor's readings (0.95 to 0.999), so a subscription is an alert that fires on a few readings.

Measured per size: the index's matching time per event (p50, p99), its memory, the time to
insert the subscriptions, and two baselines on --baseline-events events: every subscription
evaluated separately with the precomputed closure (`matching.reference`), and the same with
G-ToPSS's is-a test, walking the taxonomy up from the class per check. Answers must agree.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from eventcloud.matching.index import SubscriptionIndex
from eventcloud.rdf.citybench import CT, SAO, SSN, STREAMS, read_stream
from eventcloud.rdf.model import IRI, RDF, CompoundEvent, Literal
from eventcloud.sparql.filters.compiler import render
from eventcloud.sparql.filters.extensions import ANCESTOR_OF, CHILD_OF, DESCENDANT_OF
from eventcloud.sparql.filters.values import canonical_term
from eventcloud.sparql.subscription import Subscription, Var, parse_subscription
from eventcloud.sparql.taxonomy import RDFS, Taxonomy
from experiments.benchkit import baseline, index_memory, percentile, table, time_events
from experiments.citybench_text import DATA
from experiments.fulltext_bench import make

TAXONOMY = Path(__file__).resolve().parent / "data" / "citybench-taxonomy.ttl"
GTOPSS_MS = 20.0  # G-ToPSS matches a publication against 100 K subscriptions in about 20 ms (Java, 1 GHz)
TYPE = IRI(RDF + "type")
OBSERVED_BY, OBSERVED_PROPERTY, HAS_VALUE = IRI(SSN + "observedBy"), IRI(SSN + "observedProperty"), IRI(SAO + "hasValue")
O, P, C, V = Var("o"), Var("p"), Var("c"), Var("v")
HIDDEN = Var("_:isa0")


def publications(per_stream: int) -> list[CompoundEvent]:
    """Readings of the six streams, interleaved."""
    streams = [list(read_stream(DATA / name, limit=per_stream)) for name in sorted(STREAMS)]
    return [event for row in zip(*streams) for event in row]


class Readings:
    """Per (sensor, property): its kinds and the values read, from the publications."""

    def __init__(self, events: list[CompoundEvent]) -> None:
        self.values: dict[tuple[IRI, IRI], list[float]] = {}
        self.kinds: dict[IRI, IRI] = {}
        for event in events:
            by_subject: dict[object, dict[str, object]] = {}
            for quad in event.quads:
                by_subject.setdefault(quad.s, {})[quad.p.value] = quad.o
                if quad.p == TYPE and quad.o.value.startswith(CT):  # type: ignore[union-attr]
                    self.kinds[quad.s] = quad.o  # type: ignore[index,assignment]
            for fields in by_subject.values():
                if SAO + "hasValue" in fields:
                    key = (fields[SSN + "observedBy"], fields[SSN + "observedProperty"])
                    self.values.setdefault(key, []).append(float(fields[SAO + "hasValue"].lexical))  # type: ignore
        for values in self.values.values():
            values.sort()
        self.pairs = sorted(self.values, key=lambda k: (k[0].value, k[1].value))


class TaxonomyWorkload:
    def __init__(self, readings: Readings, taxonomy: Taxonomy, seed: int) -> None:
        self.readings = readings
        self.taxonomy = taxonomy
        self.classes = sorted(taxonomy.classes)
        self.rng = random.Random(seed)

    def threshold(self, pair: tuple[IRI, IRI], high: bool) -> Literal:
        values = self.readings.values[pair]
        q = self.rng.uniform(0.95, 0.999)
        value = values[min(len(values) - 1, int((q if high else 1 - q) * len(values)))]
        return canonical_term(Literal(repr(value), "http://www.w3.org/2001/XMLSchema#double"))  # type: ignore[return-value]

    def a_class(self, pair: tuple[IRI, IRI]) -> IRI:
        roll, kind = self.rng.random(), self.readings.kinds[pair[1]]
        if roll < 0.6:
            return kind
        if roll < 0.8:
            return IRI(self.rng.choice(sorted(self.taxonomy.ancestors(kind.value))))
        return IRI(self.rng.choice(self.classes))

    def subscription(self) -> tuple[str, Subscription]:
        r = self.rng
        pair = r.choice(self.readings.pairs)
        sensor, roll = pair[0], r.random()
        if roll < 0.50:
            value = (">", ("var", "v"), ("const", self.threshold(pair, True)))
            return with_path([(O, OBSERVED_BY, sensor), (O, OBSERVED_PROPERTY, P), (P, TYPE, HIDDEN), (O, HAS_VALUE, V)],
                             [value], self.a_class(pair))
        if roll < 0.75:
            function = r.choice([CHILD_OF, DESCENDANT_OF, ANCESTOR_OF])
            isa = ("ext", function, (("var", "c"), ("const", self.a_class(pair))))
            low = ("<", ("var", "v"), ("const", self.threshold(pair, False)))
            return make([(O, OBSERVED_BY, sensor), (O, OBSERVED_PROPERTY, P), (P, TYPE, C), (O, HAS_VALUE, V)],
                        [("and", (isa, low))])
        if roll < 0.99:
            return make([(O, OBSERVED_BY, sensor), (O, OBSERVED_PROPERTY, pair[1]), (O, HAS_VALUE, V)],
                        [(">", ("var", "v"), ("const", self.threshold(pair, True)))])
        return with_path([(O, OBSERVED_PROPERTY, P), (P, TYPE, HIDDEN)], [], self.a_class(pair))


def with_path(patterns: list[tuple], filters: list[tuple], cls: IRI) -> tuple[str, Subscription]:
    """A subscription whose pattern (x, rdf:type, ?_:isa0) is the path `x rdf:type/rdfs:subClassOf* cls`."""
    def written(p: tuple) -> str:
        if p[2] == HIDDEN:
            return f"{p[0].n3()} <{RDF}type>/<{RDFS}subClassOf>* {cls.n3()}"
        return " ".join(t.n3() for t in p)
    text = ("SELECT * WHERE { GRAPH ?g { " + " . ".join(map(written, patterns)) + " } "
            + " ".join(f"FILTER({render(f)})" for f in filters) + " }")
    return make(patterns, filters + [("ext", DESCENDANT_OF, (("var", HIDDEN.name), ("const", cls)))], text)


class WalkingTaxonomy(Taxonomy):
    """G-ToPSS's is-a test: walk up from the class through its parents at each check."""

    def is_descendant(self, cls: str, of: str) -> bool:
        todo, seen = [cls], {cls}
        while todo:
            current = todo.pop()
            if current == of:
                return True
            for parent in self.parents(current):
                if parent not in seen:
                    seen.add(parent)
                    todo.append(parent)
        return False

    def is_ancestor(self, cls: str, of: str) -> bool:
        return self.is_descendant(of, cls)


def check_parse(workload: TaxonomyWorkload, count: int) -> None:
    """Generated subscriptions equal their parsed text (the path included)."""
    for sparql, sub in (workload.subscription() for _ in range(count)):
        parsed = parse_subscription(sparql)
        if (parsed.patterns, parsed.filters, parsed.projection) != (sub.patterns, sub.filters, sub.projection):
            raise SystemExit(f"a generated subscription differs from its parse:\n{sparql}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.taxonomy_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000,100000")
    parser.add_argument("--events", type=int, default=300, help="events timed per size [300]")
    parser.add_argument("--baseline-events", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    taxonomy = Taxonomy.from_rdf(TAXONOMY.read_bytes(), "turtle", version=1)
    events = publications(400)
    readings = Readings(events)
    workload = TaxonomyWorkload(readings, taxonomy, args.seed)
    check_parse(TaxonomyWorkload(readings, taxonomy, args.seed + 1), 100)
    subs = [(f"s{i}", workload.subscription()[1].with_taxonomy(taxonomy)) for i in range(sizes[-1])]
    timed = random.Random(args.seed).sample(events, min(args.events, len(events)))
    walking = WalkingTaxonomy(taxonomy.edges, taxonomy.version + 1)
    walked_subs = [(ident, sub.with_taxonomy(walking)) for ident, sub in subs]
    memory = index_memory(subs, sizes, taxonomy=taxonomy)
    index, done, rows, agree = SubscriptionIndex(taxonomy=taxonomy), 0, [], []
    for n in sizes:
        print(f"N = {n:,} …", file=sys.stderr, flush=True)
        started = time.perf_counter()
        for ident, sub in subs[done:n]:
            index.add(ident, sub)
        insert_rate = (n - done) / (time.perf_counter() - started)
        done = n
        times, answers = time_events(index, timed)
        sample = timed[:args.baseline_events]
        closure_times, closure_answers = baseline(subs[:n], sample)
        walk_times, walk_answers = baseline(walked_subs[:n], sample)
        agree.append(closure_answers == walk_answers == answers[:len(sample)])
        p50 = percentile(times, 0.5) / 1000
        rows.append([f"{n:,}", f"{p50:.3f}", f"{percentile(times, 0.99) / 1000:.3f}",
                     f"{len(times) / (sum(times) / 1e6):,.0f}", f"{statistics.mean(map(len, answers)):,.1f}",
                     f"{statistics.median(closure_times) * 1000:,.1f}", f"{statistics.median(walk_times) * 1000:,.1f}",
                     f"{statistics.median(walk_times) * 1000 / p50:,.0f}×", f"{memory[n] / 1e6:,.1f}",
                     f"{insert_rate:,.0f}", "yes" if agree[-1] else "NO"])
    print(f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, one core. "
          f"Taxonomy: {len(taxonomy)} classes, {len(taxonomy.edges)} edges; {len(events):,} CityBench readings "
          f"({args.events} timed per size, {statistics.mean(len(e.quads) for e in events):.1f} quads each).\n")
    print(table(["N", "index p50 ms", "index p99 ms", "events/s", "matches/event", "naive (closure) p50 ms",
                 "naive (G-ToPSS walk) p50 ms", "speed-up vs walk", "index MB", "inserts/s", "answers agree"], rows))
    print(f"\nG-ToPSS (Java, 1 GHz): about {GTOPSS_MS:.0f} ms per publication at 100,000 subscriptions. "
          f"Index contents at N = {sizes[-1]:,}: {index.stats()}.")
    return 0 if all(agree) else 1


if __name__ == "__main__":
    sys.exit(main())
