"""CityBench's city events as publications with text, and the distribution of the words in them.

`AarhusLibraryEvents.n3` (1,548 library events) and `AarhusCulturalEvents.rdf` (99 cultural
events) describe each event as an SSN observation: its title (`sao:value "Title: … Price: …
URL: …"`, the cultural ones carry an id instead), a time instant, and a feature of interest
whose first node has a name (`ct:hasNodeName "Hovedbiblioteket"`) and coordinates. Cut into one
compound event per observation (the observation, its instant, its feature of interest and that
node: 14 quads), these are the real publications the full-text benchmark filters.

The word distribution (what subscriptions search for) is the multiset of the words of the
library titles (without the "Title:", "Price:" and "URL:" boilerplate) and of the node names,
cut and folded exactly as `ftcontains` does. The file's own mojibake (æ, ø, å became "?") is
kept: it is the real text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from eventcloud.cli.demo import citybench_dir
from eventcloud.rdf.files import read_events
from eventcloud.rdf.model import IRI, RDF, CompoundEvent, Literal, Quad
from eventcloud.sparql.filters.fulltext import tokenize
from eventcloud.sparql.filters.values import canonical_term

__all__ = ["DATA", "SSN", "SAO", "TL", "CT", "TextCorpus", "load_corpus"]

# $EVENTCLOUD_CITYBENCH, or shared/data/citybench beside the checkout (as the demo finds it)
DATA = citybench_dir() or Path(__file__).resolve().parents[2] / "shared" / "data" / "citybench"
SSN = "http://purl.oclc.org/NET/ssnx/ssn#"
SAO = "http://purl.oclc.org/NET/sao/"
TL = "http://purl.org/NET/c4dm/timeline.owl#"
CT = "http://www.insight-centre.org/citytraffic#"
FILES = ("AarhusLibraryEvents.n3", "AarhusCulturalEvents.rdf")
_BOILERPLATE = re.compile(r"^Title:\s*|\s*Price:.*$", re.S)
_BASE = "http://eventcloud.io/events/citybench/"


@dataclass
class TextCorpus:
    """Publications (one compound event per observation) and the texts subscriptions draw words from."""

    publications: list[CompoundEvent]
    words: list[str]                 # the multiset: one entry per occurrence, casefolded
    titles: list[tuple[str, ...]]    # each title's words in order (for phrases and proximity)
    contexts: list[IRI]              # features of interest (constants for structural patterns)
    names: list[str]                 # node names
    times: list[str]                 # lexical forms of the instants' dateTimes


def load_corpus(data: Path = DATA) -> TextCorpus:
    publications: list[CompoundEvent] = []
    words: list[str] = []
    titles: list[tuple[str, ...]] = []
    contexts: dict[IRI, None] = {}
    names: dict[str, None] = {}
    times: list[str] = []
    for name in FILES:
        (whole,) = read_events(data / name, timestamp_ms=0)
        by_subject: dict[object, list[Quad]] = {}
        for quad in whole.quads:
            by_subject.setdefault(quad.s, []).append(quad)
        for subject, quads in by_subject.items():
            if not any(q.p.value == RDF + "type" and q.o == IRI(SSN + "Observation") for q in quads):
                continue
            graph = IRI(f"{_BASE}{name.split('.')[0]}/{len(publications)}")
            reached, todo = [subject], [subject]
            while todo:  # the observation, then what it points to (instant, feature, node)
                for quad in by_subject.get(todo.pop(), ()):
                    if quad.o in by_subject and quad.o not in reached:
                        reached.append(quad.o)
                        todo.append(quad.o)
            event = [Quad(graph, q.s, q.p, canonical_term(q.o)) for s in reached for q in by_subject[s]]
            publications.append(CompoundEvent(graph, tuple(event)))
            for quad in event:
                if quad.p.value == SAO + "value" and name.startswith("AarhusLibrary"):
                    title = tokenize(_BOILERPLATE.sub("", quad.o.lexical)).words  # type: ignore[union-attr]
                    titles.append(title)
                    words.extend(title)
                elif quad.p.value == CT + "hasNodeName" and isinstance(quad.o, Literal):
                    names[quad.o.lexical] = None
                    words.extend(tokenize(quad.o.lexical).words)
                elif quad.p.value == SSN + "featureOfInterest":
                    contexts[quad.o] = None  # type: ignore[index]
                elif quad.p.value == TL + "at" and isinstance(quad.o, Literal):
                    times.append(quad.o.lexical)
    return TextCorpus(publications, words, titles, list(contexts), list(names), sorted(times))
