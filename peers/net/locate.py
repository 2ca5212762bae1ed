"""Where a peer serves now: a restarted peer, or a stand-in, serves the same id at another
address. The ownership authority, when there is one, holds the address its server registered;
the neighbours learn it from its announcement."""

from __future__ import annotations

from typing import Awaitable, Callable

import trio

from eventcloud.errors import EventCloudError
from eventcloud.wire.messages import Empty, Table
from eventcloud.wire.ops import Op
from peers.net.router import Router
from peers.store import PeerState

__all__ = ["Locate", "addresses_of"]


Locate = Callable[[str], Awaitable["tuple[str, int] | None"]]


async def addresses_of(router: Router, state: PeerState, ident: str, known: str, window: float,
                       locate: Locate | None = None) -> list[str]:
    """Where peer `ident` may serve now: `known`, then where the authority says its server
    registered (`locate`: `Ownership.server_of`), then what our table and our neighbours' tables
    say (asked at once, each for `window` seconds at most)."""
    found = [known]
    if locate is not None:
        with trio.move_on_after(window):
            registered = await locate(ident)
            if registered is not None:
                found.append(registered[0])
    mine = state.neighbours.get(ident)
    if mine is not None:
        found.append(mine.address)
    said: list[str] = []

    async def ask(address: str) -> None:
        with trio.move_on_after(window):
            try:
                table = Table.from_wire(await router.call(address, Op.TABLE, Empty()))
            except EventCloudError:
                return
            if table.me[0] == ident:
                said.append(table.me[1].address)
            elif ident in table.neighbours:
                said.append(table.neighbours[ident].address)

    async with trio.open_nursery() as nursery:
        for key, neighbour in list(state.neighbours.items()):
            if key != ident:
                nursery.start_soon(ask, neighbour.address)
    return list(dict.fromkeys(found + said))
