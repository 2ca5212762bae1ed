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
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from eventcloud.errors import EventCloudError, Unavailable
from eventcloud.overlay import (
    GRANTED_KEPT, CoordinateSpace, Event, Holding, MergeUnderWay, Neighbour, SplitUnderWay, Zone, ZoneLifecycle,
)
from eventcloud.wire.codec import neighbour_from_wire, neighbour_to_wire, zone_from_wire, zone_to_wire
from peers.config import ALGORITHMS

__all__ = ["GRANTED_KEPT", "PeerState", "SplitUnderWay", "StateError", "load_state", "save_state", "state_path"]


def _split_to_json(split: SplitUnderWay) -> dict[str, Any]:
    return {"newcomer": split.newcomer, "address": split.address, "granted": zone_to_wire(split.granted),
            "before": zone_to_wire(split.before),
            "table": [neighbour_to_wire(k, n) for k, n in split.table.items()],
            "announce_to": list(split.announce_to)}


def _split_from_json(data: Any) -> SplitUnderWay:
    if not isinstance(data, dict) or not isinstance(data.get("newcomer"), str) \
            or not isinstance(data.get("address"), str) or not isinstance(data.get("table"), list) \
            or not isinstance(data.get("announce_to"), list):
        raise ValueError(f"invalid split under way {data!r}")
    return SplitUnderWay(data["newcomer"], data["address"], zone_from_wire(data["granted"]),
                         zone_from_wire(data["before"]), dict(neighbour_from_wire(n) for n in data["table"]),
                         tuple(str(a) for a in data["announce_to"]))


def _merge_to_json(merge: MergeUnderWay) -> dict[str, Any]:
    return {"leaver": merge.leaver, "incarnation": merge.incarnation, "token": merge.token,
            "zone": zone_to_wire(merge.zone), "table": [neighbour_to_wire(k, n) for k, n in merge.table.items()]}


def _merge_from_json(data: Any) -> MergeUnderWay:
    if not isinstance(data, dict) or not isinstance(data.get("leaver"), str) \
            or type(data.get("incarnation")) is not int or not isinstance(data.get("token"), str) \
            or not isinstance(data.get("table"), list):
        raise ValueError(f"invalid merge under way {data!r}")
    return MergeUnderWay(data["leaver"], data["incarnation"], data["token"], zone_from_wire(data["zone"]),
                         dict(neighbour_from_wire(n) for n in data["table"]))


class StateError(EventCloudError):
    """A data directory whose peer.json cannot be used."""


class PeerState:
    """A peer's identity and settings, and what it holds: its zone, neighbours, replica, epoch,
    a split under way, a merge under way, a join committing. What it holds is read here and changed only by
    stepping its zone lifecycle (`step`, eventcloud/overlay/lifecycle.py); the keyword
    arguments of the same names give a holding to start from (a restored or copied state)."""

    def __init__(self, id: str | None = None, address: str = "", overlay: str = "", *,
                 space: CoordinateSpace | None = None, algorithm: str = "osma", clock: int = 0, replicas: int = 2,
                 annex: bool = False, zone_or_none: Zone | None = None,
                 neighbours: Mapping[str, Neighbour] | None = None, incarnation: int = 0,
                 replica: tuple[str, str] | None = None, splitting: SplitUnderWay | None = None,
                 joining: tuple[str, str] | None = None, granted: tuple[str, ...] = (),
                 merging: MergeUnderWay | None = None) -> None:
        self.id = id if id is not None else uuid.uuid4().hex[:12]
        self.address = address
        self.overlay = overlay                # the id of the overlay this peer belongs to
        self.space = space if space is not None else CoordinateSpace()
        self.algorithm = algorithm
        self.clock = clock
        self.replicas = replicas              # copies of every zone in this overlay (R)
        self.annex = annex                    # started to take the empty side of a crowded zone (peers/membership/annexes.py)
        self.lifecycle = ZoneLifecycle(Holding(
            zone_or_none, MappingProxyType(dict(neighbours or {})), replica, incarnation, splitting, joining,
            tuple(granted)[-GRANTED_KEPT:], merging))

    def step(self, *events: Event) -> None:
        """Change what this peer holds: each event one transition of its zone lifecycle."""
        for event in events:
            self.lifecycle.step(event)

    @property
    def holding(self) -> Holding:
        return self.lifecycle.holding

    @property
    def zone_or_none(self) -> Zone | None:
        return self.lifecycle.holding.zone

    @property
    def zone(self) -> Zone:
        """This peer's zone; Unavailable while it has none (joining, or after it left)."""
        zone = self.lifecycle.holding.zone
        if zone is None:
            raise Unavailable(f"peer {self.id} has no zone yet (it is joining, or it left)")
        return zone

    @property
    def has_zone(self) -> bool:
        return self.lifecycle.holding.zone is not None

    @property
    def neighbours(self) -> Mapping[str, Neighbour]:
        return self.lifecycle.holding.neighbours

    @property
    def replica(self) -> tuple[str, str] | None:
        """(id, address) of the peer holding this zone's copy."""
        return self.lifecycle.holding.replica

    @property
    def incarnation(self) -> int:
        """The zone's epoch: +1 each time a replica takes this zone over."""
        return self.lifecycle.holding.incarnation

    @property
    def splitting(self) -> SplitUnderWay | None:
        """A split granted and not yet committed (peers/membership/splits.py)."""
        return self.lifecycle.holding.splitting

    @property
    def merging(self) -> MergeUnderWay | None:
        """A leaver's content held here, its merge not yet decided at the authority."""
        return self.lifecycle.holding.merging

    @property
    def joining(self) -> tuple[str, str] | None:
        """(id, address) of the peer whose split this one joins by, until its commit is answered:
        a copy of a zone whose join may have been undone is taken over only once the splitter
        says the split stands (peers/replication/keeper.py), and a restart asks it first too."""
        return self.lifecycle.holding.joining

    @property
    def granted(self) -> tuple[str, ...]:
        """The newcomers whose splits committed here, the last GRANTED_KEPT of them: a commit
        asked again (its answer lost, or asked by the newcomer's replica) is answered from it."""
        return self.lifecycle.holding.granted

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PeerState) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]   # changes as it steps

    def __repr__(self) -> str:
        return f"PeerState(id={self.id!r}, address={self.address!r}, {self.lifecycle.phase.value}, zone={self.zone_or_none})"

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
            **({"splitting": _split_to_json(self.splitting)} if self.splitting is not None else {}),
            **({"joining": list(self.joining)} if self.joining is not None else {}),
            **({"granted": list(self.granted)} if self.granted else {}),
            **({"merging": _merge_to_json(self.merging)} if self.merging is not None else {}),
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
            splitting=_split_from_json(data["splitting"]) if data.get("splitting") is not None else None,
            joining=tuple(joining) if joining else None,  # type: ignore[arg-type]
            granted=tuple(str(g) for g in data.get("granted", ()) if isinstance(g, str)),
            merging=_merge_from_json(data["merging"]) if data.get("merging") is not None else None,
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
