"""`GET /status` as JSON: the overlay's peers with their zones (as fractions of each axis, for
drawing, and as the strings they start and end at, for reading), stored quads, events and
subscriptions, message counters, and the gateway's own figures."""

from __future__ import annotations

from typing import Any

from eventcloud.overlay.coordinates import DIMENSIONS
from eventcloud.overlay.labels import coordinate_text
from eventcloud.wire.messages import Status

__all__ = ["status_json", "partition_ok"]


def partition_ok(status: Status) -> bool:
    """Do the live peers' zones partition the space exactly (volumes add up, none overlap)?"""
    zones = [p.zone for p in status.peers]
    volume = 0
    for zone in zones:
        v = 1
        for lo, hi in zone.bounds:
            v *= hi - lo
        volume += v
    overlaps = any(a.intersects(b.bounds) for i, a in enumerate(zones) for b in zones[i + 1:])
    return volume == status.space.top ** len(DIMENSIONS) and not overlaps


def status_json(status: Status, gateway: dict[str, Any]) -> dict[str, Any]:
    space = status.space
    top = space.top
    peers = []
    for p in status.peers:
        peers.append({
            "id": p.id, "address": p.address, "down": p.down, "quads": p.quads, "events": p.events,
            "subscriptions": p.subscriptions, "neighbours": sorted(p.neighbours), "counters": dict(p.counters),
            "zone": {
                "fractions": [[lo / top, hi / top] for lo, hi in p.zone.bounds],
                "text": [[coordinate_text(space, lo), coordinate_text(space, hi)] for lo, hi in p.zone.bounds],
            },
        })
    return {"algorithm": status.algorithm, "dimensions": list(DIMENSIONS), "space": space.to_dict(),
            "partition": partition_ok(status), "peers": peers,
            "totals": {"quads": sum(p.quads for p in status.peers), "events": sum(p.events for p in status.peers),
                       "subscriptions": sum(p.subscriptions for p in status.peers)},
            "gateway": gateway}
