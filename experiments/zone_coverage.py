"""How much of the space a running cluster's peers own, read from their persisted states.

    python -m experiments.zone_coverage DATA_DIR [--every 10] [--seconds 1500]

Every `--every` seconds, sums the volumes of the zones in the `peer.json` files under DATA_DIR
(a `LocalCluster`'s folder: one per peer, stand-ins included) and prints the covered fraction
(1 when the zones tile the space; below 1, a gap; above 1, a zone on two peers), with the ids
of the peers that tables name but no state holds (ghosts) and how much of the space theirs is.
A peer between two runtimes (moving) still has its last file, so short gaps and overlaps are
moves under way; one that lasts is a zone nobody serves (seen once, docs/queries.md).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventcloud.overlay import CoordinateSpace
from eventcloud.wire.codec import zone_from_wire


@dataclass(frozen=True)
class Coverage:
    fraction: float                      # the zones' volumes over the space's
    zones: int
    ghosts: dict[str, float]             # id named in a table, held by no state -> its zone's share


def coverage(states: list[dict[str, Any]]) -> Coverage | None:
    """The coverage of the space by the zones of `states` (parsed `peer.json`); None if none has one."""
    if not states:
        return None
    whole = CoordinateSpace.from_dict(states[0]["space"]).whole_space()
    volume = math.prod(hi - lo for lo, hi in whole)
    zones = {s["id"]: zone_from_wire(s["zone"]) for s in states if s.get("zone")}
    if not zones:
        return None
    covered = sum(math.prod(hi - lo for lo, hi in z.bounds) for z in zones.values())
    ghosts: dict[str, float] = {}
    for state in states:
        for record in state.get("neighbours", []):
            if record["id"] not in zones:
                zone = zone_from_wire(record["zone"])
                ghosts[record["id"]] = math.prod(hi - lo for lo, hi in zone.bounds) / volume
    return Coverage(covered / volume, len(zones), ghosts)


def read_states(data_dir: Path) -> list[dict[str, Any]]:
    states = []
    for path in sorted(data_dir.glob("**/peer.json")):
        try:
            states.append(json.loads(path.read_text()))
        except (OSError, ValueError):  # being rewritten: the next look reads it
            continue
    return states


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=1500.0, help="stop after this long")
    args = parser.parse_args(argv)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        found = coverage(read_states(args.data_dir))
        if found is None:
            if not args.data_dir.exists():
                print("the data folder is gone: the cluster stopped", flush=True)
                return 0
        else:
            ghosts = ", ".join(f"{k} ({share:.1%})" for k, share in sorted(found.ghosts.items()))
            print(f"{time.strftime('%H:%M:%S')} covered {found.fraction:.4f} by {found.zones} zones"
                  f"{'; named but held by no state: ' + ghosts if ghosts else ''}", flush=True)
        time.sleep(args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
