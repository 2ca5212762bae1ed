"""Subscription containment (as RSS filtering on a cluster uses it): does every event matching S2 match S1?

`contains(s1, s2)` is sound and conservative: True only when it can prove S1 ⊇ S2, False when
unsure. The proof is a homomorphism h from S1's variables to S2's terms such that

* S1's graph term maps to S2's (a graph IRI in S1 must be the same IRI in S2);
* every triple pattern of S1, renamed by h, is a pattern of S2 (S1 may have fewer patterns);
* every FILTER conjunct of S1 (top-level `&&` operands), renamed by h, is *implied* by S2's
  conjuncts: it is one of them, or it is a numeric comparison `?x op k1` implied by S2's
  `h(?x) op' k2` (`=`, `<`, `<=`, `>`, `>=`, integer or decimal constants), checked under exact
  arithmetic and under the xsd:double and xsd:float roundings SPARQL promotion can apply.
  A conjunct over a variable h does not map (one no pattern binds) is never taken as implied.

Why it is sound: a solution μ of S2 (patterns matched, every FILTER true) gives μ∘h, which
matches S1's patterns (each is an S2 pattern renamed) and makes each S1 conjunct true (it
evaluates exactly as its image under μ, or as a comparison the image's bound implies).
Projection, DISTINCT and the listener kind play no part: containment is about matching.
Two subscriptions containing each other are *equivalent* (`equivalent`). Used by the shared
index to prune (a contained subscription is evaluated only when its container matched).
"""

from __future__ import annotations

import struct
from fractions import Fraction
from typing import Any

from eventcloud.matching.constraints import conjuncts
from eventcloud.rdf.model import Literal
from eventcloud.sparql.filters.values import Dec, to_value
from eventcloud.sparql.subscription import Subscription, Var

__all__ = ["contains", "equivalent"]

