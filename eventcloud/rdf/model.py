"""RDF terms, quadruples and compound events: the data model every module speaks.

Terms are small frozen value objects (hashable, cheap to compare) rather than rdflib or
pyoxigraph objects, so that geometry, matching and the wire codec stay free of any
library's identity rules. Conversions to the libraries live at the edges (rdfio, stores).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, NamedTuple, Union

from eventcloud.errors import ModelError
from eventcloud.rdf.syntax import iri_problem, is_language_tag

XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_STRING = XSD + "string"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDF_LANGSTRING = RDF + "langString"

#: Base of the graph IRIs the SDK makes for events published without one.
EVENT_BASE = "http://eventcloud.io/events/"
#: Base of skolem IRIs that replace blank nodes (RDF 1.1 §3.5 "well-known genid").
SKOLEM_BASE = "http://eventcloud.io/.well-known/genid/"




@dataclass(frozen=True, slots=True)
class IRI:
    value: str

    def __post_init__(self) -> None:
        if type(self.value) is not str:   # an IRI, or a str subclass such as rdflib's URIRef: its text
            if isinstance(self.value, IRI):
                object.__setattr__(self, "value", self.value.value)
            elif isinstance(self.value, str):
                object.__setattr__(self, "value", str(self.value))
        if not isinstance(self.value, str) or not self.value:
            raise ModelError(f"an IRI must be a non-empty string, got {self.value!r}")
        if _IRI_FORBIDDEN.search(self.value):
            raise ModelError(f"IRI {self.value!r} contains a character not allowed in IRIs")
        if not _SCHEME.match(self.value):
            raise ModelError(f"IRI {self.value[:80]!r} has no scheme: RDF needs absolute IRIs such as "
                             f"http://example.org/x or urn:x")
        problem = iri_problem(self.value)
        if problem is not None:
            raise ModelError(f"IRI {self.value[:80]!r} is malformed: {problem}")

    def n3(self) -> str:
        return f"<{self.value}>"

    def __str__(self) -> str:
        return self.n3()


@dataclass(frozen=True, slots=True)
class Literal:
    lexical: str
    datatype: str = XSD_STRING
    language: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.lexical, str):
            raise ModelError(f"a literal's lexical form must be a string, got {self.lexical!r}")
        if type(self.datatype) is not str:   # an IRI, or rdflib's URIRef: the IRI's text
            if isinstance(self.datatype, IRI):
                object.__setattr__(self, "datatype", self.datatype.value)
            elif isinstance(self.datatype, str):
                object.__setattr__(self, "datatype", str(self.datatype))
            else:
                raise ModelError(f"a literal's datatype must be an IRI (an IRI object or its string), "
                                 f"got {self.datatype!r}")
        elif self.datatype != XSD_STRING:
            problem = _datatype_problem(self.datatype)
            if problem is not None:
                raise ModelError(problem)
            if len(self.lexical) > MAX_NUMERAL_DIGITS and self.datatype in _NUMERALS:
                raise ModelError(f"an xsd:{self.datatype.rpartition('#')[2]} literal of {len(self.lexical)} characters: "
                                 f"numbers are accepted up to {MAX_NUMERAL_DIGITS} digits")
        if self.language is not None:
            if not is_language_tag(self.language):
                raise ModelError(f"invalid language tag {self.language!r}: not a BCP 47 tag such as en, en-GB or zh-Hant")
            # RDF 1.1: language tags compare case-insensitively; keep one canonical form.
            object.__setattr__(self, "language", self.language.lower())
            object.__setattr__(self, "datatype", RDF_LANGSTRING)
        elif self.datatype == RDF_LANGSTRING:
            raise ModelError("an rdf:langString literal needs a language tag")

    def n3(self) -> str:
        text = '"' + _escape_string(self.lexical) + '"'
        if self.language is not None:
            return f"{text}@{self.language}"
        if self.datatype == XSD_STRING:
            return text
        return f"{text}^^<{self.datatype}>"

    def __str__(self) -> str:
        return self.n3()


Term = Union[IRI, Literal]

_new = object.__new__
_set = object.__setattr__


@lru_cache(maxsize=1 << 16)
def trusted_iri(value: str) -> IRI:
    """An IRI from text validated before: read back from a peer's store, or sent by another
    peer, which checked it where it entered. Checking it again cost ~10 µs a term, a third of a
    loaded peer's CPU; IRIs recur constantly (graphs, predicates, sensors) and are immutable."""
    iri = _new(IRI)
    _set(iri, "value", value)
    return iri


def trusted_literal(lexical: str, datatype: str, language: str | None = None) -> Literal:
    """A literal from parts validated before (see `trusted_iri`), in canonical form already."""
    literal = _new(Literal)
    _set(literal, "lexical", lexical)
    _set(literal, "datatype", datatype)
    _set(literal, "language", language)
    return literal

#: Python's own bound on converting digits to an int (sys.get_int_max_str_digits): a longer
#: numeral is refused where it enters, not failed on where a filter or a store reads it.
MAX_NUMERAL_DIGITS = 4300
_NUMERALS = frozenset(XSD + name for name in (
    "integer", "decimal", "byte", "short", "int", "long", "unsignedByte", "unsignedShort", "unsignedInt",
    "unsignedLong", "positiveInteger", "negativeInteger", "nonPositiveInteger", "nonNegativeInteger"))


@lru_cache(maxsize=4096)
def _datatype_problem(datatype: str) -> str | None:
    """Why a literal's datatype is no IRI (datatypes recur: each is checked once)."""
    try:
        IRI(datatype)
    except ModelError as exc:
        return f"a literal's datatype must be an IRI: {exc}"
    return None


