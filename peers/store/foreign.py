"""Quads in this peer's store that another peer answers for, while a zone changes hands.

During a split the store still holds the newcomer's quads (until the commit's drop applies:
the newcomer answers for them once the commit returns), and while a leaving neighbour's zone is
installed its quads are here before the zones merge (the leaver answers for them until then).
A reader that counts or gathers (status, COUNT, a pushed-down query) then reads this zone's own
quads only, or two peers would count the same quads. Membership marks the changes here;
queries read them. `epoch` counts the times the store began to hold foreign quads: a reader that
saw none before and after its evaluation, with the same epoch, read none.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ForeignQuads"]


class ForeignQuads:
    def __init__(self) -> None:
        #: joins under way on this peer, by newcomer id (membership keeps its pending joins here)
        self.joins: dict[str, Any] = {}
        #: writes under way after which the store holds foreign quads no more (a committed split's
        #: drop, a take-over's install before the zones merge)
        self.writes = 0
        self.epoch = 0

    @property
    def held(self) -> bool:
        """Does the store hold quads outside this peer's zone right now?"""
        return bool(self.joins) or self.writes > 0
