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

from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["ForeignQuads"]


class ForeignQuads:
    def __init__(self) -> None:
        self._joins: dict[str, Any] = {}   # splits under way here, by newcomer id (membership's records)
        #: writes under way after which the store holds foreign quads no more (a committed
        #: split's drop, a take-over's install before the zones merge)
        self._writes = 0
        self.epoch = 0

    @property
    def held(self) -> bool:
        """Does the store hold quads outside this peer's zone right now?"""
        return bool(self._joins) or self._writes > 0

    def join_began(self, ident: str, join: Any) -> None:
        """A split for newcomer `ident` took effect here: the quads it takes are foreign until
        the join ends (committed, then dropped; or undone)."""
        self._joins[ident] = join
        self.epoch += 1

    def join(self, ident: str) -> Any | None:
        """The record of the split under way for newcomer `ident`, if any."""
        return self._joins.get(ident)

    def join_ended(self, ident: str) -> Any | None:
        """The split for `ident` ended (committed or undone); its record, if it was under way."""
        return self._joins.pop(ident, None)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """A write under way after which the store holds the foreign quads no more (a committed
        split's drop) or holds them as its own (a take-over's install, the zones merged)."""
        self._writes += 1
        self.epoch += 1
        try:
            yield
        finally:
            self._writes -= 1
