"""Hostile subscriptions: a catastrophic REGEX cannot stall a peer (real clock, real TCP)."""

from __future__ import annotations

import statistics

import trio

from eventcloud.client import connect
from eventcloud.net.transport import TcpTransport
from eventcloud.rdf.model import IRI, Literal
from peers.config import PeerConfig
from peers.runtime import run_peer
from tests.helpers import EXO, sample_events

#: Exponential for a backtracking engine on a long run of x's (the oracle's engine never backtracks).
CATASTROPHIC = 'SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } FILTER(REGEX(STR(?o), "(x+x+)+y")) }'


async def test_a_catastrophic_regex_does_not_stall_other_clients():
    async with trio.open_nursery() as nursery:
        peer = await nursery.start(run_peer, PeerConfig(listen="127.0.0.1:0", stabilise_every=0), TcpTransport())
        async with connect(peer.address, source="evil") as evil, connect(peer.address, source="good") as good:
            sub = await evil.subscribe(CATASTROPHIC, kind="signal")
            latencies: list[float] = []

            async def flood() -> None:
                for i in range(40):
                    await evil.publish(evil.event([(IRI(f"{EXO}s{i}"), IRI(f"{EXO}text"), Literal("x" * 3000 + str(i)))]))

            async def ordinary() -> None:
                for i, event in enumerate(sample_events(30, quads=2, source="good")):
                    started = trio.current_time()
                    await good.publish(event)
                    await good.count(event.graph)
                    latencies.append(trio.current_time() - started)
                    await trio.sleep(0.01)

            with trio.fail_after(60):
                async with trio.open_nursery() as inner:
                    inner.start_soon(flood)
                    inner.start_soon(ordinary)
            status = await good.status()
            timeouts = sum(p.counters.get("regex_timeouts", 0) for p in status.peers)
            assert timeouts >= 40, "every flood event ran into the budget and was counted"
            latencies.sort()
            p95 = latencies[int(len(latencies) * 0.95) - 1]
            print(f"ordinary publish+count: median {statistics.median(latencies) * 1000:.1f} ms, "
                  f"p95 {p95 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms; regex timeouts {timeouts}")
            assert p95 < 0.1, latencies
            with trio.move_on_after(1):
                async for note in sub:  # no event matched: (x+x+)+y needs a y
                    raise AssertionError(f"unexpected notification {note}")
        nursery.cancel_scope.cancel()
