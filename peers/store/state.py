"""A peer's durable identity: its id, address, zone, neighbours and the overlay settings.

Written atomically (temporary file, fsync, rename) after every change, so a peer killed at
any moment and restarted with the same data directory comes back with its zone and can
re-contact its neighbours. A file that cannot be read is refused with a message saying so,
never half-loaded.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eventcloud.errors import EventCloudError, Unavailable
from eventcloud.overlay import CoordinateSpace, Neighbour, Zone
from eventcloud.wire.codec import neighbour_from_wire, neighbour_to_wire, zone_from_wire, zone_to_wire
from peers.config import ALGORITHMS

__all__ = ["GRANTED_KEPT", "PeerState", "SplitUnderWay", "StateError", "load_state", "save_state", "state_path"]

#: Committed newcomers a peer remembers (`PeerState.granted`).
GRANTED_KEPT = 32


class StateError(EventCloudError):
    """A data directory whose peer.json cannot be used."""


@dataclass(frozen=True)
class SplitUnderWay:
    """A split this peer granted and the newcomer has not committed yet: saved with the zone
    (already the kept half) and copied to the replica with it, so whoever serves this state
    next (this peer restarted, or its stand-in) waits for that commit or undoes the split.
    Without it a splitter killed before the commit left a stand-in serving the kept half and
    the newcomer, its commit unanswered, serving nothing: half the zone owned by nobody."""

    newcomer: str                      # the joining peer's id
    address: str                       # where it joins from (asked whether it is still there)
    granted: Zone                      # the part it takes
    before: Zone                       # this peer's zone before the split (an undo restores it)
    table: dict[str, Neighbour]        # and its neighbours then
    announce_to: tuple[str, ...]       # addresses told about both zones once it commits

    def to_json(self) -> dict[str, Any]:
        return {"newcomer": self.newcomer, "address": self.address, "granted": zone_to_wire(self.granted),
                "before": zone_to_wire(self.before),
                "table": [neighbour_to_wire(k, n) for k, n in self.table.items()],
                "announce_to": list(self.announce_to)}

    @classmethod
    def from_json(cls, data: Any) -> "SplitUnderWay":
        if not isinstance(data, dict) or not isinstance(data.get("newcomer"), str) \
                or not isinstance(data.get("address"), str) or not isinstance(data.get("table"), list) \
                or not isinstance(data.get("announce_to"), list):
            raise ValueError(f"invalid split under way {data!r}")
        return cls(data["newcomer"], data["address"], zone_from_wire(data["granted"]), zone_from_wire(data["before"]),
                   dict(neighbour_from_wire(n) for n in data["table"]), tuple(str(a) for a in data["announce_to"]))


@dataclass
class PeerState:
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    address: str = ""
    overlay: str = ""                     # the id of the overlay this peer belongs to
    zone_or_none: Zone | None = None
    neighbours: dict[str, Neighbour] = field(default_factory=dict)
    space: CoordinateSpace = field(default_factory=CoordinateSpace)
    algorithm: str = "osma"
    clock: int = 0
    incarnation: int = 0                  # +1 each time a replica takes this zone over
    replicas: int = 2                     # copies of every zone in this overlay (R)
    replica: tuple[str, str] | None = None  # (id, address) of the peer holding this zone's copy
    annex: bool = False                   # started to take the empty side of a crowded zone (peers/membership/annexes.py)
    splitting: SplitUnderWay | None = None  # a split granted and not yet committed (peers/membership/splits.py)
    #: (id, address) of the peer whose split this one joins by, until its commit is answered: a
    #: copy of a zone whose join may have been undone is taken over only once the splitter says
    #: the split stands (peers/replication/keeper.py), and a restart asks it first too
    joining: tuple[str, str] | None = None
    #: the newcomers whose splits committed here, the last GRANTED_KEPT of them: a commit asked
    #: again (its answer lost, or asked by the newcomer's replica) is answered from it
    granted: tuple[str, ...] = ()

    @property
    def zone(self) -> Zone:
        """This peer's zone; Unavailable while it has none (joining, or after it left)."""
        if self.zone_or_none is None:
            raise Unavailable(f"peer {self.id} has no zone yet (it is joining, or it left)")
        return self.zone_or_none

    @zone.setter
    def zone(self, zone: Zone | None) -> None:
        self.zone_or_none = zone

    @property
    def has_zone(self) -> bool:
        return self.zone_or_none is not None

    def neighbour_zones(self) -> dict[str, Zone]:
        return {k: n.zone for k, n in self.neighbours.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "address": self.address,
            "overlay": self.overlay,
            "zone": zone_to_wire(self.zone_or_none) if self.zone_or_none is not None else None,
            "neighbours": [neighbour_to_wire(k, n) for k, n in self.neighbours.items()],
            "space": self.space.to_dict(),
            "algorithm": self.algorithm,
            "clock": self.clock,
            "incarnation": self.incarnation,
            "replicas": self.replicas,
            "replica": list(self.replica) if self.replica else None,
            "annex": self.annex,
            **({"splitting": self.splitting.to_json()} if self.splitting is not None else {}),
            **({"joining": list(self.joining)} if self.joining is not None else {}),
            **({"granted": list(self.granted)} if self.granted else {}),
        }

    @classmethod
    def from_json(cls, data: Any) -> "PeerState":
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        algorithm = data.get("algorithm", "osma")
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}")
        clock = data.get("clock", 0)
        if type(clock) is not int or clock < 0:
            raise ValueError(f"invalid clock {clock!r}")
        incarnation, replicas, replica = data.get("incarnation", 0), data.get("replicas", 1), data.get("replica")
        if type(incarnation) is not int or incarnation < 0:
            raise ValueError(f"invalid incarnation {incarnation!r}")
        if type(replicas) is not int or not 1 <= replicas <= 2:
            raise ValueError(f"invalid replication factor {replicas!r}")
        if replica is not None and (not isinstance(replica, list) or len(replica) != 2
                                    or not all(isinstance(x, str) for x in replica)):
            raise ValueError(f"invalid replica {replica!r}")
        joining = data.get("joining")
        if joining is not None and (not isinstance(joining, list) or len(joining) != 2
                                    or not all(isinstance(x, str) for x in joining)):
            raise ValueError(f"invalid joining {joining!r}")
        neighbours = data.get("neighbours", [])
        if isinstance(neighbours, dict):  # the older {id: {address, zone}} form
            neighbours = [{"id": k, **v} for k, v in neighbours.items()]
        return cls(
            id=str(data["id"]),
            address=str(data["address"]),
            overlay=str(data.get("overlay", "")),
            zone_or_none=zone_from_wire(data["zone"]) if data.get("zone") is not None else None,
            neighbours=dict(neighbour_from_wire(n) for n in neighbours),
            space=CoordinateSpace.from_dict(data["space"]),
            algorithm=algorithm,
            clock=clock,
            incarnation=incarnation,
            replicas=replicas,
            replica=tuple(replica) if replica else None,  # type: ignore[arg-type]
            annex=data.get("annex") is True,
            splitting=SplitUnderWay.from_json(data["splitting"]) if data.get("splitting") is not None else None,
            joining=tuple(joining) if joining else None,  # type: ignore[arg-type]
            granted=tuple(str(g) for g in data.get("granted", ()) if isinstance(g, str))[-GRANTED_KEPT:],
        )


def state_path(data_dir: Path) -> Path:
    return data_dir / "peer.json"


def load_state(data_dir: Path) -> PeerState | None:
    """The saved state, None for a fresh directory; StateError if the file is unusable."""
    path = state_path(data_dir)
    if not path.exists():
        return None
    try:
        return PeerState.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError, EventCloudError) as exc:
        message = getattr(exc, "message", None) or str(exc)
        raise StateError(f"corrupt peer state {path}: {message}; move it away to start this peer afresh") from None


def save_state(data_dir: Path, state: PeerState | dict[str, Any]) -> None:
    """Write the state atomically and durably (blocking: call it off the event loop, with
    `state.to_json()` taken in the loop: the loop goes on changing the state meanwhile)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = state_path(data_dir)
    tmp = path.with_suffix(".tmp")
    snapshot = state if isinstance(state, dict) else state.to_json()
    with open(tmp, "w") as handle:
        json.dump(snapshot, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
