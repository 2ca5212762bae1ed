"""`eventcloud demo`, the main job: a local cluster, a subscriber and a publisher of real
Aarhus sensor readings (CityBench) when shared/data is there, synthetic ones otherwise."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any

import trio

from eventcloud.client import connect
from eventcloud.rdf.citybench import sample_events, synthetic_events
from eventcloud.rdf.model import CompoundEvent

__all__ = ["demo", "demo_events", "citybench_dir", "DEMO_SUBSCRIPTION"]

DEMO_SUBSCRIPTION = """PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
SELECT ?g ?obs ?value WHERE { GRAPH ?g { ?obs sao:hasValue ?value } FILTER(?value > 30) }"""


def citybench_dir() -> Path | None:
    """Where the CityBench data is: $EVENTCLOUD_CITYBENCH, or shared/data/citybench beside the checkout."""
    candidates = [os.environ.get("EVENTCLOUD_CITYBENCH"),
                  Path(__file__).resolve().parents[3] / "shared" / "data" / "citybench",
                  Path.cwd().parent / "shared" / "data" / "citybench"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def demo_events(n: int) -> list[CompoundEvent]:
    """`n` sensor-observation events: CityBench parking and traffic readings if available,
    else readings synthesised in the same vocabulary (and the demo says so)."""
    directory = citybench_dir()
    return sample_events(directory, n) if directory is not None else synthetic_events(n)


async def demo(args: argparse.Namespace) -> int:
    from peers.supervisor import LocalCluster

    events = demo_events(args.events)
    what = ("Aarhus sensor observations (CityBench)" if citybench_dir() is not None else
            "synthetic sensor observations (CityBench data not found: set EVENTCLOUD_CITYBENCH)")
    print(f"== starting a local cluster of {args.peers} peer{'s' if args.peers != 1 else ''} ({args.algorithm})", flush=True)
    cluster = LocalCluster(args.peers, algorithm=args.algorithm, authority="local")
    try:
        await trio.to_thread.run_sync(cluster.start)
        print(f"   entry peer {cluster.entry}; peers {', '.join(cluster.addresses)}", flush=True)
        async with connect(cluster.entry, source="demo-subscriber") as subscriber, \
                connect(cluster.addresses[-1], source="demo-publisher") as publisher:
            sub = await subscriber.subscribe(DEMO_SUBSCRIPTION, kind="bindings")
            print(f"== subscribed ({sub.id[:8]}…):\n{DEMO_SUBSCRIPTION}", flush=True)
            expected = sum(1 for e in events if _demo_matches(e))
            print(f"== publishing {len(events)} {what} from {cluster.addresses[-1]} "
                  f"({expected} have a value over 30)", flush=True)
            received = 0

            async def listen() -> None:
                nonlocal received
                async for note in sub:
                    received += 1
                    for s in note.solutions:
                        print(f"   notification {received:3d}: {s['obs'].n3()} value {s['value'].lexical}", flush=True)
                    if received >= expected:
                        return

            published = 0
            interrupted = False

            async def on_interrupt(scope: trio.CancelScope) -> None:
                nonlocal interrupted
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        interrupted = True
                        scope.cancel()
                        return

            async with trio.open_nursery() as outer:
                outer.start_soon(on_interrupt, outer.cancel_scope)
                with trio.move_on_after(60):
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(listen)
                        for event in events:
                            await publisher.publish(event)
                            published += 1
                outer.cancel_scope.cancel()
            if interrupted:
                print(f"== interrupted: {published} of {len(events)} events published (each stored whole), "
                      f"{received} notifications received; stopping the cluster", flush=True)
                return 130
            count = await publisher.query("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }")
            stored = count["results"]["bindings"][0]["n"]["value"]
            print(f"== {received} notifications for {expected} matching events; {stored} quads stored "
                  f"across {args.peers} peer{'s' if args.peers != 1 else ''}", flush=True)
            return 0 if received == expected else 1
    finally:
        await trio.to_thread.run_sync(cluster.stop)


def _demo_matches(event: Any) -> bool:
    for quad in event.quads:
        if quad.p.value.endswith("hasValue"):
            try:
                if float(quad.o.lexical) > 30:
                    return True
            except ValueError:
                pass
    return False
