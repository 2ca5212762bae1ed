"""Reading RDF files into compound events, and writing events back as N-Quads.

This is the publisher's edge: whatever RDF a user hands us (N-Quads, TriG, Turtle, N-Triples,
N3, RDF/XML such as RSS 1.0 feeds) becomes `CompoundEvent`s made of `model` terms, and nothing
of a file is published if any of it is malformed (all-or-nothing per file).

Event boundaries:
- quad formats (N-Quads, TriG): each named graph is one event, in order of first appearance;
  triples in the default graph form one more event with a generated graph IRI;
- triple formats (Turtle, N-Triples, N3, RDF/XML): the whole file is one event with a
  generated graph IRI, `event_graph(source, timestamp_ms, sequence)`.

Blank nodes are skolemised per event with `skolem_iri(graph, label)`. Parsers invent random
labels for anonymous nodes (`[]`, nested RDF/XML descriptions), so labels are renumbered
`b0, b1, ...` in order of first appearance inside each event: parsing the same input twice
then yields the very same quads, which keeps a re-publication a true retry.

All formats are parsed by pyoxigraph (a real, streaming, validating parser that reports line
and column); it is several times faster than rdflib and keeps literal lexical forms exactly,
whereas rdflib normalises them (`"01"^^xsd:integer` becomes `"1"`). N3 is read with
pyoxigraph's N3 parser: plain-RDF N3 (such as CityBench's `.n3` files) parses; N3 formulas
and variables cannot be RDF events and are refused.
"""

from __future__ import annotations

import hashlib
import re
import xml.parsers.expat
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO, Iterable, Iterator, TextIO

import pyoxigraph as ox

from eventcloud.errors import ErrorCode, InputError

from eventcloud.rdf.model import (
    IRI,
    XSD_STRING,
    CompoundEvent,
    Literal,
    ModelError,
    Quad,
    Term,
    event_graph,
    skolem_iri,
)

__all__ = [
    "FORMATS",
    "QUAD_FORMATS",
    "RDFInputError",
    "events_from_rdflib",
    "guess_format",
    "iter_events",
    "stream_events",
    "parse_events",
    "read_events",
    "write_nquads",
]


class RDFInputError(InputError):
    """Malformed or unsupported RDF input, located as precisely as the parser allows."""

    default_code = ErrorCode.BAD_RDF

    def __init__(self, path: str | None, line: int | None, reason: str, column: int | None = None) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.reason = reason
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.path is None:
            return self.reason if self.line is None else f"line {self.line}: {self.reason}"
        if self.line is None:
            return f"{self.path}: {self.reason}"
        return f"{self.path}:{self.line}: {self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.line, self.reason, self.column))


FORMATS = frozenset({"nquads", "trig", "turtle", "ntriples", "n3", "rdfxml"})
QUAD_FORMATS = frozenset({"nquads", "trig"})

_EXTENSIONS = MappingProxyType(
    {
        ".nq": "nquads",
        ".trig": "trig",
        ".ttl": "turtle",
        ".nt": "ntriples",
        ".n3": "n3",
        ".rdf": "rdfxml",
        ".owl": "rdfxml",
        ".xml": "rdfxml",
        ".rss": "rdfxml",
    }
)
_OX_FORMATS = MappingProxyType(
    {
        "nquads": ox.RdfFormat.N_QUADS,
        "trig": ox.RdfFormat.TRIG,
        "turtle": ox.RdfFormat.TURTLE,
        "ntriples": ox.RdfFormat.N_TRIPLES,
        "n3": ox.RdfFormat.N3,
        "rdfxml": ox.RdfFormat.RDF_XML,
    }
)
# pyoxigraph repeats the position it also gives as SyntaxError attributes; keep the reason.
_POSITION_PREFIX = re.compile(
    r"^Parser error (?:at line \d+ (?:column \d+|between columns \d+ and \d+)"
    r"|between line \d+ column \d+ and line \d+ column \d+): "
)
_POSITION_SUFFIX = re.compile(r" \(line \d+\)$")
_NOT_SOURCE = re.compile(r"[^A-Za-z0-9._-]+")


