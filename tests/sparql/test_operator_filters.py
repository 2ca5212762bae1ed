"""Operators in FILTERs: parsing against the peer's operator set, values in and out, errors, and
the shipped city and text operators (the geographic ones checked on CityBench's sensor metadata)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from eventcloud.matching.reference import matches, results
from eventcloud.operators import city, text
from eventcloud.rdf.model import IRI, XSD, CompoundEvent, Literal, Quad
from eventcloud.sparql.filters.operators import (
    CallTable, NeedCall, Operator, OperatorError, OperatorSet, active, call_operator,
)
from eventcloud.sparql.subscription import SubscriptionError, parse_subscription

OPS = OperatorSet(city.OPERATORS + text.OPERATORS)
GEO = "PREFIX geo: <http://eventcloud.io/ns/geo#> PREFIX txt: <http://eventcloud.io/ns/text#> PREFIX ex: <http://ex/> "
DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "citybench"


def sensor(lat: str, long: str, title: str = "x", graph: str = "http://ex/e") -> CompoundEvent:
    g, s = IRI(graph), IRI("http://ex/s")
    return CompoundEvent(g, (Quad(g, s, IRI("http://ex/lat"), Literal(lat, XSD + "decimal")),
                             Quad(g, s, IRI("http://ex/long"), Literal(long, XSD + "decimal")),
                             Quad(g, s, IRI("http://ex/title"), Literal(title))))


def query(filters: str) -> str:
    return GEO + ("SELECT * WHERE { GRAPH ?g { ?s ex:lat ?lat . ?s ex:long ?long . ?s ex:title ?t } FILTER(" + filters
                  + ") }")


def test_an_operator_not_registered_is_refused_naming_it():
    with pytest.raises(SubscriptionError) as refused:
        parse_subscription(query("geo:withinRadius(?lat, ?long, 56.1, 10.2, 100)"))
    assert "withinRadius" in str(refused.value) and refused.value.construct == "function call"


def test_wrong_arity_is_refused():
    with pytest.raises(SubscriptionError) as refused:
        parse_subscription(query("geo:withinRadius(?lat, ?long)"), operators=OPS)
    assert "withinRadius takes 5..5 arguments" in str(refused.value)


def test_within_radius_distance_and_polygon():
    near = sensor("56.1572", "10.2107")     # Aarhus centre
    far = sensor("55.6761", "12.5683")      # Copenhagen
    for q, want in [("geo:withinRadius(?lat, ?long, 56.1567, 10.2108, 200)", (True, False)),
                    ("geo:distance(?lat, ?long, 55.6761, 12.5683) < 200000", (True, True)),
                    ("geo:distance(?lat, ?long, 55.6761, 12.5683) < 150000", (False, True)),
                    ('geo:withinPolygon(?lat, ?long, "56.10 10.10, 56.10 10.30, 56.20 10.30, 56.20 10.10")',
                     (True, False))]:
        sub = parse_subscription(query(q), operators=OPS)
        assert (matches(sub, near), matches(sub, far)) == want, q


def test_errors_make_the_filter_false():
    def boom(x):
        raise RuntimeError("bad")

    ops = OperatorSet([Operator("http://t/boom", boom, arity=(1, 1)), Operator("http://t/obj", lambda x: object())])
    event = sensor("1", "2")
    for q in ("<http://t/boom>(?lat)", "<http://t/obj>(?lat)", "!<http://t/boom>(?lat)",
              "geo:withinRadius(?lat, ?long, 95, 0, 10)"):  # a latitude out of range is the operator's error
        assert not matches(parse_subscription(query(q), operators=ops.merged(city.OPERATORS)), event), q
    # an error inside || is SPARQL's: the other side still decides
    sub = parse_subscription(query("<http://t/boom>(?lat) || ?lat = 1"), operators=ops)
    assert matches(sub, event)


def test_arguments_and_results_cross_as_python_values():
    seen = []

    def probe(*args):
        seen.append(args)
        return len(args) * 1.5

    ops = OperatorSet([Operator("http://t/probe", probe)])
    sub = parse_subscription(query('<http://t/probe>(?lat, "s", <http://ex/i>, 3, true) = 7.5'), operators=ops)
    assert matches(sub, sensor("56.5", "1"))
    assert seen == [(56.5, "s", "http://ex/i", 3, True)]


def test_an_active_table_evaluates_each_call_once_or_asks_for_it():
    sub = parse_subscription(query("txt:similarity(?t, \"traffic jam\") > 0.5"), operators=OPS)
    event = sensor("1", "2", "Traffic jam!")
    table = CallTable()
    with pytest.raises(NeedCall) as need:
        with active(table):
            matches(sub, event)
    table.put(need.value.key, call_operator(need.value.op, need.value.values))
    with active(table):
        assert matches(sub, event) and results(sub, event)
    assert len(table) == 1


def test_operator_definitions_are_checked():
    with pytest.raises(OperatorError):
        Operator("not-an-iri", len)
    with pytest.raises(OperatorError):
        Operator("http://t/x", len, cost=0)
    with pytest.raises(OperatorError):
        OperatorSet([Operator("http://t/x", len), Operator("http://t/x", abs)])


def test_text_similarity():
    assert text.similarity("Traffic jam", "traffic jam") == 1.0
    assert 0.8 < text.similarity("traffic jam on ring road", "traffic jam on ringroad") < 1.0
    assert text.similarity("concert", "library") < 0.3


@pytest.mark.skipif(not (DATA / "trafficMetaData.csv").exists(), reason="CityBench data (shared/data) not present")
def test_geographic_operators_on_citybench_traffic_sensors():
    """Each CityBench traffic sensor pair has its two WGS84 end points and the road distance
    between them: the great-circle distance is never longer than the road, and within a few
    kilometres; within-radius and within-polygon agree with the distance and a bounding box."""
    rows = list(csv.DictReader((DATA / "trafficMetaData.csv").open(encoding="utf-8")))
    assert len(rows) > 400
    checked = 0
    radius = parse_subscription(query("geo:withinRadius(?lat, ?long, 56.1567, 10.2108, 5000)"), operators=OPS)
    box = '"56.10 10.10, 56.10 10.25, 56.20 10.25, 56.20 10.10"'
    polygon = parse_subscription(query(f"geo:withinPolygon(?lat, ?long, {box})"), operators=OPS)
    for row in rows:
        lat1, long1 = float(row["POINT_1_LAT"]), float(row["POINT_1_LNG"])
        lat2, long2 = float(row["POINT_2_LAT"]), float(row["POINT_2_LNG"])
        road = float(row["DISTANCE_IN_METERS"])
        straight = city.distance(lat1, long1, lat2, long2)
        if road > 0:
            assert straight <= road * 1.02 + 50, row["REPORT_ID"]
            checked += 1
        event = sensor(row["POINT_1_LAT"], row["POINT_1_LNG"], graph=f"http://ex/{row['REPORT_ID']}")
        assert matches(radius, event) == (city.distance(lat1, long1, 56.1567, 10.2108) <= 5000)
        assert matches(polygon, event) == (56.10 < lat1 < 56.20 and 10.10 < long1 < 10.25)
    assert checked > 400
