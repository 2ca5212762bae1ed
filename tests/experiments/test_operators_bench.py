"""The paper-setting part of experiments/operators_bench: its workload and its yardsticks."""

from __future__ import annotations

import itertools
import random

from experiments.operators_bench import paper_workload, run_orders, yardsticks


def _optimum(subs: list[list[int]], truth: list[bool]) -> int:
    """The fewest evaluations any order can make for this event (exhaustive: tiny instances only)."""
    must = {k for preds in subs if all(truth[k] for k in preds) for k in preds}
    unmatched = [set(k for k in preds if not truth[k]) for preds in subs if not all(truth[k] for k in preds)]
    candidates = sorted(set().union(*unmatched)) if unmatched else []
    for size in range(len(candidates) + 1):
        for chosen in itertools.combinations(candidates, size):
            if all(falses & set(chosen) for falses in unmatched):
                return len(must) + size
    raise AssertionError("unreachable")


def test_the_lower_bound_is_below_every_order_and_the_optimum_and_greedy_is_above_it():
    for seed in range(12):
        rng = random.Random(seed)
        selectivity, subs = paper_workload(14, 10, "uniform" if seed % 2 else "zipf", 4, seed=seed, target=0.05)
        truths = [[rng.random() < max(p, 0.2) for p in selectivity] for _ in range(3)]
        counts = run_orders(subs, truths, lambda k: (1.0, selectivity[k]))
        for truth in truths:
            bound, greedy = yardsticks(subs, truth)
            best = _optimum(subs, truth)
            assert bound <= best + 1e-9 <= greedy + 1e-9
        mean_bound = sum(yardsticks(subs, t)[0] for t in truths) / len(truths)
        for order, figures in counts.items():
            assert figures["evaluations"] >= mean_bound - 1e-9, order


def test_workload_shape():
    selectivity, subs = paper_workload(500, 300, "zipf", 5, seed=3)
    assert len(selectivity) == 500 and len(subs) == 300
    assert all(3 <= len(preds) <= 5 and len(set(preds)) == len(preds) for preds in subs)
    assert all(0 <= p <= 1 for p in selectivity)
