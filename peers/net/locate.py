"""Where a peer serves now: a restarted peer, or a stand-in, serves the same id at another
address, and its neighbours learn that address first (from its announcement)."""

from __future__ import annotations

import trio

from eventcloud.errors import EventCloudError
from eventcloud.wire.messages import Empty, Table
from eventcloud.wire.ops import Op
from peers.net.router import Router
from peers.store import PeerState

__all__ = ["addresses_of"]


async def addresses_of(router: Router, state: PeerState, ident: str, known: str, window: float) -> list[str]:
    """Where peer `ident` may serve now: `known`, then what our table and our neighbours' tables
    say (their tables asked at once, each for `window` seconds at most)."""
    found = [known]
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
