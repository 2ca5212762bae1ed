"""Where RDF terms land in the CAN: the term -> integer coordinate mapping of one overlay.

Each axis of the 4-D space (graph, subject, predicate, object) is the integer range
[0, top). A term's coordinate reads its *coordinate string* as a base-`radix` fraction of
`precision` digits, one digit per character, so that the order of coordinates follows the
code-point (lexicographic) order of strings: range queries and shared prefixes stay
together, and zone splits at the integer midpoint are the original system's "midpoint of
two strings" arithmetic done once, on integers.

Digit 0 means "end of string" (so "a" < "ab"); a character with code point c inside the
alphabet becomes digit c - alphabet_lo + 1. A character outside the alphabet is clamped to
its first or last digit, so the outermost zones still own everything below and above it;
clamping alone would break monotonicity, though ("\x7f" < "~0" but "\x7f" would read as
"~" and land below "~0"), so the string also ends there: after a character below the
alphabet the remaining digits are 0 (the lowest coordinate with that prefix), after one
above it they are all radix - 1 (the highest). The mapping is then non-decreasing for all
strings in code-point order, and strictly increasing for strings of at most `precision`
characters drawn from the alphabet.

Why the default alphabet is printable ASCII (0x20..0x7E) rather than all of Unicode: with
alphabet (0, 0x10FFFF) the arithmetic is exactly the original system's radix-0x110000
one, but then every character up to 0x7F lives in the first 128/0x110001 of an axis, about
1/8,700 (≈ 1/9,000) of it. Midpoint splits would need some 13 rounds along an axis before
two ASCII terms were ever separated: almost every real IRI and literal would sit on one
peer. With printable ASCII the radix is 96 and the first split along an axis already
separates terms starting below and above 'O'. The space is a property of one overlay,
fixed when its first peer starts and handed to every joiner (`to_dict`/`from_dict`).
"""

from __future__ import annotations

import hashlib

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Mapping, Sequence

from eventcloud.errors import GeometryError
from eventcloud.rdf.model import IRI, Literal, Quad, Term

#: Order of the four axes of the CAN.
DIMENSIONS = ("graph", "subject", "predicate", "object")

Point = tuple[int, int, int, int]
#: Half-open integer interval [lo, hi).
Interval = tuple[int, int]
Box = tuple[Interval, Interval, Interval, Interval]

MAPPINGS = ("local-name", "identity")
MAX_CODE_POINT = 0x10FFFF
#: Upper bound on `precision`, so a hostile or mistyped config cannot ask for huge ints.
MAX_PRECISION = 1024

_SEPARATORS = "#/:"




def local_name(iri: str) -> str:
    """The part of an IRI after its last '#', '/' or ':'.

    For an IRI ending in a separator ("http://x.org/a/") the segment before it ("a");
    if that is empty too, the whole IRI.
    """
    cut = max(iri.rfind(sep) for sep in _SEPARATORS)
    tail = iri[cut + 1 :]
    if tail or cut < 0:
        return tail or iri
    head = iri[:cut]
    previous = max(head.rfind(sep) for sep in _SEPARATORS)
    return head[previous + 1 :] or iri


