"""The peer's state file (peer.json): saved after every change, told to the replica, retired on leaving.

Saving runs off the event loop (it fsyncs: `save_state` writes atomically) and stamps the
state with the hybrid clock's last time, so a restarted peer stamps what arrives after
everything it held; the replica's copy of the state follows. A peer that handed its zone
over retires the file (renamed, kept for inspection), so a restart cannot bring the zone back.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from eventcloud.wire.hlc import HybridClock
from peers.replication import OwnerReplication
from peers.store import Offload, PeerState, save_state

__all__ = ["StateFile"]


class StateFile:
    """Saves the peer's state (offloaded: it fsyncs), tells the replica, and retires a peer that left."""

    def __init__(self, state: PeerState, clock: HybridClock, data_dir: Path | None, offload: Offload,
                 replication: OwnerReplication) -> None:
        self.state = state
        self.clock = clock
        self.data_dir = data_dir
        self.offload = offload
        self.replication = replication

    async def save(self) -> None:
        """Save the state (and what its zone lifecycle holds: `Ready.save`, done once this returns)."""
        self.state.clock = self.clock.last
        ready = self.state.lifecycle.ready()
        if self.data_dir is not None:
            await self.offload.run(save_state, self.data_dir, self.state.to_json())  # a snapshot
        await self.replication.state_changed()
        self.state.lifecycle.advance(replace(ready, end=None))

    def retire(self) -> None:
        """This peer owns nothing any more: its state must not bring the zone back on a
        restart (the file is kept, renamed, for inspection). Its zone lifecycle ended already
        (`Left`, or a `Rejoin` after a move): the holding is empty."""
        if self.data_dir is not None:
            path = self.data_dir / "peer.json"
            if path.exists():
                path.rename(self.data_dir / "peer.json.left")
        self.data_dir = None
