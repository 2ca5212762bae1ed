"""The paper's workload generator: deterministic, exact ground truth, the paper's event sizes."""

from __future__ import annotations

import json
from collections import Counter

import pyoxigraph as ox
import pytest

from eventcloud.rdf.model import IRI, CompoundEvent, Literal
from experiments import workloads
from experiments.workloads import ACCEPT_ALL, WorkloadError, generate


def _ox_term(term: IRI | Literal) -> ox.NamedNode | ox.Literal:
    if isinstance(term, IRI):
        return ox.NamedNode(term.value)
    if term.language is not None:
        return ox.Literal(term.lexical, language=term.language)
    return ox.Literal(term.lexical, datatype=ox.NamedNode(term.datatype))


def matching(event: CompoundEvent, queries: list[str]) -> set[int]:
    """The oracle: indexes of the queries with a solution over a dataset holding only `event`."""
    store = ox.Store()
    graph = ox.NamedNode(event.graph.value)
    store.extend(ox.Quad(_ox_term(q.s), _ox_term(q.p), _ox_term(q.o), graph) for q in event.quads)
    return {i for i, query in enumerate(queries) if list(store.query(query))}


def expected_by_event(workload: workloads.Workload) -> list[set[int]]:
    expected: list[set[int]] = [set() for _ in workload.events]
    for position, name in enumerate(workload.names):
        for index in workload.matches[name]:
            expected[index].add(position)
    return expected


def test_same_seed_same_workload_other_seed_other_workload():
    one = generate(events=20, subscriptions=3, seed=7)
    two = generate(events=20, subscriptions=3, seed=7)
    other = generate(events=20, subscriptions=3, seed=8)
    assert one.events == two.events
    assert one.subscriptions == two.subscriptions and one.matches == two.matches
    assert one.events != other.events and one.subscriptions != other.subscriptions


@pytest.mark.parametrize(
    "k, quads, fraction",
    [(5, 5, 1.0), (5, 5, 0.6), (2, 5, 0.5), (1, 3, 0.5), (5, 25, 0.8)],
)
def test_each_chain_matches_exactly_its_own_events(k, quads, fraction):
    workload = generate(
        events=15, subscriptions=4, k=k, quads_per_event=quads, seed=3,
        matching_fraction=fraction, accept_all=True,
    )
    assert workload.subscriptions[-1] == ACCEPT_ALL and workload.names[-1] == "all"
    for event, expected in zip(workload.events, expected_by_event(workload)):
        assert matching(event, workload.subscriptions) == expected, event.n_quads()


def test_chain_query_text_has_the_papers_shape():
    workload = generate(events=1, subscriptions=1, k=3)
    query = workload.subscriptions[0]
    assert query.startswith("SELECT ?g ?s1 ?o1 ?o2 ?o3 WHERE { GRAPH ?g { ?s1 <")
    assert "> ?o1 . ?o1 <" in query and "> ?o2 . ?o2 <" in query and query.endswith("> ?o3 } }")


def test_matching_events_go_round_robin_and_fraction_is_kept():
    workload = generate(events=100, subscriptions=7, matching_fraction=0.3)
    counts = Counter({name: len(indexes) for name, indexes in workload.matches.items()})
    assert sum(counts.values()) == 30 == workload.expected_notifications
    assert max(counts.values()) - min(counts.values()) <= 1
    everyone = generate(events=12, subscriptions=3)
    assert everyone.matches == {"s0": [0, 3, 6, 9], "s1": [1, 4, 7, 10], "s2": [2, 5, 8, 11]}


def test_predicates_are_private_to_each_subscription_and_graphs_unique():
    workload = generate(events=500, subscriptions=20)
    predicates = [set(q.split("<")[1:]) for q in workload.subscriptions]
    assert all(a.isdisjoint(b) for i, a in enumerate(predicates) for b in predicates[i + 1:])
    assert len({e.graph for e in workload.events}) == 500
    assert all(len(e) == 5 for e in workload.events)


def test_events_are_about_670_bytes_and_25_quad_events_scale():
    five = generate(events=200, subscriptions=5)
    sizes = five.event_bytes()
    assert all(abs(size - 670) <= 10 for size in sizes)
    twenty_five = generate(events=20, subscriptions=0, quads_per_event=25)
    assert all(len(e) == 25 for e in twenty_five.events)
    assert all(abs(size - 25 * 134) <= 50 for size in twenty_five.event_bytes())
    assert twenty_five.subscriptions == [] and twenty_five.expected_notifications == 0


def test_accept_all_alone_matches_every_event():
    workload = generate(events=9, subscriptions=0, accept_all=True)
    assert workload.subscriptions == [ACCEPT_ALL]
    assert workload.matches == {"all": list(range(9))}
    assert all(matching(e, workload.subscriptions) == {0} for e in workload.events)


def test_impossible_parameters_are_refused_with_a_reason():
    with pytest.raises(WorkloadError, match="needs ≥ 5 quads"):
        generate(events=1, subscriptions=1, k=5, quads_per_event=3)
    with pytest.raises(WorkloadError, match="matching_fraction"):
        generate(events=1, subscriptions=1, matching_fraction=1.5)
    with pytest.raises(WorkloadError, match="k must be"):
        generate(events=1, subscriptions=1, k=0)


def test_write_then_load_round_trips(tmp_path):
    workload = generate(events=30, subscriptions=4, seed=5, matching_fraction=0.5, accept_all=True)
    directory = workloads.write(workload, tmp_path / "wl")
    assert {p.name for p in directory.iterdir()} == {"events.nq", "subscriptions.json", "manifest.json"}
    quads = list(ox.parse(path=str(directory / "events.nq"), format=ox.RdfFormat.N_QUADS))
    assert len(quads) == 150
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["seed"] == 5 and manifest["events"] == 30 and manifest["quads_per_event"] == 5
    assert manifest["bytes_per_event"]["mean"] == pytest.approx(670, abs=10)
    assert manifest["expected_notifications"] == 15 + 30
    back = workloads.load(directory)
    assert back.events == workload.events
    assert back.subscriptions == workload.subscriptions and back.names == workload.names
    assert back.matches == workload.matches and back.seed == 5


def test_load_names_what_is_missing(tmp_path):
    with pytest.raises(WorkloadError, match="events.nq is missing"):
        workloads.load(tmp_path)


def test_cli_writes_a_workload(tmp_path, capsys):
    out = tmp_path / "cli"
    args = ["--events", "10", "--subscriptions", "2", "--k", "5", "--quads", "5", "--seed", "4", "--out", str(out)]
    assert workloads.main(args) == 0
    assert "10 events × 5 quads" in capsys.readouterr().out
    assert workloads.load(out).events == generate(events=10, subscriptions=2, seed=4).events
    with pytest.raises(SystemExit):
        workloads.main(["--events", "1", "--quads", "2", "--out", str(out)])
    assert "needs ≥ 5 quads" in capsys.readouterr().err
