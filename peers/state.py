"""A peer's durable identity: its id, address, zone, neighbours and the overlay settings.

Written atomically (temporary file, fsync, rename) after every change, so a peer killed at
any moment and restarted with the same data directory comes back with its zone and can
re-contact its neighbours.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eventcloud.overlay.zones import CoordinateSpace, Zone

ALGORITHMS = ("osma", "csma")


@dataclass
class Neighbour:
    address: str
    zone: Zone


@dataclass
class PeerState:
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    address: str = ""
    zone: Zone | None = None
    neighbours: dict[str, Neighbour] = field(default_factory=dict)
    space: CoordinateSpace = field(default_factory=CoordinateSpace)
    algorithm: str = "osma"
    clock: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "address": self.address,
            "zone": self.zone.to_wire() if self.zone is not None else None,
            "neighbours": {k: {"address": n.address, "zone": n.zone.to_wire()} for k, n in self.neighbours.items()},
            "space": self.space.to_dict(),
            "algorithm": self.algorithm,
            "clock": self.clock,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PeerState":
        return cls(
            id=data["id"],
            address=data["address"],
            zone=Zone.from_wire(data["zone"]) if data.get("zone") is not None else None,
            neighbours={
                k: Neighbour(v["address"], Zone.from_wire(v["zone"])) for k, v in data.get("neighbours", {}).items()
            },
            space=CoordinateSpace.from_dict(data["space"]),
            algorithm=data.get("algorithm", "osma"),
            clock=int(data.get("clock", 0)),
        )


def state_path(data_dir: Path) -> Path:
    return data_dir / "peer.json"


def load_state(data_dir: Path) -> PeerState | None:
    path = state_path(data_dir)
    if not path.exists():
        return None
    try:
        return PeerState.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"corrupt peer state {path}: {exc}; move it away to start this peer afresh") from None


def save_state(data_dir: Path, state: PeerState) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = state_path(data_dir)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as handle:
        json.dump(state.to_json(), handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
