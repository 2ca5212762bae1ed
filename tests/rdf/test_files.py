"""RDF input layer: formats, event boundaries, skolemisation, errors, and the CityBench RDF files."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import pytest
import rdflib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventcloud.cli.demo import citybench_dir as citybench_data_dir
from eventcloud.rdf.model import (
    IRI,
    RDF_LANGSTRING,
    SKOLEM_BASE,
    XSD,
    XSD_STRING,
    CompoundEvent,
    Literal,
    event_graph,
)
from eventcloud.rdf.files import (
    FORMATS,
    RDFInputError,
    events_from_rdflib,
    guess_format,
    iter_events,
    parse_events,
    read_events,
    write_nquads,
)

DATA = citybench_data_dir() or Path("../shared/data/citybench")
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"CityBench data not found at {DATA} (set EVENTCLOUD_CITYBENCH or clone the repo next to shared/)"
)

EX = "http://example.org/"
TS = 1_700_000_000_000

# One small document per format, each with blank nodes, a language tag, typed and escaped literals.
TURTLE = r"""@prefix ex: <http://example.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:alice ex:knows _:bob ; ex:name "Alice \"A\"\nLiddell"@EN-gb ; ex:age "01"^^xsd:integer .
_:bob ex:name "Bob" ; ex:address [ ex:city "Aarhus" ] .
"""
NTRIPLES = r"""<http://example.org/alice> <http://example.org/knows> _:bob .
<http://example.org/alice> <http://example.org/name> "Alice \"A\"\nLiddell"@en-gb .
<http://example.org/alice> <http://example.org/age> "01"^^<http://www.w3.org/2001/XMLSchema#integer> .
_:bob <http://example.org/name> "Bob\\path \u00e9" .
"""
RDFXML = """<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://example.org/">
  <rdf:Description rdf:about="http://example.org/alice">
    <ex:knows rdf:nodeID="bob"/>
    <ex:name xml:lang="en">Alice</ex:name>
    <ex:age rdf:datatype="http://www.w3.org/2001/XMLSchema#integer">01</ex:age>
  </rdf:Description>
  <rdf:Description rdf:nodeID="bob">
    <ex:address><rdf:Description><ex:city>Aarhus</ex:city></rdf:Description></ex:address>
  </rdf:Description>
</rdf:RDF>
"""
TRIG = """@prefix ex: <http://example.org/> .
ex:g1 { ex:alice ex:knows _:b . _:b ex:name "Bob" . }
ex:top ex:says "default" .
ex:g2 { ex:carol ex:knows _:b . _:b ex:name "Dan"@da . [] ex:p [] . }
ex:g1 { ex:alice ex:age 30 . }
"""
NQUADS = """<http://example.org/s> <http://example.org/p> "one" <http://example.org/g1> .
<http://example.org/s> <http://example.org/p> _:x <http://example.org/g2> .
_:x <http://example.org/p> "two"@en <http://example.org/g2> .
<http://example.org/s> <http://example.org/p> "three"^^<http://example.org/dt> <http://example.org/g1> .
"""
N3 = """@prefix ex: <http://example.org/> .
ex:a ex:b ex:c ; ex:d [ ex:e 1.50 ] .
ex:a = ex:f .
"""
SAMPLES = {
    "turtle": TURTLE,
    "ntriples": NTRIPLES,
    "rdfxml": RDFXML,
    "trig": TRIG,
    "nquads": NQUADS,
    "n3": N3,
}

RSS = """<?xml version="1.0" encoding="utf-8"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="http://news.example.org/rss">
    <title>Aarhus news</title>
    <link>http://news.example.org/</link>
    <description>City news &amp; events</description>
    <items>
      <rdf:Seq>
        <rdf:li rdf:resource="http://news.example.org/1"/>
        <rdf:li rdf:resource="http://news.example.org/2"/>
      </rdf:Seq>
    </items>
  </channel>
  <item rdf:about="http://news.example.org/1">
    <title>Road works on Skanderborgvej</title>
    <link>http://news.example.org/1</link>
    <dc:date>2014-08-01T07:50:00Z</dc:date>
  </item>
  <item rdf:about="http://news.example.org/2">
    <title>Concert in Symfonisk Sal</title>
    <link>http://news.example.org/2</link>
  </item>
