"""Subscription texts packed in memory come back exactly, whatever they hold."""

from __future__ import annotations

import random

import pytest

from eventcloud.sparql.texts import pack, unpack

TEXTS = [
    "",
    "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }",
    'PREFIX ex: <http://ex.org/> SELECT ?v WHERE { GRAPH ?g { ?s ex:p "héllo \\"wörld\\""@de FILTER(?v > 3) } }',
    "SELECT ?x WHERE { GRAPH ?g { ?x <urn:é:𝄞> ?y } } # a comment\n\t",
    "x" * 100_000,
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_packed_text_unpacks_to_itself(text: str) -> None:
    assert unpack(pack(text)) == text
    assert pack(text) == pack(text)  # identical texts pack identically


def test_random_texts_unpack_to_themselves() -> None:
    rng = random.Random(4)
    alphabet = "SELECTWHEREGRAPH{}?<>:/#. \"'\\\n\té€𝄞\x00abc0123456789"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 400)))
        assert unpack(pack(text)) == text


def test_typical_subscriptions_shrink_by_half() -> None:
    chain = ("SELECT ?g ?s1 ?o1 ?o2 WHERE { GRAPH ?g { ?s1 <http://wl.example/p/3af27f80> ?o1 . "
             "?o1 <http://wl.example/p/3f9931ee> ?o2 } }")
    sensor = ('PREFIX city: <http://city.example/ns#> SELECT ?g ?obs ?v WHERE { GRAPH ?g { ?obs '
              'city:observedBy <http://city.example/sensor/1> ; city:value ?v ; city:unit "km/h" FILTER(?v > 1) } }')
    for text in (chain, sensor):
        assert len(pack(text)) <= len(text) / 2