@dataclass(frozen=True)
class CoordinateSpace:
    """How terms become coordinates; a property of one overlay, fixed when its first peer starts."""

    mapping: str = "local-name"
    alphabet_lo: int = 0x20
    alphabet_hi: int = 0x7E
    precision: int = 128

    def __post_init__(self) -> None:
        if self.mapping not in MAPPINGS:
            raise GeometryError(f"unknown coordinate mapping {self.mapping!r}; expected one of {MAPPINGS}")
        for name in ("alphabet_lo", "alphabet_hi", "precision"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise GeometryError(f"{name} must be an integer, got {value!r}")
        if not 0 <= self.alphabet_lo <= self.alphabet_hi <= MAX_CODE_POINT:
            raise GeometryError(
                f"alphabet must satisfy 0 <= alphabet_lo <= alphabet_hi <= 0x10FFFF, "
                f"got [{self.alphabet_lo:#x}, {self.alphabet_hi:#x}]"
            )
        if not 1 <= self.precision <= MAX_PRECISION:
            raise GeometryError(f"precision must be between 1 and {MAX_PRECISION}, got {self.precision}")

    @property
    def radix(self) -> int:
        """Alphabet size plus one: digit 0 is reserved for "end of string"."""
        return self.alphabet_hi - self.alphabet_lo + 2

    @cached_property
    def top(self) -> int:
        """Exclusive upper bound of every axis: radix ** precision."""
        return self.radix**self.precision

    def coordinate_string(self, term: Term) -> str:
        """The string whose order places `term` on an axis (see the module docstring)."""
        if isinstance(term, IRI):
            return term.value if self.mapping == "identity" else local_name(term.value)
        if isinstance(term, Literal):
            return term.lexical
        raise GeometryError(f"not an RDF term (IRI or Literal): {term!r}")

    def coordinate(self, term: Term) -> int:
        """The term's coordinate in [0, top): its coordinate string as a base-radix fraction.
        Memoised per space (terms such as predicates and graph IRIs recur constantly)."""
        return _memo_coordinate(self, term)

    def _compute_coordinate(self, term: Term) -> int:
        text = self.coordinate_string(term)[: self.precision]
        lo, hi, radix = self.alphabet_lo, self.alphabet_hi, self.radix
        value = 0
        digits = 0
        for ch in text:
            code = ord(ch)
            digits += 1
            if code < lo:  # first digit, then the smallest continuation (end of string)
                value = value * radix + 1
                break
            if code > hi:  # last digit, then the largest continuation
                value = value * radix + radix - 1
                return (value + 1) * radix ** (self.precision - digits) - 1
            value = value * radix + (code - lo + 1)
        return value * radix ** (self.precision - digits)

    def point(self, quad: Quad) -> Point:
        """Where a quad lives: (g, s, p, o) coordinates."""
        g, s, p, o = quad
        return (self.coordinate(g), self.coordinate(s), self.coordinate(p), self.coordinate(o))

    def key_point(self, key: str) -> Point:
        """A point that depends only on `key`, spread uniformly (a hash): where something named
        by `key` is kept, such as a durable subscription's mailbox."""
        digest = hashlib.sha512(key.encode("utf-8")).digest()
        return tuple(int.from_bytes(digest[i * 16:(i + 1) * 16], "big") * self.top >> 128  # type: ignore[return-value]
                     for i in range(len(DIMENSIONS)))

    def pattern_box(self, terms: Sequence[Term | None]) -> Box:
        """The box a (g, s, p, o) pattern covers: a variable (None) spans its axis, a term is a point."""
        if len(terms) != len(DIMENSIONS):
            raise GeometryError(f"a pattern has {len(DIMENSIONS)} positions (g, s, p, o), got {len(terms)}")
        intervals = []
        for term in terms:
            if term is None:
                intervals.append((0, self.top))
            else:
                c = self.coordinate(term)
                intervals.append((c, c + 1))
        return tuple(intervals)  # type: ignore[return-value]

    def whole_space(self) -> Box:
        return ((0, self.top),) * len(DIMENSIONS)  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mapping": self.mapping,
            "alphabet_lo": self.alphabet_lo,
            "alphabet_hi": self.alphabet_hi,
            "precision": self.precision,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CoordinateSpace":
        """Rebuild a space from `to_dict` output; missing keys take defaults, unknown keys are refused."""
        if not isinstance(d, Mapping):
            raise GeometryError(f"a coordinate space must be a mapping, got {type(d).__name__}")
        known = {"mapping", "alphabet_lo", "alphabet_hi", "precision"}
        unknown = sorted(str(k) for k in d if k not in known)
        if unknown:
            raise GeometryError(f"unknown coordinate space field(s): {', '.join(unknown)}")
        return cls(**dict(d))


@lru_cache(maxsize=1 << 16)
def _memo_coordinate(space: CoordinateSpace, term: Term) -> int:
    return space._compute_coordinate(term)