class Quad(NamedTuple):
    """(graph, subject, predicate, object); the graph is always an IRI."""

    g: IRI
    s: Term
    p: IRI
    o: Term

    def n_quads(self) -> str:
        return f"{self.s.n3()} {self.p.n3()} {self.o.n3()} {self.g.n3()} ."


def make_quad(g: Term, s: Term, p: Term, o: Term) -> Quad:
    """Build a quad, checking positions (graph and predicate must be IRIs)."""
    if not isinstance(g, IRI):
        raise ModelError(f"the graph of a quad must be an IRI, got {g!r}")
    if not isinstance(p, IRI):
        raise ModelError(f"the predicate of a quad must be an IRI, got {p!r}")
    if not isinstance(s, IRI):
        raise ModelError(f"the subject of a quad must be an IRI (RDF has no literal subjects), got {s!r}")
    if not isinstance(o, (IRI, Literal)):
        raise ModelError(f"the object of a quad must be an IRI or a literal, got {o!r}")
    return Quad(g, s, p, o)


@dataclass(frozen=True, slots=True)
class CompoundEvent:
    """A non-empty set of quads sharing one graph IRI, published atomically.

    Quads keep their first-seen order (OSMA's single-notifier rule depends on "CE order")
    and duplicates are dropped, since an RDF dataset is a set.
    """

    graph: IRI
    quads: tuple[Quad, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.graph, IRI):
            raise ModelError(f"a compound event's graph must be an IRI, got {self.graph!r}")
        if not self.quads:
            raise ModelError(f"compound event {self.graph.value} has no quads")
        seen: dict[Quad, None] = {}
        for quad in self.quads:
            if not isinstance(quad, Quad):
                raise ModelError(f"not a quad: {quad!r}")
            if quad.g != self.graph:
                raise ModelError(
                    f"quad {quad.n_quads()} is in graph {quad.g.value}, "
                    f"not in the event's graph {self.graph.value}"
                )
            seen.setdefault(quad)
        object.__setattr__(self, "quads", tuple(seen))

    def __len__(self) -> int:
        return len(self.quads)

    @classmethod
    def from_triples(cls, graph: IRI, triples: Iterable[tuple[Term, Term, Term]]) -> "CompoundEvent":
        return cls(graph, tuple(make_quad(graph, s, p, o) for s, p, o in triples))

    def n_quads(self) -> str:
        return "".join(q.n_quads() + "\n" for q in self.quads)


def event_graph(source: str, timestamp_ms: int, sequence: int) -> IRI:
    """The graph IRI the SDK gives an event published without one.

    Built from the source identifier, the timestamp and a sequence number; the last path
    segment is a short digest of the three so that events spread over the graph axis under
    the `local-name` coordinate mapping instead of clustering on one timestamp prefix.
    """
    if not source or any(c in source for c in '<>"{}|^`\\ /'):
        raise ModelError(f"invalid source identifier {source!r}: use letters, digits, '-', '_', '.'")
    digest = hashlib.blake2b(f"{source}\0{timestamp_ms}\0{sequence}".encode(), digest_size=6).hexdigest()
    return IRI(f"{EVENT_BASE}{source}/{timestamp_ms}/{sequence}/{digest}")


def skolem_iri(graph: IRI, label: str) -> IRI:
    """The IRI that replaces blank node `label` inside the event `graph`.

    Stable within one event (same label, same IRI) and distinct across events.
    """
    digest = hashlib.blake2b(graph.value.encode(), digest_size=8).hexdigest()
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", label)
    return IRI(f"{SKOLEM_BASE}{digest}-{safe}")


# --- N-Triples term syntax -------------------------------------------------------------

_IRI_FORBIDDEN = re.compile(r'[\x00-\x20<>"{}|^`\\]')
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_UNESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_NEEDS_ESCAPE = re.compile(r'["\\\n\r\t\b\f]')
_ESCAPE_SEQ = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[tbnrf\"'\\])")
_LITERAL = re.compile(
    r'^"((?:[^"\\]|\\.)*)"(?:@([A-Za-z]+(?:-[A-Za-z0-9]+)*)|\^\^<([^<>"{}|^`\\\x00-\x20]+)>)?$', re.S
)


def _escape_string(text: str) -> str:
    if not _NEEDS_ESCAPE.search(text):
        return text
    return _NEEDS_ESCAPE.sub(lambda m: _ESCAPES[m.group()], text)


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "uU":
            return chr(int(code[1:], 16))
        return _UNESCAPES[code]

    return _ESCAPE_SEQ.sub(one, text)


def term_from_n3(text: str) -> Term:
    """Parse one term in N-Triples syntax (`<iri>`, `"lex"`, `"lex"@en`, `"lex"^^<dt>`)."""
    text = text.strip()
    if text.startswith("<") and text.endswith(">"):
        return IRI(_unescape(text[1:-1]))
    match = _LITERAL.match(text)
    if match is None:
        hint = ""
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"]*", text):
            hint = f" (an IRI is written in angle brackets: <{text}>)"
        elif text and not text.startswith(("<", '"')):
            hint = f' (an IRI is written <http://…>, a literal "{text}")'
        raise ModelError(f"not an N-Triples IRI or literal: {text!r}{hint}")
    lexical, language, datatype = match.groups()
    if language is not None:
        return Literal(_unescape(lexical), language=language)
    return Literal(_unescape(lexical), datatype or XSD_STRING)
