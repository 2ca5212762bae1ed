"""Where joins and leaves are decided: one transaction each at the ownership authority.

A split granted to a newcomer stands or is undone, and a leaver's zone goes to its heir or
stays, by whichever of the two sides' transactions comes first (`peers.authority.Ownership`:
`commit_split` / `undo_split`, `absorb` / `settle_leave`). Each side, in doubt, asks the
authority rather than the other peer, which may be dead, deposed or restarted without the
answer it sent. `DecidedAlone` is the overlay without an authority, where the two peers agree
between them (`None` answers: decide as before).
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Protocol

import trio

from eventcloud.errors import AuthorityUnreachable
from eventcloud.overlay import Zone

log = logging.getLogger(__name__)

__all__ = ["ASK_AGAIN_EVERY", "DecidedAlone", "Decisions", "decided"]

#: How often an undecided join or leave (the authority unreachable) is asked about again.
ASK_AGAIN_EVERY = 1.0


class Decisions(Protocol):
    """The ownership authority's side of joins and leaves (`peers.authority.Ownership`)."""

    async def begin_leave(self) -> str: ...
    async def absorb(self, leaver: str, incarnation: int, token: str = "", merged: Zone | None = None) -> None: ...
    async def settle_leave(self, token: str) -> str | None: ...
    async def begin_split(self, newcomer: str) -> None: ...
    async def commit_split(self, newcomer: str, kept: Zone, granted: Zone) -> str: ...
    async def undo_split(self, newcomer: str) -> str | None: ...
    async def split_committed(self, newcomer: str) -> bool: ...


class DecidedAlone:
    """No authority: the peers of a join or a leave agree between them (a lone peer's overlay
    started with `--authority none`, in-process tests written before the authority)."""

    async def begin_leave(self) -> str:
        return ""

    async def absorb(self, leaver: str, incarnation: int, token: str = "", merged: Zone | None = None) -> None:
        return None

    async def settle_leave(self, token: str) -> str | None:
        return None

    async def begin_split(self, newcomer: str) -> None:
        return None

    async def commit_split(self, newcomer: str, kept: Zone, granted: Zone) -> str:
        return "committed"

    async def undo_split(self, newcomer: str) -> str | None:
        return None   # the splitter looks for the newcomer itself

    async def split_committed(self, newcomer: str) -> bool:
        return False


async def decided(ask: Callable[[], Awaitable[Any]], what: str, ident: str) -> Any:
    """`ask()`'s answer, asked again while the authority is unreachable: a join or leave
    undecided there is decided nowhere else (either side guessing could make two owners of one
    zone), and an owner cut off from it acknowledges no write meanwhile anyway (its fence)."""
    waited = 0.0
    while True:
        try:
            return await ask()
        except AuthorityUnreachable as exc:
            if waited % 30 == 0:
                log.warning("peer %s: %s waits for the ownership authority (%s)", ident, what, exc)
            await trio.sleep(ASK_AGAIN_EVERY)
            waited += ASK_AGAIN_EVERY
