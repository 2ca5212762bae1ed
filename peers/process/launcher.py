"""Peers this process runs besides its own: stand-ins and annexes, each served as a peer of its own.

A takeover does not merge the crashed peer's zone into ours (zones that do not form a box
cannot merge); the replica starts a *stand-in*: a full peer, in this process, on a new port,
with the crashed peer's id, zone, neighbours and data (the replica's copy), under the next
incarnation. Its neighbours learn its new address and incarnation; routing, multicast and
membership need nothing else. Stand-ins persist in `<data-dir>/standins/<id>/` and come back
with this process.

`ProcessPeers` is the set of peer ids one process runs: a peer never chooses one of them as
the replica of its zone (a crash of the process would take both copies).
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable

import trio

from eventcloud.errors import EventCloudError
from peers.store import Offload, load_state
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["PeerLauncher", "ProcessPeers"]


class ProcessPeers:
    """The peers running in this process (the top-level peer, its stand-ins and annexes)."""

    def __init__(self) -> None:
        #: id -> (PeerState, the quads it holds) of each peer serving a zone here
        self._peers: dict[str, tuple[Any, Callable[[], int]]] = {}
        self.process_id = uuid.uuid4().hex[:12]      # this process, as a host owning zones
        self._handing_on = False               # one of its annexes is leaving for another host
        self.adopting = trio.Semaphore(1)      # one annex started at a time
        self._warned_open = False  # the "no cluster secret" warning is said once per process

    def first_open_warning(self) -> bool:
        """True once per process: the first of its peers to find no cluster secret warns."""
        first, self._warned_open = not self._warned_open, True
        return first

    def begin_hand_on(self) -> bool:
        """Whether one of its annexes may start handing its zone on now (one at a time per
        process); `end_hand_on` when it is done, whatever the outcome."""
        if self._handing_on:
            return False
        self._handing_on = True
        return True

    def end_hand_on(self) -> None:
        self._handing_on = False

    @property
    def ids(self) -> set[str]:
        return set(self._peers)

    def __call__(self) -> set[str]:
        return self.ids

    def add(self, state: Any, held: Callable[[], int]) -> None:
        self._peers[state.id] = (state, held)

    def discard(self, state: Any) -> None:
        if state.id in self._peers and self._peers[state.id][0] is state:
            del self._peers[state.id]

    def load(self) -> tuple[int, str]:
        """The host's load: the quads all its peers hold, and the address of the one holding most."""
        loads = [(held(), state.address) for state, held in self._peers.values()]
        return sum(quads for quads, _ in loads), max(loads, default=(0, ""))[1]

    def most_crowded_empty_annex(self) -> str | None:
        """The id of the empty annex with the most neighbours (the one a host over its cap hands on)."""
        empty = [(len(state.neighbours), ident) for ident, (state, held) in self._peers.items()
                 if state.annex and held() == 0]
        return max(empty)[1] if empty else None

    def neighbours(self) -> set[str]:
        """The host's neighbours: every peer next to one of its zones, its own excepted."""
        found: set[str] = set()
        for state, _ in self._peers.values():
            found.update(state.neighbours)
        return found - self._peers.keys()


#: Starts a peer in a nursery: (data_dir, state, store, task_status) -> runs until cancelled.
Launcher = Callable[..., Awaitable[None]]


class PeerLauncher:
    def __init__(self, launch: Launcher, data_dir: Path | None, tasks: TaskStarter, offload: Offload,
                 folder: str = "standins") -> None:
        self._launch = launch
        self.tasks = tasks       # the peers it starts run there
        self.offload = offload   # reading their files (inline under a test's mock clock: no thread hop)
        self.data_dir = data_dir / folder if data_dir is not None else None
        self.running: dict[str, Any] = {}     # id -> RunningPeer

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Bring back the peers persisted in its folder, then serve until the peer stops."""
        if self.data_dir is not None and self.data_dir.is_dir():
            for directory in sorted(self.data_dir.iterdir()):
                if (directory / "peer.json").exists():
                    try:
                        state = await self.offload.run(load_state, directory)
                        if state is None or not state.has_zone:   # it never served: nothing to restore
                            log.warning("peer in %s never served a zone: not started", directory)
                            continue
                        await self.start(data_dir=directory)
                    except EventCloudError as exc:
                        log.warning("peer in %s did not start: %s", directory, exc)
        task_status.started()
        await trio.sleep_forever()

    def standin_dir(self, ident: str) -> Path | None:
        return self.data_dir / ident if self.data_dir is not None else None

    async def start(self, **peer: Any) -> Any:
        """Start a peer (`data_dir` to restore, or `state` and `store` in memory, or what the
        launcher takes); its handle."""
        if not self.tasks.open:
            raise EventCloudError("this peer is stopping: it cannot start another")
        running = await self.tasks.start(self._run, peer)
        self.running[running.id] = running
        return running

    async def _run(self, peer: dict[str, Any], *, task_status: trio.TaskStatus[Any]) -> None:
        try:
            await self._launch(task_status=task_status, **peer)
        finally:
            for key, running in list(self.running.items()):
                if running.stopped.is_set():
                    del self.running[key]

    def holds(self, ident: str) -> Any | None:
        """The stand-in serving `ident` here, if any."""
        return self.running.get(ident)
