"""Selectivity and cost statistics of residual predicates, learnt online per peer and offline (Spark).

The evaluation order (eventcloud.matching.ordering) needs, per predicate, the probability that
it holds and what evaluating it costs. Both are kept per *template* (a FILTER conjunct up to
variable names, named by its SPARQL text, eventcloud.matching.predicates) and per operator IRI:

* selectivity of a template: (true + w·prior) / (evaluated + w), where the prior is the
  operator's selectivity hint, else 0.5, and w = PRIOR_WEIGHT pseudo-observations;
* cost of an operator: the measured mean microseconds per call, pulled towards the declared
  cost by w pseudo-calls; a template costs the sum of its operators (BUILTIN_COST without any);
* co-matching: how often two subscriptions matched the same event (the access frequencies
  RSS filtering on a cluster, after Liu et al., merges subscriptions by), kept for the pairs a
  peer saw; `matched_together` feeds merging decisions.

Statistics are plain counts, so offline figures (experiments/spark/statistics.py writes them in
`to_dict` form) are merged in as if observed (`absorb`), and online learning goes on from there.
Pure: the peer measures time and passes microseconds in.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Any, Iterable, Mapping

__all__ = ["Statistics", "PRIOR_WEIGHT", "FORMAT"]

PRIOR_WEIGHT = 4.0
FORMAT = "eventcloud-statistics/1"
_PAIRS_LIMIT = 64  # matches per event past which co-matching pairs are not counted (quadratic)


class Statistics:
    """Counts of predicate outcomes and operator costs (one peer's, or an aggregate's)."""

    def __init__(self) -> None:
        self.templates: dict[str, list[float]] = {}   # text -> [evaluated, true]
        self.operators: dict[str, list[float]] = {}   # iri -> [calls, microseconds]
        self.comatch: Counter[tuple[str, str]] = Counter()
        self.events = 0

    # --- reading -----------------------------------------------------------------------------

    def selectivity(self, text: str, hint: float | None = None) -> float:
        prior = 0.5 if hint is None else hint
        seen = self.templates.get(text)
        if seen is None:
            return prior
        return (seen[1] + PRIOR_WEIGHT * prior) / (seen[0] + PRIOR_WEIGHT)

    def operator_cost(self, iri: str, declared: float) -> float:
        seen = self.operators.get(iri)
        if seen is None:
            return declared
        return (seen[1] + PRIOR_WEIGHT * declared) / (seen[0] + PRIOR_WEIGHT)

    def matched_together(self, a: str, b: str) -> float:
        return self.comatch[(a, b) if a < b else (b, a)]

    # --- learning ----------------------------------------------------------------------------

    def observe_predicate(self, text: str, value: bool) -> None:
        seen = self.templates.get(text)
        if seen is None:
            seen = self.templates[text] = [0.0, 0.0]
        seen[0] += 1
        seen[1] += bool(value)

    def observe_call(self, iri: str, micros: float) -> None:
        seen = self.operators.get(iri)
        if seen is None:
            seen = self.operators[iri] = [0.0, 0.0]
        seen[0] += 1
        seen[1] += max(0.0, float(micros))

    def observe_matches(self, idents: Iterable[str]) -> None:
        """One event's matching subscriptions (co-matching counts)."""
        self.events += 1
        unique = sorted(set(idents))
        if 1 < len(unique) <= _PAIRS_LIMIT:
            self.comatch.update(combinations(unique, 2))

    # --- exchange ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "events": self.events,
            "templates": {t: {"evaluated": n, "true": k} for t, (n, k) in sorted(self.templates.items())},
            "operators": {o: {"calls": n, "micros": m} for o, (n, m) in sorted(self.operators.items())},
            "comatch": [[a, b, n] for (a, b), n in sorted(self.comatch.items())],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Statistics":
        stats = cls()
        stats.absorb(data)
        return stats

    def absorb(self, data: Mapping[str, Any]) -> None:
        """Add counts in `to_dict` form (offline statistics) to these; ValueError if malformed."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ValueError(f"not a statistics document (expected format {FORMAT!r})")
        try:
            self.events += int(data.get("events", 0))
            for text, row in dict(data.get("templates", {})).items():
                n, k = float(row["evaluated"]), float(row["true"])
                if not 0 <= k <= n:
                    raise ValueError(f"template {text!r}: {k} true of {n} evaluated")
                seen = self.templates.setdefault(str(text), [0.0, 0.0])
                seen[0] += n
                seen[1] += k
            for iri, row in dict(data.get("operators", {})).items():
                n, m = float(row["calls"]), float(row["micros"])
                if n < 0 or m < 0:
                    raise ValueError(f"operator {iri!r}: negative counts")
                seen = self.operators.setdefault(str(iri), [0.0, 0.0])
                seen[0] += n
                seen[1] += m
            for a, b, n in data.get("comatch", []):
                a, b = str(a), str(b)
                self.comatch[(a, b) if a < b else (b, a)] += int(n)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed statistics document: {exc!r}") from None
