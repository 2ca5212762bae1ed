"""Figures for docs/overlay.md: routing hops, multicast messages per peer, data spread.

Overlays of 1 to 64 peers are built in-process with the very geometry functions the peers
run (`Zone.split` at the owner of a random point, `next_hop`, `multicast_children`), so the
figures measure the algorithms, not the network:

    python -m experiments.overlay_figures [--seed 1] [--pairs 2000]

Prints Markdown tables: mean/max hops against the CAN bound (d/4)·n^(1/d) with d = 4;
messages received per targeted peer in a multicast (must be exactly 1); quads per peer
(max/mean) under the `identity` and `local-name` mappings, for the paper's workload and for
real data (CityBench sensor readings and SensorRepository.n3).
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections import Counter

from eventcloud.overlay import CoordinateSpace, Zone, multicast_children, next_hop
from eventcloud.rdf.model import Quad

SIZES = (1, 2, 4, 8, 16, 32, 64)


def build(space: CoordinateSpace, peers: int, rng: random.Random) -> dict[str, Zone]:
    zones = {"p0": Zone(space.whole_space())}
    while len(zones) < peers:
        point = tuple(rng.randrange(space.top) for _ in range(4))
        owner = next(k for k, z in zones.items() if z.contains(point))
        lower, upper = zones[owner].split()
        zones[owner] = lower
        zones[f"p{len(zones)}"] = upper
    return zones


def neighbour_tables(zones: dict[str, Zone]) -> dict[str, dict[str, Zone]]:
    return {k: {j: w for j, w in zones.items() if j != k and z.is_neighbour(w)} for k, z in zones.items()}


def hops(zones, tables, start: str, point) -> int:
    current, count = start, 0
    while True:
        hop = next_hop(zones[current], tables[current], point)
        if hop is None:
            return count
        current, count = hop, count + 1


def multicast_counts(zones, tables, box) -> Counter:
    root = next(k for k, z in zones.items() if z.contains(tuple(lo for lo, _ in box)))
    received: Counter = Counter({root: 1})
    frontier = [root]
    while frontier:
        peer = frontier.pop()
        for child in multicast_children(zones[peer], tables[peer], box):
            received[child] += 1
            frontier.append(child)
    return received


def spread(zones: dict[str, Zone], space: CoordinateSpace, quads: list[Quad]) -> tuple[int, float]:
    load = Counter()
    for quad in quads:
        point = space.point(quad)
        load[next(k for k, z in zones.items() if z.contains(point))] += 1
    per_peer = [load.get(k, 0) for k in zones]
    return max(per_peer), statistics.mean(per_peer)


def datasets() -> dict[str, list[Quad]]:
    from experiments.workloads import generate

    out = {"paper workload (3,000 CEs × 5 quads)": [q for e in generate(events=3000, subscriptions=1, k=5).events
                                                  for q in e.quads]}
    from eventcloud.cli.demo import citybench_dir

    directory = citybench_dir()
    if directory is not None:
        from eventcloud.rdf.citybench import sample_events
        from eventcloud.rdf.files import read_events

        out["CityBench readings (3,000 CEs)"] = [q for e in sample_events(directory, 3000) for q in e.quads]
        out["SensorRepository.n3"] = [q for e in read_events(directory / "SensorRepository.n3", timestamp_ms=0) for q in e.quads]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=2000, help="routed (start, point) pairs per size")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    space = CoordinateSpace()

    print("## Routing hops (greedy, random start peer, random quad point)\n")
    print("| peers | mean hops | max hops | CAN bound (d/4)·n^(1/d) | multicast: messages per targeted peer (min/max) | peers reached by a fixed-predicate pattern |")
    print("|---|---|---|---|---|---|")
    for n in SIZES:
        zones = build(space, n, rng)
        tables = neighbour_tables(zones)
        keys = sorted(zones)
        counts = [hops(zones, tables, rng.choice(keys), tuple(rng.randrange(space.top) for _ in range(4)))
                  for _ in range(args.pairs)]
        per_peer: list[int] = []
        reached = []
        for _ in range(50):
            p = rng.randrange(space.top)
            box = (space.whole_space()[0], space.whole_space()[1], (p, p + 1), space.whole_space()[3])
            received = multicast_counts(zones, tables, box)
            per_peer.extend(received.values())
            reached.append(len(received))
        bound = (4 / 4) * n ** (1 / 4)
        print(f"| {n} | {statistics.mean(counts):.2f} | {max(counts)} | {bound:.2f} | "
              f"{min(per_peer)}/{max(per_peer)} | {statistics.mean(reached):.1f} |")

    print("\n## Quads per peer (max / mean) by coordinate mapping\n")
    data = datasets()
    print("| dataset | peers | identity max/mean | local-name max/mean |")
    print("|---|---|---|---|")
    for name, quads in data.items():
        for n in (8, 16, 64):
            cells = []
            for mapping in ("identity", "local-name"):
                mapped = CoordinateSpace(mapping=mapping)
                zones = build(mapped, n, random.Random(args.seed))
                worst, mean = spread(zones, mapped, quads)
                cells.append(f"{worst:,} / {mean:,.0f} ({worst / mean:.1f}×)")
            print(f"| {name} ({len(quads):,} quads) | {n} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
