"""The term-coding measurement compares like with like: both codings give back exactly the
published quads, and the prefix dictionary makes frames smaller."""

from __future__ import annotations

from experiments.term_coding_bench import decode_prefixed, decode_today, frames_prefixed, frames_today
from eventcloud.wire.codec import triple_to_wire
from eventcloud.wire.peer_messages import Delivery
from experiments.workloads import generate


def test_both_codings_give_back_the_published_quads_and_prefixes_shrink_frames() -> None:
    events = generate(events=40, subscriptions=1, k=5, seed=0).events
    bodies = [Delivery(e.graph.value, len(e.quads), 1, tuple(triple_to_wire(q) for q in e.quads)) for e in events]
    published = [q for e in events for q in e.quads]
    today, prefixed = frames_today(bodies), frames_prefixed(bodies)
    assert decode_today(today) == published
    assert decode_prefixed(prefixed) == published
    assert sum(map(len, prefixed)) < 0.8 * sum(map(len, today))
