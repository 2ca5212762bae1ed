"""Stand-in peers: zones this process took over from crashed peers, each served as a peer of its own.

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
from pathlib import Path
from typing import Any, Awaitable, Callable

import trio

from eventcloud.errors import EventCloudError

log = logging.getLogger(__name__)

__all__ = ["Host", "ProcessPeers"]


class ProcessPeers:
    """Ids of the peers running in this process (the top-level peer and its stand-ins)."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.warned_open = False  # the "no cluster secret" warning is said once per process

    def __call__(self) -> set[str]:
        return self.ids


#: Starts a peer in a nursery: (data_dir, state, store, task_status) -> runs until cancelled.
Launcher = Callable[..., Awaitable[None]]


class Host:
    def __init__(self, launch: Launcher, data_dir: Path | None) -> None:
        self._launch = launch
        self.data_dir = data_dir / "standins" if data_dir is not None else None
        self.running: dict[str, Any] = {}     # id -> RunningPeer
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self.data_dir is not None and self.data_dir.is_dir():
                for directory in sorted(self.data_dir.iterdir()):
                    if (directory / "peer.json").exists():
                        try:
                            await self.start(data_dir=directory)
                        except EventCloudError as exc:
                            log.warning("stand-in in %s did not start: %s", directory, exc)
            task_status.started()
            await trio.sleep_forever()

    def standin_dir(self, ident: str) -> Path | None:
        return self.data_dir / ident if self.data_dir is not None else None

    async def start(self, **peer: Any) -> Any:
        """Start a stand-in (`data_dir` to restore, or `state` and `store` in memory); its handle."""
        if self._nursery is None:
            raise EventCloudError("this peer is stopping: it cannot start a stand-in")
        running = await self._nursery.start(self._run, peer)
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
