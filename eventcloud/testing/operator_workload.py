"""Overlapping subscriptions with registered operators, and events for them (tests and benchmarks).

Sensor readings as compound events (a value, a WGS84 position, a kind and a title) and
subscriptions built from a small pool of conjuncts, so that many of them are identical, contained
in one another or partially overlapping: what shared evaluation and subscription merging are for. The operators count
every call in `calls` ((iri, args) -> count), so tests can check shared evaluation; `fails`
always raises (its FILTER is an error, false) and `slow` is the deliberately expensive one.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from eventcloud.operators.city import DISTANCE, WITHIN_POLYGON, WITHIN_RADIUS, distance, within_polygon, within_radius
from eventcloud.operators.text import similarity
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, Quad
from eventcloud.sparql.filters.operators import Operator, OperatorSet
from eventcloud.sparql.filters.values import canonical_term

__all__ = ["CountingOperators", "TEST_NS", "EX", "PREFIXES", "reading", "random_subscription_text",
           "overlapping_workload"]

TEST_NS = "http://eventcloud.io/ns/test#"
EX = "http://ex.org/"
PREFIXES = (f"PREFIX ex: <{EX}> PREFIX geo: <http://eventcloud.io/ns/geo#> PREFIX t: <{TEST_NS}> "
            f"PREFIX txt: <http://eventcloud.io/ns/text#> PREFIX xsd: <{XSD}> ")
CENTERS = [(56.15, 10.20), (56.16, 10.21), (56.20, 10.15)]
POLYGON = "56.14 10.19, 56.14 10.22, 56.17 10.22, 56.17 10.19"
TITLES = ["traffic jam on ring road", "traffic jam on ringroad", "concert in the park", "library reading night",
          "road works on main street"]


@dataclass
class CountingOperators:
    """The city operators plus test ones, each call counted by (iri, args)."""

    calls: Counter = field(default_factory=Counter)

    def _counted(self, iri, function):
        def counted(*args):
            self.calls[(iri, args)] += 1
            return function(*args)
        counted.__name__ = function.__name__
        return counted

    def operator_set(self) -> OperatorSet:
        def fails(x):
            raise RuntimeError("this operator always fails")

        def near(x, k):
            return abs(float(x) - float(k)) < 10

        return OperatorSet([
            Operator(DISTANCE, self._counted(DISTANCE, distance), cost=2.0, arity=(4, 4)),
            Operator(WITHIN_RADIUS, self._counted(WITHIN_RADIUS, within_radius), cost=2.5, selectivity=0.3,
                     arity=(5, 5)),
            Operator(WITHIN_POLYGON, self._counted(WITHIN_POLYGON, within_polygon), cost=5.0, arity=(3, 3)),
            Operator(TEST_NS + "near", self._counted(TEST_NS + "near", near), cost=1.0, arity=(2, 2)),
            Operator(TEST_NS + "fails", self._counted(TEST_NS + "fails", fails), cost=1.0, arity=(1, 1)),
            Operator(TEST_NS + "slow", self._counted(TEST_NS + "slow", similarity), cost=800.0, selectivity=0.2,
                     arity=(2, 2)),
        ])

    def total(self) -> int:
        return sum(self.calls.values())


def reading(rng: random.Random, number: int, sensors: int = 3) -> CompoundEvent:
    """One event: 1..sensors readings, each a value, a position near Aarhus, a kind and a title."""
    graph = IRI(f"{EX}event/{number}")
    quads = []
    for k in range(rng.randint(1, sensors)):
        s = IRI(f"{EX}sensor/{rng.randrange(4)}")
        lat, long = CENTERS[rng.randrange(len(CENTERS))]
        lat += rng.choice([0.0, 0.005, 0.02, -0.01])
        long += rng.choice([0.0, 0.005, -0.02])
        quads += [
            Quad(graph, s, IRI(EX + "value"), Literal(str(rng.choice([3, 8, 12, 18, 25, 31])), XSD + "integer")),
            Quad(graph, s, IRI(EX + "lat"), Literal(f"{lat:.4f}", XSD + "decimal")),
            Quad(graph, s, IRI(EX + "long"), Literal(f"{long:.4f}", XSD + "decimal")),
            Quad(graph, s, IRI(EX + "kind"), IRI(EX + rng.choice(["Traffic", "Parking"]))),
            Quad(graph, s, IRI(EX + "title"), Literal(rng.choice(TITLES))),
        ]
    quads = [Quad(q.g, q.s, q.p, canonical_term(q.o)) for q in quads]  # as peers store them
    return CompoundEvent(graph, tuple(dict.fromkeys(quads)))


_CONJUNCTS = [
    "t:near(?v, {k})",
    "?v > {t}",
    "geo:withinRadius(?lat, ?long, {c0}, {c1}, {r})",
    "geo:distance(?lat, ?long, {c0}, {c1}) < {r}",
    "geo:withinPolygon(?lat, ?long, \"" + POLYGON + "\")",
    "t:slow(?title, \"traffic jam on ring road\") > 0.8",
    "t:fails(?v)",
    "t:near(?v, {k}) || ?v = 31",
    "!t:near(?v, {k})",
]


def random_subscription_text(rng: random.Random) -> str:
    """A subscription over a reading, with 1-3 conjuncts drawn from a small pool (heavy overlap)."""
    picked = []
    for _ in range(rng.choice([1, 1, 2, 2, 3])):
        c0, c1 = CENTERS[rng.randrange(len(CENTERS))]
        picked.append(rng.choice(_CONJUNCTS).format(k=rng.choice([10, 20]), t=rng.choice([5, 15]), c0=c0, c1=c1,
                                                    r=rng.choice([1000, 3000])))
    patterns = ["?s ex:value ?v", "?s ex:lat ?lat", "?s ex:long ?long"]
    if any("?title" in c for c in picked):
        patterns.append("?s ex:title ?title")
    if rng.random() < 0.3:
        patterns.append("?s ex:kind ex:" + rng.choice(["Traffic", "Parking"]))
    # a few write the conjuncts as separate FILTERs, some use other variable names
    filters = " ".join(f"FILTER({c})" for c in picked) if rng.random() < 0.5 else f"FILTER({' && '.join(picked)})"
    body = " . ".join(patterns)
    text = f"SELECT * WHERE {{ GRAPH ?g {{ {body} }} {filters} }}"
    if rng.random() < 0.2:
        text = text.replace("?v", "?value")
    return PREFIXES + text


def overlapping_workload(rng: random.Random, n: int) -> list[str]:
    """n subscription texts: fresh ones, exact copies and copies with one more conjunct (contained)."""
    texts: list[str] = []
    for _ in range(n):
        roll = rng.random()
        if texts and roll < 0.25:
            texts.append(rng.choice(texts))
        elif texts and roll < 0.45:
            base = rng.choice(texts)
            texts.append(base[:base.rindex("}")] + f" FILTER(?v >= {rng.choice([3, 8, 12])}) }}"
                         if "?value" not in base else base)
        else:
            texts.append(random_subscription_text(rng))
    return texts
