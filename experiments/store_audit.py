"""What each peer of a stopped cluster holds, read from its data folder: quads outside its zone,
and counts against the quads really there.

    python -m experiments.store_audit DATA_DIR [--graph IRI ...]

A `LocalCluster` kept with `query_bench --keep DATA_DIR` has one folder per peer (`peer.json`
and `store`); replica copies (`replicas/`) are left out. A count above what was published is
either a quad held by two peers (one of them outside its zone: a drop that did not happen) or
a counter that disagrees with the store; this tells which, and names the events.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from eventcloud.overlay import CoordinateSpace
from eventcloud.wire.codec import zone_from_wire
from peers.store import PeerStore


def audit(data_dir: Path, graphs: set[str]) -> list[str]:
    lines: list[str] = []
    for state_file in sorted(data_dir.glob("peer-*/peer.json")):
        state = json.loads(state_file.read_text())
        zone = zone_from_wire(state["zone"]) if state.get("zone") else None
        space = CoordinateSpace.from_dict(state["space"])
        store = PeerStore(state_file.parent / "store", durable=False)
        try:
            quads = store.find_list(None, None, None, None)
            outside = [q for q in quads if zone is None or not zone.contains(space.point(q))]
            by_graph = Counter(q.g.value for q in quads)
            infos = store.events()
            wrong_held = {g: (i.held, by_graph.get(g, 0)) for g, i in infos.items() if i.held != by_graph.get(g, 0)}
            unknown = sum(n for g, n in by_graph.items() if g not in infos)
            lines.append(f"{state_file.parent.name} {state['id']}: {len(quads):,} quads, counters "
                         f"{store.held():,}, {len(outside):,} outside its zone, {len(wrong_held)} events whose "
                         f"count is not what is stored, {unknown:,} quads of events it has no record of")
            for q in outside[:5]:
                lines.append(f"  outside: {q.g.value} {q.s} {q.p}")
            for g, (held, there) in list(wrong_held.items())[:5]:
                lines.append(f"  {g}: counted {held}, stored {there}")
            for g in sorted(graphs & by_graph.keys()):
                lines.append(f"  holds {by_graph[g]} quads of {g} (committed: {infos[g].committed if g in infos else '?'})")
        finally:
            store.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--graph", action="append", default=[], help="an event to follow (repeatable)")
    args = parser.parse_args(argv)
    for line in audit(args.data_dir, set(args.graph)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
