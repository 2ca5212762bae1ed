"""A deliberately expensive operator: text similarity by edit distance (quadratic in the lengths).

    PREFIX txt: <http://eventcloud.io/ns/text#>
    txt:similarity(?a, ?b)    1 - levenshtein(a, b) / max(len a, len b), in [0, 1] (case-folded)

It stands for costly operators such as image or pattern recognisers: a few hundred
microseconds to milliseconds per call on event titles, so the evaluation order and shared
evaluation have something to save. Strings longer than MAX_LENGTH are cut (a budget on input).
"""

from __future__ import annotations

from eventcloud.sparql.filters.operators import Operator

__all__ = ["TEXT", "SIMILARITY", "OPERATORS", "similarity", "levenshtein"]

TEXT = "http://eventcloud.io/ns/text#"
SIMILARITY = TEXT + "similarity"
MAX_LENGTH = 512


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions), row by row."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def similarity(a: str, b: str) -> float:
    a, b = str(a).casefold()[:MAX_LENGTH], str(b).casefold()[:MAX_LENGTH]
    if not a and not b:
        return 1.0
    return 1.0 - levenshtein(a, b) / max(len(a), len(b))


OPERATORS = (Operator(SIMILARITY, similarity, cost=800.0, selectivity=0.1, arity=(2, 2)),)
