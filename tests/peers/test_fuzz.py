"""Structurally valid but mutated requests of every operation: each gets a precise error code,
never `internal` (which is reserved for bugs), and the peers keep serving."""

from __future__ import annotations

import random
from typing import Any

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RemoteError
from eventcloud.testing import open_overlay
from eventcloud.wire.messages import REQUESTS
from eventcloud.wire.ops import CLIENT_OPS, PEER_OPS, ROUTED_OPS, Op
from tests.helpers import sample_events
from tests.wire.samples import SAMPLES

VALUES: list[Any] = [None, 0, -1, 1, 2**63, -(2**63), 2**64 - 1, 1.5, True, "", "x", "http://ex/a", "ff" * 40,
                     [], [None], ["0", "1", "2", "3"], [["0", "1"]] * 4, {}, {"a": 1}, "\u00e9t\u00e9", "a" * 5000,
                     [[["0", "1"]] * 4, [9]], ["http://s", "http://p"], {"graph": "http://g", "quads": []}]


def samples() -> dict[str, dict[str, Any]]:
    """A valid wire body for every message type (from the message tests), by type name."""
    return {type(body).__name__: body.to_wire() for body in SAMPLES}


def mutate(rng: random.Random, body: Any, depth: int = 0) -> Any:
    if isinstance(body, dict) and body and rng.random() < 0.85:
        out = dict(body)
        key = rng.choice(list(out))
        roll = rng.random()
        if roll < 0.2:
            del out[key]
        elif roll < 0.4 and depth < 3:
            out[key] = mutate(rng, out[key], depth + 1)
        elif roll < 0.5:
            out[rng.choice(["zz", "id", "op", "body"])] = rng.choice(VALUES)
        else:
            out[key] = rng.choice(VALUES)
        return out
    if isinstance(body, list) and body and rng.random() < 0.7:
        out = list(body)
        i = rng.randrange(len(out))
        out[i] = mutate(rng, out[i], depth + 1) if rng.random() < 0.5 else rng.choice(VALUES)
        return out
    return rng.choice(VALUES)


async def test_mutated_requests_never_get_internal_errors(autojump_clock):
    rng = random.Random(1)
    bodies = samples()
    ops = sorted((CLIENT_OPS | PEER_OPS) - {Op.LEAVE}, key=lambda op: op.value)
    internal: list[str] = []
    async with open_overlay(4, seed=2) as overlay:
        async with overlay.client(0, "fuzz") as client:
            for event in sample_events(10):
                await client.publish(event)
            for i in range(1500):
                if rng.random() < 0.25:  # a routed operation, inside a route to some point
                    routed = rng.choice(sorted(ROUTED_OPS, key=lambda o: o.value))
                    inner = mutate(rng, bodies.get(REQUESTS[routed].__name__, {}))
                    op, body = Op.ROUTE, {"point": ["0", "0", "0", "0"], "op": routed.value, "body": inner, "hops": 0}
                    if rng.random() < 0.3:
                        body = mutate(rng, body)
                else:
                    op = rng.choice(ops)
                    body = mutate(rng, bodies.get(REQUESTS[op].__name__, {}))
                if not isinstance(body, dict):  # not a map: a protocol error, tested elsewhere
                    body = {"field": body}
                try:
                    with trio.fail_after(30):
                        await client.call(op, body)
                except EventCloudError as exc:
                    if exc.code is ErrorCode.INTERNAL:
                        internal.append(f"{op.value} {body!r:.300}: {exc.message}")
                except trio.TooSlowError:
                    internal.append(f"{op.value} {body!r:.300}: no answer within 30 s")
            assert await client.count() >= 50  # every peer still serves (a mutated publish may add some)
            status = await client.status()
            assert len(status.peers) >= 4 and not any(p.down for p in status.peers)
    assert not internal, "\n".join(internal[:15])
