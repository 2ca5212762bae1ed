"""What a runtime asks other peers before it serves, on connections of its own (its router does
not run yet): the overlay a peer belongs to, and whether a restored zone was taken over while
this peer was down (the authority's epoch first, when there is one; then its replica and a few
neighbours)."""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

import trio

from eventcloud.errors import EventCloudError
from eventcloud.net.rpc import open_connection
from eventcloud.net.transport import Transport
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Empty, OverlayInfo, ReplicaOf, ReplicaStatus, Table
from eventcloud.wire.ops import Op
from peers.authority import Ownership
from peers.membership import decided
from peers.net import PeerAuth
from peers.store import PeerState

log = logging.getLogger(__name__)

__all__ = ["Ask", "ask", "overlay_of", "taken_over_while_down"]

#: One request to `address`: its reply, or None if it fails.
Ask = Callable[[str, Op, Any], Awaitable["dict[str, Any] | None"]]


async def ask(transport: Transport, clock: HybridClock, auth: PeerAuth, address: str, op: Op, body: Any, *,
              within: float) -> dict[str, Any] | None:
    """One request on a connection of its own; None if it fails or takes longer than `within`."""
    try:
        with trio.fail_after(within):
            stream = await transport.connect(address)
            async with open_connection(stream, clock, name=f"ask->{address}") as conn:
                await auth.prove(conn)
                return await conn.call(op, body)
    except (EventCloudError, trio.TooSlowError):
        return None


async def overlay_of(ask_: Ask, address: str) -> str | None:
    """The id of the overlay the peer at `address` belongs to; None if it does not answer."""
    reply = await ask_(address, Op.OVERLAY_INFO, Empty())
    return OverlayInfo.from_wire(reply).overlay if reply is not None else None


async def taken_over_while_down(state: PeerState, ownership: Ownership, ask_: Ask) -> list[str] | None:
    """The addresses to rejoin through if another peer serves this restored zone at a newer
    incarnation; None if nobody took it over."""
    epoch = await ownership.epoch_of(state.id)   # the authority's word, when there is one
    newer = epoch is not None and epoch > state.incarnation
    rejoin = [n.address for n in state.neighbours.values()]
    heir = await decided(ownership.withdraw_leave, "its restart (a leave it began may be undecided)", state.id)
    if heir:   # it left before this restart, and was stopped before it saved that: its heir serves the zone
        # (a leave it began and never saw decided is withdrawn above: no heir takes the zone after)
        log.warning("peer %s: the ownership authority says peer %s took its zone over in a leave", state.id, heir)
        return rejoin
    if state.replica is not None and not newer:
        reply = await ask_(state.replica[1], Op.REPLICA_STATUS, ReplicaOf(state.id, state.incarnation))
        if reply is not None:
            status = ReplicaStatus.from_wire(reply)
            newer = status.taken_over and status.incarnation > state.incarnation
            if status.address:
                rejoin.insert(0, status.address)
    for address in list(rejoin)[:3]:
        if newer:
            break
        reply = await ask_(address, Op.TABLE, Empty())
        if reply is not None:
            mine = Table.from_wire(reply).neighbours.get(state.id)
            newer = mine is not None and mine.incarnation > state.incarnation
    return rejoin if newer else None