#: The longest statement (line, term, literal) the parser buffers: pyoxigraph's own bound.
MAX_STATEMENT = 16 * 1024 * 1024


class RDFTooLarge(RDFInputError):
    """One statement (a line, a literal) over the parser's buffer: refused, naming the limit."""


def _too_large(label: str, data: bytes | str | None = None, path: str | Path | None = None) -> RDFTooLarge:
    """The refusal of input holding a statement over MAX_STATEMENT, with the first such line when
    it can be found (scanned in chunks: the file may be far larger than memory allows)."""
    line = _first_long_line(data, path)
    return RDFTooLarge(label, line, f"a statement over {MAX_STATEMENT // (1024 * 1024)} MiB (a literal or line this "
                                    f"long cannot be parsed, nor published: a whole event travels in one message of "
                                    f"at most 32 MiB)")


def _first_long_line(data: bytes | str | None, path: str | Path | None) -> int | None:
    if data is not None:
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
        return _long_line_in(raw[i:i + (1 << 20)] for i in range(0, len(raw), 1 << 20))
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            return _long_line_in(iter(lambda: handle.read(1 << 20), b""))
    except OSError:
        return None


def _long_line_in(chunks: Iterable[bytes]) -> int | None:
    number, length = 1, 0
    for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            length += (end if end >= 0 else len(chunk)) - start
            if length > MAX_STATEMENT:
                return number
            if end < 0:
                break
            number, length, start = number + 1, 0, end + 1
    return None


def guess_format(path: str | Path) -> str:
    """The format named by a file's extension (case-insensitive)."""
    suffix = Path(path).suffix.lower()
    try:
        return _EXTENSIONS[suffix]
    except KeyError:
        accepted = " ".join(sorted(_EXTENSIONS))
        what = f"extension {suffix!r}" if suffix else "no extension"
        raise RDFInputError(
            str(path), None, f"cannot tell the RDF format from {what}; accepted extensions: {accepted}"
        ) from None


