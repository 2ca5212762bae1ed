"""Peer operations from anyone: in an open cluster (no secret) any client may send them, so their
bodies are validated like a client's. Every peer and routed operation, its sample body with one
part replaced by junk (or whole), is answered with a typed error or served, never `internal`
(junk batches raised TypeErrors in `replica_sync`, a literal predicate an AttributeError in
`deliver`); a peer id from the wire, which names directories, is never a path."""

from __future__ import annotations

import random

import msgpack
import pytest
import trio

from eventcloud.client import ClientError
from eventcloud.testing import open_overlay
from eventcloud.wire.messages import REQUESTS
from eventcloud.wire.ops import PEER_OPS, ROUTED_OPS, Op
from tests.helpers import paths, replaced
from tests.wire.samples import SAMPLES

JUNK = [None, 1, -1, 2 ** 63, "x", "../../etc", "", [], [1], [[1]], {}, {"a": 1}, True, b"\x00", 1.5, ["x"],
        "http://x/%zz", ["1", "nope"], [[["add", "http://g", [[1, 2, 3]]]]], ["1" * 5000, "http://www.w3.org/2001/XMLSchema#integer"]]


@pytest.mark.parametrize("seed", [1, 2])
async def test_junk_in_any_peer_operation_is_refused_with_a_typed_error(autojump_clock, seed):
    samples = {}
    for sample in SAMPLES:
        samples.setdefault(type(sample), sample)
    ops = sorted((op for op in PEER_OPS | ROUTED_OPS if REQUESTS[op] in samples), key=lambda op: op.value)
    assert len(ops) >= len(PEER_OPS | ROUTED_OPS) - 2, "a sample body for (nearly) every peer operation"
    rng = random.Random(seed)
    untyped: dict[tuple, str] = {}
    async with open_overlay(3, replicas=2) as overlay:
        async with overlay.client(1) as client:
            for _ in range(1500):
                op = rng.choice(ops)
                wire = msgpack.unpackb(msgpack.packb(samples[REQUESTS[op]].to_wire()))
                where = rng.choice(paths(wire))
                body = replaced(wire, where, rng.choice(JUNK)) if rng.random() < 0.9 else wire
                try:
                    with trio.fail_after(60):
                        if op in ROUTED_OPS:
                            await client.call(Op.ROUTE, {"point": [0.0] * 4, "op": op.value, "body": body})
                        else:
                            await client.call(op, body)
                except ClientError as exc:
                    if exc.code == "internal":
                        untyped.setdefault((op.value, where), f"{str(body)[:80]}: {exc}")
        assert not untyped, untyped
        for index in range(len(overlay.peers)):   # every one still answers
            async with overlay.client(index) as client:
                assert (await client.call(Op.PING, {}))["id"] == overlay.peers[index].state.id


async def test_a_peer_id_from_the_wire_never_names_a_path(autojump_clock, tmp_path):
    async with open_overlay(2, replicas=2, data_root=tmp_path / "peers") as overlay:
        before = sorted(p for p in tmp_path.rglob("*"))
        async with overlay.client(1) as client:
            for owner in ("../../escaped", "/tmp/x", "a/b", "", "x" * 65):
                with pytest.raises(ClientError, match="expected a peer id") as info:
                    await client.call(Op.REPLICA_SYNC, {"owner": owner, "incarnation": 1, "reset": True, "done": True,
                                                        "state": {"id": owner}})
                assert info.value.code == "bad-request"
            # a well-formed id with a state that is not one: refused now, not met at a takeover
            with pytest.raises(ClientError, match="invalid peer state of abc"):
                await client.call(Op.REPLICA_SYNC, {"owner": "abc", "incarnation": 1, "reset": True, "state": {"id": 1}})
        assert not (tmp_path / "escaped").exists()
        assert sorted(p for p in tmp_path.rglob("*") if "replica" in p.name) == \
            sorted(p for p in before if "replica" in p.name)