_ORDER_OPS = ("=", "<", "<=", ">", ">=")
_FLIP = {"=": "=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}


def equivalent(s1: Subscription, s2: Subscription) -> bool:
    return contains(s1, s2) and contains(s2, s1)


def contains(s1: Subscription, s2: Subscription, *, first_onto_first: bool = False) -> bool:
    """Can it be proved that every event matching `s2` matches `s1`? With `first_onto_first`,
    only by an h mapping S1's patterns[0] onto S2's patterns[0]: then a solution of S2 that
    matches its first pattern with quad q gives one of S1 matching its first pattern with q
    (what lets S2 ride S1's CSMA chain from q)."""
    start: dict[str, Any] = {}
    if isinstance(s1.graph, Var):
        start[s1.graph.name] = s2.graph
    elif s1.graph != s2.graph:
        return False
    mine = [(s1.graph, p.subject, p.predicate, p.object) for p in s1.patterns]
    theirs = [(s2.graph, p.subject, p.predicate, p.object) for p in s2.patterns]
    wanted = [c for f in s1.filters for c in conjuncts(f.expr)]
    given = [c for f in s2.filters for c in conjuncts(f.expr)]
    if s1.filters and len({f.base for f in s1.filters} | {f.base for f in s2.filters}) > 1:
        return False  # IRI() resolves against the base: conjuncts compare only under one
    if any(f.uses_taxonomy for f in s1.filters) and s1.taxonomy != s2.taxonomy:
        return False
    if first_onto_first:
        if not mine or not theirs or _extend(mine[0], theirs[0], start) is None:
            return False
        solutions = _homomorphisms(mine, theirs, 1, start)
    else:
        solutions = _homomorphisms(mine, theirs, 0, start)
    for h in solutions:
        if all(_implied(c, h, given) for c in wanted):
            return True
    return False


def _homomorphisms(mine: list[tuple], theirs: list[tuple], i: int, h: dict[str, Any]):
    """Every mapping of S1's variables making pattern i.. of S1 a pattern of S2 (backtracking)."""
    if i == len(mine):
        yield h
        return
    for target in theirs:
        added = _extend(mine[i], target, h)
        if added is not None:
            yield from _homomorphisms(mine, theirs, i + 1, h)
            for name in added:
                del h[name]


def _extend(pattern: tuple, target: tuple, h: dict[str, Any]) -> list[str] | None:
    """Extend h so that `pattern` renamed is `target`: the names it added, or None (h unchanged)."""
    added: list[str] = []
    for term, image in zip(pattern, target):
        if isinstance(term, Var):
            known = h.get(term.name)
            if known is None:
                h[term.name] = image
                added.append(term.name)
                continue
            if known == image:
                continue
        elif term == image:
            continue
        for name in added:
            del h[name]
        return None
    return added


def _rename(expr: Any, h: dict[str, Any]) -> Any:
    """S1's expression in S2's terms; None when a variable is not mapped."""
    kind = expr[0]
    if kind == "var":
        image = h.get(expr[1])
        if image is None:
            return None
        return ("var", image.name) if isinstance(image, Var) else ("const", image)
    if kind == "bound":
        image = h.get(expr[1])
        return None if not isinstance(image, Var) else ("bound", image.name)
    if kind == "const":
        return expr
    out: list[Any] = []
    for part in expr:
        if isinstance(part, tuple) and part and isinstance(part[0], str):
            renamed = _rename(part, h)
            if renamed is None:
                return None
            out.append(renamed)
        elif isinstance(part, tuple) and part and all(isinstance(e, tuple) and e and isinstance(e[0], str) for e in part):
            items = [_rename(e, h) for e in part]
            if any(e is None for e in items):
                return None
            out.append(tuple(items))
        else:
            out.append(part)
    return tuple(out)


def _implied(conjunct: Any, h: dict[str, Any], given: list[Any]) -> bool:
    image = _rename(conjunct, h)
    if image is None:
        return False
    if image in given:
        return True
    bound = _comparison(image)
    if bound is None:
        return False
    side, op, k1 = bound
    for other in given:
        theirs = _comparison(other)
        if theirs is not None and theirs[0] == side and _numeric_implies(theirs[1], theirs[2], op, k1):
            return True
    return False


def _comparison(expr: Any) -> tuple[Any, str, Fraction] | None:
    """(variable side, op, exact constant) of `?x op k` or `k op ?x` with an integer/decimal k."""
    op = expr[0]
    if op not in _ORDER_OPS:
        return None
    left, right = expr[1], expr[2]
    if left[0] == "var" and right[0] == "const":
        k = _exact(right[1])
        return None if k is None else (left, op, k)
    if right[0] == "var" and left[0] == "const":
        k = _exact(left[1])
        return None if k is None else (right, _FLIP[op], k)
    return None


def _exact(term: Any) -> Fraction | None:
    if not isinstance(term, Literal):
        return None
    try:
        value = to_value(term)
    except Exception:
        return None
    if type(value) is int:
        return Fraction(value)
    if type(value) is Dec:
        return Fraction(value.v, 10 ** 18)
    return None


def _f32(x: Fraction) -> float:
    try:
        return struct.unpack("f", struct.pack("f", float(x)))[0]
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


_VIEWS = (lambda x: x, float, _f32)


def _numeric_implies(op2: str, k2: Fraction, op1: str, k1: Fraction) -> bool:
    """Does `y op2 k2` imply `y op1 k1` for every numeric y, in every promotion view?"""
    for view in _VIEWS:
        try:
            a, b = view(k2), view(k1)
        except OverflowError:
            return False
        if not _implies_in(op2, a, op1, b):
            return False
    return True


def _implies_in(op2: str, k2: Any, op1: str, k1: Any) -> bool:
    if op2 == "=":
        return {"=": k2 == k1, "<": k2 < k1, "<=": k2 <= k1, ">": k2 > k1, ">=": k2 >= k1}[op1]
    if op1 == "=":
        return False
    lower2, upper2 = op2 in (">", ">="), op2 in ("<", "<=")
    if op1 in (">", ">=") and lower2:
        return k2 > k1 or (k2 == k1 and (op1 == ">=" or op2 == ">"))
    if op1 in ("<", "<=") and upper2:
        return k2 < k1 or (k2 == k1 and (op1 == "<=" or op2 == "<"))
    return False
