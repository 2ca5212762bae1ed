"""The one adapter between our model terms and pyoxigraph's (stores, query results, the oracle)."""

from __future__ import annotations

from typing import Any

import pyoxigraph as ox

from eventcloud.rdf.model import IRI, RDF_LANGSTRING, Quad, Term, trusted_iri, trusted_literal

__all__ = ["to_ox", "from_ox", "quad_to_ox", "quad_from_ox"]


def to_ox(term: Term) -> ox.NamedNode | ox.Literal:
    if type(term) is IRI:
        return ox.NamedNode(term.value)
    if term.language is not None:  # type: ignore[union-attr]
        return ox.Literal(term.lexical, language=term.language)  # type: ignore[union-attr]
    return ox.Literal(term.lexical, datatype=ox.NamedNode(term.datatype))  # type: ignore[union-attr]


def from_ox(term: Any) -> Term:
    """Our term for pyoxigraph's. Not checked again: pyoxigraph holds only valid terms (its
    own parser checks them) and every term a store of ours holds was checked where it entered."""
    if isinstance(term, ox.NamedNode):
        return trusted_iri(term.value)
    if isinstance(term, ox.Literal):
        if term.language:
            return trusted_literal(term.value, RDF_LANGSTRING, term.language.lower())
        return trusted_literal(term.value, term.datatype.value)
    raise ValueError(f"not an IRI or a literal: {term!r}")


def quad_to_ox(quad: Quad) -> ox.Quad:
    return ox.Quad(to_ox(quad.s), ox.NamedNode(quad.p.value), to_ox(quad.o), ox.NamedNode(quad.g.value))


def quad_from_ox(quad: ox.Quad) -> Quad:
    return Quad(trusted_iri(quad.graph_name.value), from_ox(quad.subject), trusted_iri(quad.predicate.value),
                from_ox(quad.object))
