"""Random overlays for the membership-plan tests: guillotine partitions and exact tables."""

from __future__ import annotations

import random

from eventcloud.overlay import CoordinateSpace, Neighbour, Zone

SPACE = CoordinateSpace(precision=4)
WHOLE = Zone(SPACE.whole_space())


def neighbour_table(zones: dict[str, Zone], own: str) -> dict[str, Neighbour]:
    """Zone `own`'s exact table among `zones`."""
    return {k: Neighbour(f"{k}:1", z) for k, z in zones.items() if k != own and zones[own].is_neighbour(z)}


def guillotine(rng: random.Random, n: int) -> dict[str, Zone]:
    """`n` zones made by cutting random zones at random places (how joins build an overlay)."""
    zones = {"0": WHOLE}
    while len(zones) < n:
        key = rng.choice(sorted(zones))
        zone = zones[key]
        dim = rng.randrange(4)
        lo, hi = zone.bounds[dim]
        if hi - lo < 2:
            continue
        zones[key], zones[str(len(zones))] = zone.split_at(dim, rng.randrange(lo + 1, hi))
    return zones