</rdf:RDF>
"""

RSS_NS = "http://purl.org/rss/1.0/"
RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"


def objects(event: CompoundEvent, predicate: str) -> list:
    return [q.o for q in event.quads if q.p == IRI(predicate)]


def round_trip(events: list[CompoundEvent]) -> list[CompoundEvent]:
    out = io.StringIO()
    assert write_nquads(events, out) == sum(len(e) for e in events)
    return parse_events(out.getvalue(), "nquads")


# --- formats and event boundaries ---------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        ("a.nq", "nquads"), ("a.trig", "trig"), ("a.ttl", "turtle"), ("a.nt", "ntriples"),
        ("a.n3", "n3"), ("a.rdf", "rdfxml"), ("a.owl", "rdfxml"), ("a.xml", "rdfxml"),
        ("feed.rss", "rdfxml"), ("dir.v1/DATA.TTL", "turtle"),
    ],
)
def test_guess_format_by_extension(name: str, expected: str) -> None:
    assert guess_format(name) == expected
    assert expected in FORMATS


@pytest.mark.parametrize("name", ["data.json", "README", "x.csv"])
def test_unknown_extension_names_file_and_accepted_extensions(name: str) -> None:
    with pytest.raises(RDFInputError) as info:
        guess_format(name)
    message = str(info.value)
    assert message.startswith(f"{name}: ")
    for ext in (".nq", ".trig", ".ttl", ".nt", ".n3", ".rdf", ".owl", ".xml", ".rss"):
        assert ext in message
    assert info.value.path == name and info.value.line is None


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_each_format_round_trips_through_nquads(fmt: str) -> None:
    events = parse_events(SAMPLES[fmt], fmt, source="sample", timestamp_ms=TS)
    assert events and all(len(e) > 0 for e in events)
    assert round_trip(events) == events


@pytest.mark.parametrize("fmt", ["turtle", "ntriples", "rdfxml", "n3"])
def test_triple_formats_give_one_event_with_generated_graph(fmt: str) -> None:
    events = parse_events(SAMPLES[fmt], fmt, source="sample", timestamp_ms=TS)
    assert len(events) == 1
    assert events[0].graph == event_graph("sample", TS, 0)


def test_trig_splits_by_graph_in_first_appearance_order() -> None:
    events = parse_events(TRIG, "trig", source="feed", timestamp_ms=TS)
    graphs = [e.graph for e in events]
    assert graphs == [IRI(EX + "g1"), event_graph("feed", TS, 0), IRI(EX + "g2")]
    g1, default, g2 = events
    assert len(g1) == 3  # the second ex:g1 block joins the first
    assert objects(default, EX + "says") == [Literal("default")]
    assert len(g2) == 3


def test_nquads_splits_by_graph() -> None:
    events = parse_events(NQUADS, "nquads")
    assert [e.graph.value for e in events] == [EX + "g1", EX + "g2"]
    assert [len(e) for e in events] == [2, 2]


def test_read_events_uses_file_stem_as_source(tmp_path: Path) -> None:
    path = tmp_path / "my data!.ttl"
    path.write_text(TURTLE, encoding="utf-8")
    (event,) = read_events(path, timestamp_ms=TS)
    assert event.graph == event_graph("my_data", TS, 0)
    (event,) = read_events(path, timestamp_ms=TS, source="sensors")
    assert event.graph == event_graph("sensors", TS, 0)


def test_a_generated_graph_needs_the_callers_timestamp() -> None:
    with pytest.raises(TypeError, match="pass timestamp_ms"):
        parse_events(TURTLE, "turtle")
    (event,) = parse_events(TURTLE, "turtle", timestamp_ms=TS)
    assert event.graph.value.startswith(f"http://eventcloud.io/events/input/{TS}/")


def test_empty_document_gives_no_events() -> None:
    assert parse_events("", "turtle") == []
    assert parse_events("# only a comment\n", "nquads") == []


def test_iter_events_numbers_files_so_graphs_never_collide(tmp_path: Path) -> None:
    paths = []
    for i in range(3):
        path = tmp_path / f"part{i}.ttl"
        path.write_text(f"<{EX}s> <{EX}p> {i} .\n", encoding="utf-8")
        paths.append(path)
    events = list(iter_events(paths, source="batch", timestamp_ms=TS))
    assert [e.graph for e in events] == [event_graph("batch", TS, i) for i in range(3)]


# --- terms ----------------------------------------------------------------------------------


def test_literals_keep_lexical_form_datatype_and_language() -> None:
    (event,) = parse_events(TURTLE, "turtle", timestamp_ms=TS)
    assert objects(event, EX + "age") == [Literal("01", XSD + "integer")]
    (name,) = [o for o in objects(event, EX + "name") if o.language]
    assert name == Literal('Alice "A"\nLiddell', language="en-gb")
    assert name.datatype == RDF_LANGSTRING
    assert Literal("Bob") in objects(event, EX + "name")
    assert Literal("Bob").datatype == XSD_STRING
    (nt,) = parse_events(NTRIPLES, "ntriples", timestamp_ms=TS)
    assert Literal("Bob\\path é") in objects(nt, EX + "name")


def test_blank_nodes_are_skolemised_stably_within_an_event() -> None:
    (event,) = parse_events(TURTLE, "turtle", timestamp_ms=TS)
    (bob,) = objects(event, EX + "knows")
    assert isinstance(bob, IRI) and bob.value.startswith(SKOLEM_BASE)
    assert {q.s for q in event.quads if q.p == IRI(EX + "address")} == {bob}  # same label, same IRI
    (address,) = objects(event, EX + "address")
    assert address != bob and address.value.startswith(SKOLEM_BASE)  # anonymous [] too
    # Parsers invent random labels for []; renumbering makes re-parsing reproducible.
    assert parse_events(TURTLE, "turtle", timestamp_ms=TS) == [event]
    assert parse_events(RDFXML, "rdfxml", timestamp_ms=TS) == parse_events(RDFXML, "rdfxml", timestamp_ms=TS)


def test_same_blank_label_in_two_events_gives_distinct_iris() -> None:
    g1, _default, g2 = parse_events(TRIG, "trig", timestamp_ms=TS)
    (b1,) = objects(g1, EX + "knows")
    (b2,) = objects(g2, EX + "knows")
    assert b1 != b2
    assert all(not isinstance(t, IRI) or not t.value.startswith("_:") for q in g2.quads for t in q)


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fmt, text, line",
    [
        ("nquads", f'<{EX}s> <{EX}p> "ok" <{EX}g> .\n<{EX}s> <{EX}p> "ok" <{EX}g> .\n<{EX}s> <{EX}p> .\n', 3),
        ("ntriples", f"<{EX}s> <{EX}p> <{EX}o> .\n<{EX}s> <{EX}p> <not an iri> .\n", 2),
        ("turtle", "@prefix ex: <http://example.org/> .\nex:a ex:b ex:c .\n\nex:a ex:b .\n", 4),
        ("turtle", "@prefix ex: <http://example.org/> .\nex:a ex:b ex:c .\nex:a undeclared:b ex:c .\n", 3),
        ("trig", "@prefix ex: <http://example.org/> .\nex:g {\n ex:a ex:b ex:c .\n ex:a ex:b \n}\n", 5),
        (
            "rdfxml",
            '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"'
            ' xmlns:ex="http://example.org/">\n<rdf:Description rdf:about="http://example.org/a">\n'
            "  <ex:p>x</ex:q>\n</rdf:Description>\n</rdf:RDF>\n",
            4,
        ),
    ],
)
def test_malformed_input_reports_file_and_line_and_returns_nothing(
    tmp_path: Path, fmt: str, text: str, line: int
) -> None:
    ext = {"nquads": "nq", "ntriples": "nt", "turtle": "ttl", "trig": "trig", "rdfxml": "rdf"}[fmt]
    path = tmp_path / f"bad.{ext}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RDFInputError) as info:
        read_events(path)
    error = info.value
    assert (error.path, error.line) == (str(path), line)
    assert str(error).startswith(f"{path}:{line}: ") and error.reason in str(error)
    # all-or-nothing: valid graphs before the error are not handed out either
    events: list[CompoundEvent] = []
    with pytest.raises(RDFInputError):
        for event in iter_events([path]):
            events.append(event)
    assert events == []


def test_iter_events_yields_earlier_files_then_fails_on_the_bad_one(tmp_path: Path) -> None:
    good = tmp_path / "good.nq"
    good.write_text(NQUADS, encoding="utf-8")
    bad = tmp_path / "bad.nq"
    bad.write_text(NQUADS + "<http://example.org/s> <http://example.org/p> .\n", encoding="utf-8")
    seen: list[CompoundEvent] = []
    with pytest.raises(RDFInputError) as info:
        for event in iter_events([good, bad]):
            seen.append(event)
    assert len(seen) == 2 and info.value.path == str(bad) and info.value.line == 5


@pytest.mark.parametrize(
    "fmt, text, words",
    [
        ("trig", "_:g { <http://example.org/a> <http://example.org/b> <http://example.org/c> . }", "_:g"),
        ("nquads", "<http://example.org/a> <http://example.org/b> <http://example.org/c> _:g .", "graph name"),
        ("n3", "@prefix : <http://example.org/> .\n{ :a :b :c } :says :x .\n", "formula"),
        ("n3", "@prefix : <http://example.org/> .\n{ ?x :p :o } => { ?x :q :o } .\n", "variables"),
        ("turtle", "<< <http://example.org/a> <http://example.org/b> <http://example.org/c> >> "
                   "<http://example.org/b> <http://example.org/c> .", "triple terms"),
        ("turtle", '<http://example.org/a> <http://example.org/b> "x"@en--ltr .', "base direction"),
        ("turtle", "<a> <b> <c> .", "absolute IRI"),
        ("rdfxml", "<root/>", "namespace"),
    ],
)
def test_unsupported_or_invalid_rdf_is_refused(fmt: str, text: str, words: str) -> None:
    with pytest.raises(RDFInputError) as info:
        parse_events(text, fmt, name="in.x", timestamp_ms=TS)
    assert words in str(info.value) and str(info.value).startswith("in.x")


def test_unknown_format_and_missing_file() -> None:
    with pytest.raises(RDFInputError, match="unknown RDF format 'json'"):
        parse_events("{}", "json")
    with pytest.raises(RDFInputError, match="cannot read file") as info:
        read_events("/nonexistent/file.ttl")
    assert info.value.path == "/nonexistent/file.ttl"


def test_error_formatting_and_pickling() -> None:
    error = RDFInputError("f.nq", 7, "bad quad", column=3)
    assert str(error) == "f.nq:7: bad quad" and isinstance(error, ValueError)
    assert str(RDFInputError("f.nq", None, "bad")) == "f.nq: bad"
    assert str(RDFInputError(None, None, "bad")) == "bad"
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.line, copy.reason, copy.column) == ("f.nq", 7, "bad quad", 3)


def test_base_iri_resolves_relative_iris() -> None:
    (event,) = parse_events("<a> <b> <c> .", "turtle", base_iri=EX, timestamp_ms=TS)
    assert event.quads[0][1:] == (IRI(EX + "a"), IRI(EX + "b"), IRI(EX + "c"))


# --- RSS 1.0 ------------------------------------------------------------------------------


def test_rss_feed_is_one_event(tmp_path: Path) -> None:
    path = tmp_path / "feed.rss"
    path.write_text(RSS, encoding="utf-8")
    (event,) = read_events(path, timestamp_ms=TS)
    assert event.graph == event_graph("feed", TS, 0)
    items = {q.s for q in event.quads if q.p == IRI(RDF_NS + "type") and q.o == IRI(RSS_NS + "item")}
    assert items == {IRI("http://news.example.org/1"), IRI("http://news.example.org/2")}
    assert Literal("Road works on Skanderborgvej") in objects(event, RSS_NS + "title")
    assert Literal("City news & events") in objects(event, RSS_NS + "description")
    assert objects(event, RDF_NS + "_2") == [IRI("http://news.example.org/2")]
    (seq,) = objects(event, RSS_NS + "items")
    assert seq.value.startswith(SKOLEM_BASE)
    assert round_trip([event]) == [event]


# --- rdflib ---------------------------------------------------------------------------------


def test_events_from_rdflib_graph_and_dataset() -> None:
    named = rdflib.Graph(identifier=rdflib.URIRef(EX + "g"))
    named.parse(data=TURTLE, format="turtle")
    (event,) = events_from_rdflib(named)
    assert event.graph == IRI(EX + "g") and len(event) == 6
    assert all(not isinstance(t, IRI) or "_:" not in t.value for q in event.quads for t in q)

    anonymous = rdflib.Graph()
    anonymous.add((rdflib.URIRef(EX + "s"), rdflib.URIRef(EX + "p"), rdflib.Literal("x", lang="EN")))
    (event,) = events_from_rdflib(anonymous, graph=IRI(EX + "mine"))
    assert event.graph == IRI(EX + "mine") and event.quads[0].o == Literal("x", language="en")
    (event,) = events_from_rdflib(anonymous, source="sdk", timestamp_ms=TS)
    assert event.graph == event_graph("sdk", TS, 0)

    U = rdflib.URIRef
    bob = rdflib.BNode()
    dataset = rdflib.Dataset()
    dataset.graph(U(EX + "g1")).add((U(EX + "alice"), U(EX + "knows"), bob))
    dataset.graph(U(EX + "g1")).add((bob, U(EX + "name"), rdflib.Literal("Bob")))
    default = getattr(dataset, "default_graph", dataset)  # Dataset.add warns in rdflib 7.2+
    default.add((U(EX + "top"), U(EX + "says"), rdflib.Literal("default")))
    dataset.graph(U(EX + "g2")).add((U(EX + "carol"), U(EX + "knows"), bob))
    events = {e.graph.value: e for e in events_from_rdflib(dataset, graph=IRI(EX + "default"))}
    assert sorted(events) == [EX + "default", EX + "g1", EX + "g2"]
    assert [len(events[EX + g]) for g in ("default", "g1", "g2")] == [1, 2, 1]
    (b1,) = objects(events[EX + "g1"], EX + "knows")
    (b2,) = objects(events[EX + "g2"], EX + "knows")
    assert b1 != b2 and b1.value.startswith(SKOLEM_BASE)
    assert [q.s for q in events[EX + "g1"].quads if q.p == IRI(EX + "name")] == [b1]
    with pytest.raises(TypeError):
        events_from_rdflib([("a", "b", "c")])


# --- CityBench RDF files --------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize(
    "name, triples",
    [("SensorRepository.n3", 44_213), ("AarhusLibraryEvents.n3", 23_225), ("AarhusCulturalEvents.rdf", 1_490)],
)
def test_citybench_rdf_files_parse_with_expected_counts(name: str, triples: int) -> None:
    (event,) = read_events(DATA / name, timestamp_ms=TS)
    assert len(event) == triples
    assert event.graph == event_graph(Path(name).stem, TS, 0)
    assert any(isinstance(q.s, IRI) and q.s.value.startswith(SKOLEM_BASE) for q in event.quads)


@needs_data
def test_citybench_cultural_events_keep_typed_literals_and_round_trip() -> None:
    (event,) = read_events(DATA / "AarhusCulturalEvents.rdf", timestamp_ms=TS)
    lats = objects(event, "http://www.insight-centre.org/citytraffic#hasLatitude")
    assert Literal("56.1519158", XSD + "double") in lats
    assert round_trip([event]) == [event]


RDF_EDITS = st.sampled_from(list("<>\"'{}[]().;,:@^#\\_ \n\t\x00é") + [
    "<http://x/p>", "_:b", "@prefix", "ex:", "^^", "@en", '"""', "<rdf:RDF>", "</ex:name>", "rdf:about=",
    "\\u00", "\\U0010FFFF", "\ud800", "\x85", "GRAPH", "<<", ">>", "1.5e", "-", "<urn:x>", "<not an iri>"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SAMPLES)), st.lists(st.tuples(st.floats(0, 1), st.integers(0, 4), RDF_EDITS),
                                                   min_size=1, max_size=4), st.booleans())