def read_events(
    path: str | Path,
    format: str | None = None,
    *,
    source: str | None = None,
    timestamp_ms: int | None = None,
    base_iri: str | None = None,
    sequence: int = 0,
) -> list[CompoundEvent]:
    """All events of one RDF file; `source` defaults to the file's stem."""
    fmt = format if format is not None else guess_format(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise RDFInputError(str(path), None, f"cannot read file: {exc.strerror or exc}") from None
    return parse_events(
        data, fmt, name=str(path), source=source, timestamp_ms=timestamp_ms, base_iri=base_iri, sequence=sequence
    )


def parse_events(
    data: bytes | str,
    format: str,
    *,
    name: str = "<input>",
    source: str | None = None,
    timestamp_ms: int | None = None,
    base_iri: str | None = None,
    sequence: int = 0,
    default_graph: IRI | None = None,
) -> list[CompoundEvent]:
    """Parse a whole document, then cut it into events; `name` only labels errors and the source.

    `sequence` goes into the generated graph IRI, so that several inputs parsed with the same
    source and timestamp still get distinct events. `default_graph`, when given, is the graph
    IRI of the default graph's triples instead of a generated one.
    """
    if format not in FORMATS:
        raise RDFInputError(name, None, f"unknown RDF format {format!r}; expected one of {', '.join(sorted(FORMATS))}")
    groups = _parse_groups(data, format, name, base_iri)
    events: list[CompoundEvent] = []
    terms: dict[Any, Term] = {}
    generated: IRI | None = None
    for graph_name, quads in groups.items():
        if isinstance(graph_name, ox.NamedNode):
            graph = _iri(graph_name.value, name, terms)
        else:  # the default graph
            if generated is None and default_graph is not None:
                generated = default_graph
            if generated is None:
                generated = event_graph(source or _source_from_name(name), _stamp(timestamp_ms, name), sequence)
            graph = generated
        events.append(_build_event(graph, quads, name, terms))
    return events


def iter_events(
    paths: Iterable[str | Path],
    format: str | None = None,
    *,
    source: str | None = None,
    timestamp_ms: int | None = None,
    base_iri: str | None = None,
) -> Iterator[CompoundEvent]:
    """Events of several files in turn; each file is parsed completely before any is yielded.

    Files are numbered (0, 1, ...) into the generated graph IRIs' sequence so that one source
    and timestamp for many files never yield the same graph twice.
    """
    for index, path in enumerate(paths):
        yield from read_events(
            path, format, source=source, timestamp_ms=timestamp_ms, base_iri=base_iri, sequence=index
        )


def stream_events(
    source_file: str | Path | BinaryIO,
    format: str,
    *,
    name: str | None = None,
    source: str | None = None,
    timestamp_ms: int | None = None,
    base_iri: str | None = None,
    sequence: int = 0,
) -> Iterator[CompoundEvent]:
    """Events of a quad document (N-Quads, TriG) one at a time, holding one event in memory.

    An event ends where the next graph starts, so each graph's quads must be contiguous (as
    writers produce them); a graph that comes back after another one is refused with its line,
    since publishing it twice would make its second part a retry of the first. Triples of the
    default graph form one event (given at its end). Events are the same as `parse_events`
    gives; a syntax error is raised when reached, after the events before it.
    """
    if format not in QUAD_FORMATS:
        raise RDFInputError(name, None, f"only quad formats stream (nquads, trig), not {format!r}")
    label = name or str(getattr(source_file, "name", source_file))
    terms: dict[Any, Term] = {}
    finished: set[bytes] = set()
    current: Any = None
    quads: list[ox.Quad] = []
    default: list[ox.Quad] = []
    kwargs: dict[str, Any] = {"path": source_file} if isinstance(source_file, (str, Path)) else {"input": source_file}

    def done(graph_name: Any, group: list[ox.Quad]) -> CompoundEvent:
        if isinstance(graph_name, ox.BlankNode):
            raise RDFInputError(label, None, f"blank node _:{graph_name.value} used as a graph name; events need an IRI")
        finished.add(_digest(graph_name.value))
        if len(terms) > 100_000:  # a memo, not a store: keep memory bounded on big files
            terms.clear()
        return _build_event(_iri(graph_name.value, label, terms), group, label, terms)

    try:
        for quad in ox.parse(format=_OX_FORMATS[format], base_iri=base_iri, **kwargs):
            graph_name = quad.graph_name
            if isinstance(graph_name, ox.DefaultGraph):
                default.append(quad)
                continue
            if graph_name != current:
                if quads:
                    yield done(current, quads)
                if isinstance(graph_name, ox.NamedNode) and _digest(graph_name.value) in finished:
                    raise RDFInputError(label, None, f"graph <{graph_name.value}> comes back after other graphs: an "
                                                     f"event's quads must be together (sort the file by graph)")
                current, quads = graph_name, []
            quads.append(quad)
    except RDFInputError:
        raise
    except MemoryError:
        raise _too_large(label, path=source_file if isinstance(source_file, (str, Path)) else None) from None
    except SyntaxError as exc:
        raise _syntax_error(exc, b"", format, label) from None
    except OSError as exc:
        raise RDFInputError(label, None, f"cannot read file: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RDFInputError(label, None, str(exc)) from None
    if quads:
        yield done(current, quads)
    if default:
        graph = event_graph(source or _source_from_name(label), _stamp(timestamp_ms, label), sequence)
        yield _build_event(graph, default, label, terms)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).digest()


def write_nquads(events: Iterable[CompoundEvent], out: TextIO) -> int:
    """Write events as N-Quads (one line per quad); returns the number of quads written."""
    count = 0
    for event in events:
        out.write(event.n_quads())
        count += len(event.quads)
    return count


def events_from_rdflib(
    graph_or_dataset: Any,
    *,
    graph: IRI | None = None,
    source: str = "rdflib",
    timestamp_ms: int | None = None,
) -> list[CompoundEvent]:
    """Events from an rdflib Graph or Dataset, for SDK users who already hold rdflib data.

    A plain Graph is one event: its graph is `graph`, else the Graph's identifier when that is
    an IRI, else a generated one. A Dataset (or ConjunctiveGraph) gives one event per named
    graph and one for default-graph triples (graph `graph`, else generated). Lexical forms are
    whatever rdflib holds (rdflib normalises some literals when it parses).
    """
    import rdflib
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

    groups: dict[Any, list[tuple[Any, Any, Any]]] = {}
    if isinstance(graph_or_dataset, rdflib.ConjunctiveGraph):  # Dataset is a ConjunctiveGraph
        default = getattr(graph_or_dataset, "default_graph", None)  # rdflib >= 7.2
        if default is None:
            default = graph_or_dataset.default_context
        default_ids = {DATASET_DEFAULT_GRAPH_ID, default.identifier}
        for s, p, o, ctx in graph_or_dataset.quads((None, None, None, None)):
            ident = ctx.identifier if isinstance(ctx, rdflib.Graph) else ctx
            if ident is None or ident in default_ids:
                key: Any = None
            elif isinstance(ident, rdflib.URIRef):
                key = str(ident)
            else:
                raise RDFInputError(None, None, f"blank node {ident.n3()} used as a graph name")
            groups.setdefault(key, []).append((s, p, o))
    elif isinstance(graph_or_dataset, rdflib.Graph):
        ident = graph_or_dataset.identifier
        key = str(ident) if graph is None and isinstance(ident, rdflib.URIRef) else None
        groups[key] = list(graph_or_dataset)
    else:
        raise TypeError(f"expected an rdflib Graph or Dataset, got {type(graph_or_dataset).__name__}")

    events = []
    for key, triples in groups.items():
        if not triples:
            continue
        if key is not None:
            event_iri = IRI(key)
        elif graph is not None:
            event_iri = graph
        else:
            event_iri = event_graph(source, _stamp(timestamp_ms, source), 0)
        events.append(_rdflib_event(event_iri, triples))
    return events


# --- internals ---------------------------------------------------------------------------


def _parse_groups(data: bytes | str, fmt: str, name: str, base_iri: str | None) -> dict[Any, list[ox.Quad]]:
    """Parse everything first (all-or-nothing), grouping quads by graph in first-seen order."""
    groups: dict[Any, list[ox.Quad]] = {}
    if isinstance(data, str):  # pyoxigraph reads bytes; a str it cannot encode it took for a file
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RDFInputError(name, None, f"the text is not valid Unicode ({exc.reason} at character "
                                            f"{exc.start})") from None
    try:
        for quad in ox.parse(data, _OX_FORMATS[fmt], base_iri=base_iri):
            groups.setdefault(quad.graph_name, []).append(quad)
    except MemoryError:
        raise _too_large(name, data=data) from None
    except SyntaxError as exc:
        raise _syntax_error(exc, data, fmt, name) from None
    except ValueError as exc:  # e.g. an invalid base IRI
        raise RDFInputError(name, None, str(exc)) from None
    for graph_name in groups:
        if isinstance(graph_name, ox.BlankNode):
            if fmt in QUAD_FORMATS:
                reason = f"blank node _:{graph_name.value} used as a graph name; events need an IRI"
            else:
                reason = "N3 formulas ({ ... }) are not supported: they cannot be published as RDF"
            raise RDFInputError(name, None, reason)
    return groups


def _syntax_error(exc: SyntaxError, data: bytes | str, fmt: str, name: str) -> RDFInputError:
    message = exc.msg if isinstance(exc.msg, str) else str(exc)
    reason = _POSITION_SUFFIX.sub("", _POSITION_PREFIX.sub("", message))
    line, column = exc.lineno, exc.offset
    if line is None and fmt == "rdfxml":
        line, column = _xml_error_position(data)
    if column is not None:
        reason = f"{reason} (column {column})"
    return RDFInputError(name, line, reason, column)


def _xml_error_position(data: bytes | str) -> tuple[int | None, int | None]:
    """Where expat finds the document ill-formed; pyoxigraph's RDF/XML errors carry no position."""
    parser = xml.parsers.expat.ParserCreate()
    try:
        parser.Parse(data.encode("utf-8") if isinstance(data, str) else data, True)
    except xml.parsers.expat.ExpatError as exc:
        return exc.lineno, exc.offset + 1
    return None, None


def _stamp(timestamp_ms: int | None, name: str) -> int:
    """The timestamp of a generated graph IRI: the caller's (this module reads no clock)."""
    if timestamp_ms is None:
        raise TypeError(f"{name}: triples outside a named graph form an event whose graph IRI is generated from a "
                        f"timestamp: pass timestamp_ms (e.g. the current time in milliseconds)")
    return timestamp_ms


def _source_from_name(name: str) -> str:
    """A valid `event_graph` source from a file name: its stem with odd characters replaced."""
    stem = Path(name).stem if name else ""
    return _NOT_SOURCE.sub("_", stem).strip("._") or "input"


def _build_event(graph: IRI, quads: list[ox.Quad], name: str, terms: dict[Any, Term]) -> CompoundEvent:
    blanks: dict[str, IRI] = {}

    def term(node: Any) -> Term:
        found = terms.get(node)
        if found is not None:
            return found
        if isinstance(node, ox.BlankNode):
            skolem = blanks.get(node.value)
            if skolem is None:
                skolem = blanks[node.value] = skolem_iri(graph, f"b{len(blanks)}")
            return skolem
        if isinstance(node, ox.NamedNode):
            return _iri(node.value, name, terms)
        if isinstance(node, ox.Literal):
            return _literal(node, name, terms)
        raise RDFInputError(name, None, f"triple terms (RDF 1.2 / RDF-star) are not supported: {node}")

    built = [Quad(graph, term(q.subject), _predicate(term(q.predicate), name), term(q.object)) for q in quads]
    return CompoundEvent(graph, tuple(built))


def _predicate(term: Term, name: str) -> IRI:
    if not isinstance(term, IRI):  # parsers already refuse this; keep the model's promise anyway
        raise RDFInputError(name, None, f"predicate {term.n3()} is not an IRI")
    return term


def _iri(value: str, name: str, terms: dict[Any, Term]) -> IRI:
    key = ox.NamedNode(value)
    found = terms.get(key)
    if found is None:
        try:
            found = terms[key] = IRI(value)
        except ModelError as exc:
            raise RDFInputError(name, None, str(exc)) from None
    return found  # type: ignore[return-value]


def _literal(node: ox.Literal, name: str, terms: dict[Any, Term]) -> Literal:
    if getattr(node, "direction", None) is not None:
        raise RDFInputError(name, None, f"literals with a base direction are not supported: {node}")
    try:
        if node.language is not None:
            lit = Literal(node.value, language=node.language)
        else:
            lit = Literal(node.value, node.datatype.value)
    except ModelError as exc:
        raise RDFInputError(name, None, str(exc)) from None
    terms[node] = lit
    return lit


def _rdflib_event(graph: IRI, triples: list[tuple[Any, Any, Any]]) -> CompoundEvent:
    import rdflib

    blanks: dict[Any, IRI] = {}

    def term(node: Any) -> Term:
        if isinstance(node, rdflib.BNode):
            skolem = blanks.get(node)
            if skolem is None:
                skolem = blanks[node] = skolem_iri(graph, f"b{len(blanks)}")
            return skolem
        if isinstance(node, rdflib.URIRef):
            return IRI(str(node))
        if isinstance(node, rdflib.Literal):
            if node.language:
                return Literal(str(node), language=node.language)
            return Literal(str(node), str(node.datatype) if node.datatype else XSD_STRING)
        raise RDFInputError(None, None, f"unsupported rdflib term {node!r} (only IRIs, literals, blank nodes)")

    try:
        quads = []
        for s, p, o in triples:
            pred = term(p)
            if not isinstance(pred, IRI):
                raise RDFInputError(None, None, f"predicate {pred.n3()} is not an IRI")
            quads.append(Quad(graph, term(s), pred, term(o)))
    except ModelError as exc:
        raise RDFInputError(None, None, str(exc)) from None
    return CompoundEvent(graph, tuple(quads))
