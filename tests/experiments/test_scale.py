"""A bounded run of the scale simulation (python -m experiments.scale): its invariants at 256 peers."""

from __future__ import annotations

import io

import pytest

from eventcloud.cli.demo import citybench_dir
from eventcloud.overlay import CoordinateSpace
from experiments.scale import MAX_HOPS, Dataset, can_bound, paper_dataset, place, run, simulate


@pytest.fixture(scope="module")
def paper() -> Dataset:
    return paper_dataset(3000, seed=1)


def _placed(paper: Dataset, mapping: str):
    """The workload's space, quads' points and subscription boxes under `mapping`."""
    space = CoordinateSpace(mapping=mapping)
    return space, place(space, paper.quads), [space.pattern_box(p) for p in paper.patterns]


@pytest.mark.parametrize("mapping", ["local-name", "identity"])
def test_balanced_joins_meet_the_targets_where_midpoint_joins_leave_peers_empty(paper, mapping):
    space, points, boxes = _placed(paper, mapping)
    before, = simulate(space, points, boxes, "before", [256], routes=300, seed=3)
    after, = simulate(space, points, boxes, "after", [256], routes=300, seed=3)
    worst, mean, empty = after.load
    assert after.peers == 256 and empty == 0.0 and worst <= 5 * mean
    assert after.hops_data[2] == 0 and after.hops_uniform[2] == 0, "a route hit the hop guard"
    assert after.hops_data[0] <= 1.5 * can_bound(256) and after.hops_uniform[0] <= 1.5 * can_bound(256)
    assert after.neighbours[0] <= 64
    assert before.load[2] > 0.3, "midpoint joins leave many peers empty on this workload"
    # a chain subscription's box: every peer meeting it reached once (checked inside), well under all
    assert 0 < after.fanout < after.peers and after.box_messages < after.subscribe_today / 2


@pytest.mark.skipif(citybench_dir() is None, reason="CityBench data (shared/data/citybench) not found")
def test_citybench_readings_are_balanced_too():
    from eventcloud.rdf.citybench import sample_events

    quads = [q for e in sample_events(citybench_dir(), 4000) for q in e.quads]
    space = CoordinateSpace(mapping="identity")
    after, = simulate(space, place(space, quads), [], "after", [256], routes=300, seed=2)
    worst, mean, empty = after.load
    assert empty == 0.0 and worst <= 5 * mean
    assert after.hops_data[0] <= 1.5 * can_bound(256) and after.hops_data[1] <= MAX_HOPS


def test_the_report_prints_both_rules_side_by_side(paper):
    out = io.StringIO()
    small = Dataset(paper.name, paper.quads[:2000], paper.patterns[:2])
    results = run([small], ["local-name"], [16, 32], routes=50, seed=1, out=out)
    text = out.getvalue()
    assert text.count("| before |") == 2 and text.count("| after |") == 2 and text.count("| annexes |") == 2
    assert set(results) == {(small.name, "local-name", rule) for rule in ("before", "after", "annexes")}


@pytest.mark.parametrize("mapping", ["local-name", "identity"])
def test_the_annex_rule_counts_hosts_and_keeps_their_targets(paper, mapping):
    space, points, boxes = _placed(paper, mapping)
    annexes, = simulate(space, points, boxes, "annexes", [256], routes=300, seed=3)
    worst, mean, empty = annexes.load
    assert annexes.peers == 256 and annexes.zones >= 256 and empty == 0.0 and worst <= 5 * mean
    assert annexes.neighbours[0] <= 64 and annexes.hops_data[0] <= 1.5 * can_bound(256)
