"""Query results in the standard syntaxes: solutions (SPARQL 1.1 JSON results, as the overlay
answers SELECT and ASK) as JSON, XML, CSV or TSV, and graphs (N-Triples, as the overlay answers
CONSTRUCT and DESCRIBE) as N-Triples, Turtle, N-Quads, RDF/XML or JSON-LD. pyoxigraph writes
them; the CLI and the HTTP gateway share this one translation."""

from __future__ import annotations

import json
from typing import Any

import pyoxigraph as ox

__all__ = ["SOLUTION_FORMATS", "GRAPH_FORMATS", "solutions_bytes", "graph_bytes"]

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
