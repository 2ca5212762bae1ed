"""`GET /status` as JSON: the overlay's peers with their zones (as fractions of each axis, for
drawing, and as the strings they start and end at, for reading), stored quads, events and
subscriptions, message counters, and the gateway's own figures."""

from __future__ import annotations

from typing import Any

from eventcloud.overlay.coordinates import DIMENSIONS
from eventcloud.overlay.labels import coordinate_text
from eventcloud.overlay.routing import partition_check
from eventcloud.wire.messages import Status

__all__ = ["status_json", "partition_ok"]


def partition_ok(status: Status) -> bool:
    """Do the peers' zones partition the space exactly (volumes add up, none overlap)?"""
    return partition_check(status.space.whole_space(), [p.zone.bounds for p in status.peers])[0]


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
            # events and subscriptions are held by several peers each: the totals add what each
            # peer counts once overlay-wide (claims, subscriptions homed in its zone)
            "totals": {"quads": sum(p.quads for p in status.peers),
                       "events": sum(p.events_claimed for p in status.peers),
                       "subscriptions": sum(p.subscriptions_homed for p in status.peers)},
            "gateway": gateway}
