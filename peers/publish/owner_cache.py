"""Where recent deliveries found the owners: an entry peer's shortcut past the greedy route.

An entry peer routes each quad greedily, neighbour to neighbour. The owners that stored the
quads answer with their zones (`Delivered.zones`), so the next quads falling in one of those
zones go straight to its owner: one message where the route took one per hop. Entries are
hints. A zone that has split or moved since costs the hops its former owner then forwards
(peers on the way route greedily and never from a cache, so a stale entry cannot make a loop),
and an owner that cannot be reached is forgotten. Bounded: the most recently reported zones,
`limit` at most; a zone reported anew evicts every cached zone it overlaps (zones partition
the space, so those are stale).
"""

from __future__ import annotations

from collections import OrderedDict

from eventcloud.overlay import Point, Zone

__all__ = ["OwnerCache"]


class OwnerCache:
    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._zones: OrderedDict[str, Zone] = OrderedDict()

    def __len__(self) -> int:
        return len(self._zones)

    def __contains__(self, address: object) -> bool:
        return address in self._zones

    def learn(self, zones: dict[str, Zone], me: str) -> None:
        """Owners' zones as a delivery reported them (this peer's own is not kept)."""
        for address, zone in zones.items():
            if address == me:
                continue
            if self._zones.get(address) != zone:
                for other, known in list(self._zones.items()):
                    if other != address and known.intersects(zone.bounds):
                        del self._zones[other]
                self._zones[address] = zone
            self._zones.move_to_end(address)
        while len(self._zones) > self.limit:
            self._zones.popitem(last=False)

    def owner_of(self, point: Point) -> str | None:
        """The address of the owner last reported for `point`'s zone, if any."""
        for address, zone in self._zones.items():
            if zone.contains(point):
                return address
        return None

    def forget(self, address: str) -> None:
        self._zones.pop(address, None)