def test_edited_documents_give_events_or_an_rdf_input_error(fmt: str, edits, as_bytes: bool) -> None:
    """Hostile or damaged documents of every format (characters and tokens inserted, deleted or
    replaced anywhere, lone surrogates and NULs included, as text or bytes): events, or an
    RDFInputError naming the input; never another exception."""
    text = SAMPLES[fmt]
    for where, cut, insert in edits:
        at = int(where * len(text))
        text = text[:at] + insert + text[at + cut:]
    data = text.encode("utf-8", "surrogatepass") if as_bytes else text
    try:
        events = parse_events(data, fmt, name="fuzzed", timestamp_ms=TS)
    except RDFInputError as exc:
        assert "fuzzed" in str(exc)
    else:
        assert all(isinstance(e, CompoundEvent) and e.quads for e in events)


def test_a_statement_over_the_parsers_buffer_is_refused_naming_the_limit_and_the_line(tmp_path):
    """A 17 MiB literal made pyoxigraph raise MemoryError (a traceback in the CLI, 500 at the
    gateway): it is a typed refusal naming the 16 MiB limit and the line, for a document and for
    a streamed file (found by scanning in chunks, however big the file)."""
    from eventcloud.rdf.files import RDFTooLarge, stream_events

    big = '<http://x/s> <http://x/p> "ok" <http://x/g> .\n<http://x/s> <http://x/p> "' + "a" * (17 << 20) + \
        '" <http://x/g> .\n'
    with pytest.raises(RDFTooLarge, match=r"stdin:2: a statement over 16 MiB"):
        parse_events(big, "nquads", name="stdin")
    path = tmp_path / "big.nq"
    path.write_text(big)
    with pytest.raises(RDFTooLarge, match=r"big.nq:2: a statement over 16 MiB"):
        list(stream_events(path, "nquads"))
