"""Terms built the way an SDK user writes them: an IRI object or rdflib's URIRef wherever an IRI
string is taken, normalised at construction; anything else refused there, never at publish."""

from __future__ import annotations

import msgpack
import pytest
from rdflib import URIRef

from eventcloud.errors import ModelError
from eventcloud.rdf.model import IRI, XSD, Literal, Quad
from eventcloud.wire.codec import quad_from_wire, quad_to_wire

XSD_DOUBLE = XSD + "double"


@pytest.mark.parametrize("datatype", [IRI(XSD_DOUBLE), URIRef(XSD_DOUBLE), XSD_DOUBLE])
def test_a_literal_takes_its_datatype_as_an_iri_a_uriref_or_a_string(datatype):
    literal = Literal("21.5", datatype=datatype)
    assert literal == Literal("21.5", XSD_DOUBLE) and hash(literal) == hash(Literal("21.5", XSD_DOUBLE))
    assert type(literal.datatype) is str
    quad = Quad(IRI("http://ex.org/g"), IRI("http://ex.org/s"), IRI("http://ex.org/p"), literal)
    assert quad_from_wire(msgpack.unpackb(msgpack.packb(quad_to_wire(quad)))) == quad   # what publish sends


@pytest.mark.parametrize("value", [IRI("http://ex.org/a"), URIRef("http://ex.org/a")])
def test_an_iri_takes_an_iri_or_a_uriref(value):
    iri = IRI(value)
    assert iri == IRI("http://ex.org/a") and type(iri.value) is str and hash(iri) == hash(IRI("http://ex.org/a"))


@pytest.mark.parametrize("datatype", [42, None, IRI, ("http://ex.org/t",)])
def test_a_datatype_that_is_no_iri_is_refused_at_construction(datatype):
    with pytest.raises(ModelError, match="datatype"):
        Literal("1", datatype=datatype)  # type: ignore[arg-type]
