"""Loading a peer's operators (entry points, modules, objects) and its offline statistics."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint

import pytest

from eventcloud.errors import OperatorMismatch
from eventcloud.matching.statistics import Statistics
from eventcloud.operators import city, text
from eventcloud.sparql.filters.operators import Operator
from peers.config import PeerConfig
from peers.matching import (
    ENTRY_POINT_GROUP, OperatorLoadError, StatisticsError, check_same_operators, load_operators, load_statistics,
)


def points(*values: str):
    return lambda: [EntryPoint(f"p{i}", value, ENTRY_POINT_GROUP) for i, value in enumerate(values)]


def test_plugins_from_entry_points_and_modules():
    found = load_operators((), entry_points=points("eventcloud.operators.city:OPERATORS"))
    assert set(found) == {op.iri for op in city.OPERATORS}
    found = load_operators(("eventcloud.operators.text",), entry_points=points("eventcloud.operators.city:OPERATORS"))
    assert set(found) == {op.iri for op in city.OPERATORS + text.OPERATORS}
    assert len(load_operators(("eventcloud.operators.text",), plugins=False)) == 1


def test_a_configured_operator_replaces_a_plugin_of_the_same_iri():
    mine = Operator(city.DISTANCE, lambda *a: 0.0, cost=3.0)
    found = load_operators((mine,), entry_points=points("eventcloud.operators.city:OPERATORS"))
    assert found[city.DISTANCE] is mine


@pytest.mark.parametrize("bad", ["no.such.module", "eventcloud.errors"])
def test_a_module_that_cannot_give_operators_stops_the_peer(bad):
    with pytest.raises(OperatorLoadError) as refused:
        load_operators((bad,), plugins=False)
    assert bad in refused.value.message


def test_a_broken_plugin_is_named():
    with pytest.raises(OperatorLoadError) as refused:
        load_operators((), entry_points=points("no.such:THING"))
    assert "p0" in refused.value.message


def test_the_join_check_names_both_sides():
    check_same_operators(["a", "b"], ["b", "a"], "x")
    with pytest.raises(OperatorMismatch) as refused:
        check_same_operators(["a", "c"], ["a", "b"], "peer x")
    assert refused.value.missing == ("b",) and refused.value.extra == ("c",)
    assert "lacks the overlay's operator(s) b" in refused.value.message


def test_statistics_file(tmp_path):
    stats = Statistics()
    stats.observe_predicate("?v0 > 1", True)
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(stats.to_dict()))
    assert load_statistics(path).to_dict() == stats.to_dict()
    assert load_statistics(None).to_dict() == Statistics().to_dict()
    path.write_text("{not json")
    with pytest.raises(StatisticsError):
        load_statistics(path)
    with pytest.raises(StatisticsError):
        load_statistics(tmp_path / "missing.json")


def test_config_knobs_are_checked():
    assert PeerConfig(operators="eventcloud.operators.city").operators == ("eventcloud.operators.city",)
    with pytest.raises(ValueError):
        PeerConfig(evaluation_order="random")
    with pytest.raises(ValueError):
        PeerConfig(operator_threads=0)
