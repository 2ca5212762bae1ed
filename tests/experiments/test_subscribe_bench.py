"""The subscribe benchmark registers every subscription on real peer processes and counts them."""

from __future__ import annotations

import argparse

import pytest

from eventcloud.sparql.subscription import parse_subscription
from experiments.subscribe_bench import run_once, subscriptions, table


def test_the_mixes_are_distinct_valid_subscriptions() -> None:
    for mix in ("chains", "filters", "both"):
        texts = subscriptions(40, mix)
        assert len(texts) == len(set(texts)) == 40
        for text in texts:
            parse_subscription(text)


@pytest.mark.parametrize("batch", [1, 5])
async def test_a_small_run_stores_every_subscription_on_its_box(batch) -> None:
    args = argparse.Namespace(peers=2, clients=4, algorithm="osma", seed=1, replicas=1, no_fsync=True, batch=batch)
    texts = subscriptions(24, "both")
    result = await run_once(texts, args, None)
    assert result["subscriptions"] == 24 and result["rate"] > 0
    assert 24 <= result["copies"] <= 48  # each on the one or two peers its box meets
    assert result["messages"] > 0 and result["cpu_ms"] > 0
    assert "| this | 24 |" in table([("this", result)])
