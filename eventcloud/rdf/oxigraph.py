"""The one adapter between our model terms and pyoxigraph's (stores, query results, the oracle)."""

from __future__ import annotations

from typing import Any

import pyoxigraph as ox

from eventcloud.rdf.model import IRI, Literal, Quad, Term

__all__ = ["to_ox", "from_ox", "quad_to_ox", "quad_from_ox"]


def to_ox(term: Term) -> ox.NamedNode | ox.Literal:
    if type(term) is IRI:
        return ox.NamedNode(term.value)
    if term.language is not None:  # type: ignore[union-attr]
        return ox.Literal(term.lexical, language=term.language)  # type: ignore[union-attr]
    return ox.Literal(term.lexical, datatype=ox.NamedNode(term.datatype))  # type: ignore[union-attr]


def from_ox(term: Any) -> Term:
    if isinstance(term, ox.NamedNode):
        return IRI(term.value)
    if isinstance(term, ox.Literal):
        if term.language:
            return Literal(term.value, language=term.language)
        return Literal(term.value, term.datatype.value)
    raise ValueError(f"not an IRI or a literal: {term!r}")


def quad_to_ox(quad: Quad) -> ox.Quad:
    return ox.Quad(to_ox(quad.s), ox.NamedNode(quad.p.value), to_ox(quad.o), ox.NamedNode(quad.g.value))


def quad_from_ox(quad: ox.Quad) -> Quad:
    return Quad(IRI(quad.graph_name.value), from_ox(quad.subject), IRI(quad.predicate.value), from_ox(quad.object))
