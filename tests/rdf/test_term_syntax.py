"""A term the data model accepts is one the store accepts: IRIs under RFC 3987 and language
tags under BCP 47, checked against pyoxigraph's own parsers with hypothesis (an IRI with `%zz`
passed the model, was routed, and failed the owner's write as an `internal` error). Terms from
the wire are refused with a BadRequest naming what is wrong, or stored and evaluated without
any other exception."""

from __future__ import annotations

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventcloud.errors import BadRequest, ModelError
from eventcloud.rdf.model import XSD, IRI, Literal, Quad
from eventcloud.rdf.oxigraph import quad_to_ox
from eventcloud.sparql.filters.values import to_value
from eventcloud.wire.codec import term_from_wire

FUZZ = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

IRI_PIECES = st.sampled_from([*"ab1%:/?#[]@!$&'()*+,;=-._~Zé{|^` \\", "\u00a0", "\ue000", "\U000f0000", "\ufffe",
                              "%2", "%zz", "%41", "::", "//", "[::1]", "[v1.x]", "[::g]", "[1:2]", "\x00"])
IRI_STARTS = st.sampled_from(["http:", "http://", "urn:", "a:", "http://h", "http://h:80", "http://u@h", "", "1a:"])
TAG_PIECES = st.sampled_from([*"aZ1-xX9", "abcdefghi", "en", "123", "x-", "i-", "Latn", "GB", "419", "abc", "1abc",
                              "u-", "sgn-BE-FR", "i-klingon", "zh-min-nan", "-x-", "abcde", "ab-"])


def _ox_accepts(build) -> bool:
    try:
        build()
    except ValueError:
        return False
    return True


def _model_accepts(build) -> bool:
    try:
        build()
    except ModelError:
        return False
    return True


@FUZZ
@given(IRI_STARTS, st.lists(IRI_PIECES, max_size=8).map("".join))
def test_the_model_accepts_exactly_the_iris_the_store_accepts(start, rest):
    text = start + rest
    assert _model_accepts(lambda: IRI(text)) == _ox_accepts(lambda: ox.NamedNode(text)), text


@FUZZ
@given(st.lists(TAG_PIECES, min_size=1, max_size=7).map("".join))
def test_the_model_accepts_exactly_the_language_tags_the_store_accepts(tag):
    assert _model_accepts(lambda: Literal("x", language=tag)) == _ox_accepts(lambda: ox.Literal("x", language=tag)), tag


WIRE_TERMS = (IRI_STARTS.flatmap(lambda s: st.lists(IRI_PIECES, max_size=6).map(lambda r: s + "".join(r)))
              | st.tuples(st.text(max_size=6) | st.sampled_from(["1" * 5000, "-0", "1e400", "0" * 30 + "7", "NaN"]),
                          st.sampled_from([XSD + "integer", XSD + "decimal", XSD + "double", XSD + "dateTime",
                                           XSD + "boolean", "http://x/%zz", "nope", "http://x/t", ""])).map(list)
              | st.tuples(st.text(max_size=4), st.just("http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"),
                          st.lists(TAG_PIECES, min_size=1, max_size=4).map("".join)).map(list))


@FUZZ
@given(WIRE_TERMS)
def test_a_term_from_the_wire_is_refused_clearly_or_stored_and_evaluated(data):
    try:
        term = term_from_wire(data)
    except BadRequest as exc:
        assert str(exc).startswith("invalid term")
        return
    store = ox.Store()
    store.add(quad_to_ox(Quad(IRI("http://g"), IRI("http://s"), IRI("http://p"), term)))
    assert len(store) == 1
    to_value(term)   # a filter reads it: a value, or the literal itself when ill-typed or out of range


@pytest.mark.parametrize(("data", "why"), [
    ("http://example.org/a%zz", "'%' not followed by two hexadecimal digits"),
    ("http://[::g]/", "not an IPv6 address"),
    ("http://example.org/a#b#c", "RFC 3987"),
    (["1" * 5000, XSD + "integer"], "numbers are accepted up to 4300 digits"),
    (["x", "http://x/%zz"], "datatype must be an IRI"),
    (["x", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "en-x"], "not a BCP 47 tag"),
])
def test_the_reported_bad_terms_are_refused_naming_the_problem(data, why):
    with pytest.raises(BadRequest, match="invalid term") as info:
        term_from_wire(data)
    assert why in str(info.value)


def test_integers_beyond_64_bits_are_out_of_range_values_not_errors():
    assert to_value(Literal("0" * 40 + "7", XSD + "integer")) == 7
    big = Literal("9" * 4300, XSD + "integer")
    assert to_value(big) is big   # out of xsd:long's range: the literal itself, as the oracle has it
    assert to_value(Literal("9" * 300 + ".5", XSD + "decimal")) == Literal("9" * 300 + ".5", XSD + "decimal")
