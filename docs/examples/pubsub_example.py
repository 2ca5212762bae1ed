"""A runnable SDK example: subscribe with SPARQL, publish events, print notifications.

    python docs/examples/pubsub_example.py              # starts its own 3-peer local cluster
    python docs/examples/pubsub_example.py HOST:PORT    # uses a running overlay
"""

from __future__ import annotations

import sys

import trio

from eventcloud.client import connect
from eventcloud.rdf.model import IRI, XSD, Literal

EX = "http://example.org/"
QUERY = f"""
PREFIX ex: <{EX}>
SELECT ?room ?temp WHERE {{
  GRAPH ?g {{ ?reading ex:room ?room . ?reading ex:temperature ?temp }}
  FILTER(?temp > 25)
}}"""


async def main(address: str) -> int:
    async with connect(address, source="example") as client:
        sub = await client.subscribe(QUERY, kind="bindings")
        print(f"subscribed: {sub.id}")
        readings = [("kitchen", "21.5"), ("attic", "31.0"), ("cellar", "12.0"), ("office", "26.5")]
        for i, (room, temp) in enumerate(readings):
            reading = IRI(f"{EX}reading/{i}")
            event = client.event([
                (reading, IRI(f"{EX}room"), Literal(room)),
                (reading, IRI(f"{EX}temperature"), Literal(temp, XSD + "decimal")),
            ])
            await client.publish(event)
        hot = 0
        with trio.move_on_after(30):
            async for note in sub:
                for solution in note.solutions:
                    print(f"notified: {solution['room'].lexical} is at {solution['temp'].lexical} °C ({note.event})")
                hot += 1
                if hot == 2:
                    break
        await sub.unsubscribe()
        return 0 if hot == 2 else 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        raise SystemExit(trio.run(main, sys.argv[1]))
    from peers.supervisor import LocalCluster

    with LocalCluster(3) as cluster:
        raise SystemExit(trio.run(main, cluster.entry))
