"""Query results in the standard syntaxes: solutions (SPARQL 1.1 JSON results, as the overlay
answers SELECT and ASK) as JSON, XML, CSV or TSV, and graphs (N-Triples, as the overlay answers
CONSTRUCT and DESCRIBE) as N-Triples, Turtle, N-Quads, RDF/XML or JSON-LD. pyoxigraph writes
them; the CLI and the HTTP gateway share this one translation."""

from __future__ import annotations

import json
from typing import Any

import pyoxigraph as ox

from eventcloud.rdf.model import Quad

__all__ = ["SOLUTION_FORMATS", "GRAPH_FORMATS", "solutions_bytes", "graph_bytes", "SolutionsWriter", "quads_bytes"]

SOLUTION_FORMATS = {"json": ox.QueryResultsFormat.JSON, "xml": ox.QueryResultsFormat.XML,
                    "csv": ox.QueryResultsFormat.CSV, "tsv": ox.QueryResultsFormat.TSV}
GRAPH_FORMATS = {"ntriples": ox.RdfFormat.N_TRIPLES, "turtle": ox.RdfFormat.TURTLE, "nquads": ox.RdfFormat.N_QUADS,
                 "rdfxml": ox.RdfFormat.RDF_XML, "jsonld": ox.RdfFormat.JSON_LD}


def solutions_bytes(results: dict[str, Any], fmt: str) -> bytes:
    """SPARQL 1.1 JSON results (a dict) written as `fmt` (json, xml, csv, tsv)."""
    if fmt == "json":
        return json.dumps(results, ensure_ascii=False).encode("utf-8")
    parsed = ox.parse_query_results(json.dumps(results), ox.QueryResultsFormat.JSON)
    return parsed.serialize(format=SOLUTION_FORMATS[fmt]) or b""


def graph_bytes(ntriples: str, fmt: str) -> bytes:
    """N-Triples text written as `fmt` (ntriples, turtle, nquads: the same lines, rdfxml, jsonld)."""
    if fmt in ("ntriples", "nquads"):
        return ntriples.encode("utf-8")
    return ox.serialize(ox.parse(ntriples, ox.RdfFormat.N_TRIPLES), format=GRAPH_FORMATS[fmt]) or b""


class SolutionsWriter:
    """Solutions written as `fmt` a page of rows at a time, for a response that streams: the
    document's start, then each page's rows, then its end (concatenated, the same bytes as
    `solutions_bytes` of every row at once). pyoxigraph writes every term; JSON is written here."""

    def __init__(self, fmt: str, variables: tuple[str, ...] | list[str]) -> None:
        self.fmt = fmt
        self.variables = list(variables)
        self._first = True
        whole = solutions_bytes({"head": {"vars": self.variables}, "results": {"bindings": []}}, fmt)
        if fmt == "json":
            self._start, self._end = whole[:-len(b"]}}")], b"]}}"
        elif fmt == "xml":
            at = whole.index(b"<results>") + len(b"<results>")
            self._start, self._end = whole[:at], whole[at:]
        else:   # csv, tsv: a header line, then a line per row
            self._start, self._end = whole, b""

    def start(self) -> bytes:
        return self._start

    def rows(self, rows: list[dict[str, Any]]) -> bytes:
        if not rows:
            return b""
        if self.fmt == "json":
            text = ", ".join(json.dumps(row, ensure_ascii=False) for row in rows)
            out = (text if self._first else ", " + text).encode("utf-8")
            self._first = False
            return out
        page = solutions_bytes({"head": {"vars": self.variables}, "results": {"bindings": rows}}, self.fmt)
        if self.fmt == "xml":
            return page[page.index(b"<results>") + len(b"<results>"):page.rindex(b"</results>")]
        return page[len(self._start):]   # the same header line, then the rows

    def end(self) -> bytes:
        return self._end


def quads_bytes(quads: list[Quad], how: str) -> bytes:
    """A page of quads written as `how` (triples, quads, trig)."""
    if how == "quads":
        return "".join(q.n_quads() + "\n" for q in quads).encode("utf-8")
    if how == "triples":
        return "".join(f"{q.s.n3()} {q.p.n3()} {q.o.n3()} .\n" for q in quads).encode("utf-8")
    by_graph: dict[str, list[Quad]] = {}
    for quad in quads:
        by_graph.setdefault(quad.g.value, []).append(quad)
    return "".join(f"{graph.n3()} {{\n" + "".join(f"  {q.s.n3()} {q.p.n3()} {q.o.n3()} .\n" for q in group) + "}\n"
                   for graph, group in ((group[0].g, group) for group in by_graph.values())).encode("utf-8")
