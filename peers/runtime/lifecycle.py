"""What outlives one runtime of a peer: the runtime (peers/runtime/peer_runtime.py) runs a peer
until its zone lifecycle ends (eventcloud/overlay/lifecycle.py: stopped, left, or to rejoin);
a peer that ends to rejoin (its zone taken over while it was away, or moved by the rebalancer)
drops its stale copy and rejoins as a new peer, keeping its port, its caller's handle and its
stop request across runtimes.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import Any

import trio

from eventcloud.errors import EventCloudError
from eventcloud.overlay import Left, Outcome, Rejoin, Stopped
from peers.store import PeerState

__all__ = ["REJOIN_FOR", "StartedOnce", "Lifetime", "drop_stale", "why_ended", "told", "port_taken", "one_typed"]


#: Seconds a peer rejoining as a new peer tries the addresses it knows before it gives up.
REJOIN_FOR = 120.0


class StartedOnce:
    """`task_status` for a peer that may rejoin after it started: the caller hears once."""

    def __init__(self, task_status: trio.TaskStatus[Any]) -> None:
        self._task_status = task_status
        self.done = False

    def started(self, value: Any) -> None:
        if not self.done:
            self.done = True
            self._task_status.started(value)


def drop_stale(data_dir: Path) -> None:
    """The copy a superseded peer held of its own zone is stale: keep its state file for
    inspection, drop its store. The replicas it held for others stay, and so do the stand-ins and
    annexes it hosted: they are other peers' zones, not its own, and the peer's next runtime
    loads them again. A replica copy may be the only one of a zone whose owner crashed meanwhile
    (the authority names it, under the id it was taken with, as the one that may claim the zone:
    `peers/replication/keeper.py`); deleting it lost that zone for good, and deleting the
    stand-ins made every move of this peer a crash of those zones."""
    state = data_dir / "peer.json"
    if state.exists():
        state.rename(data_dir / "peer.json.superseded")
    shutil.rmtree(data_dir / "store", ignore_errors=True)


class Lifetime:
    """What outlives one runtime of a peer: a stop asked of whichever runtime is current, and
    `stopped`, set when the peer ends (not when it steps down to rejoin as a new peer)."""

    def __init__(self) -> None:
        self.scope: trio.CancelScope | None = None
        self.state: PeerState | None = None   # the current runtime's PeerState (a moved peer has a new one)
        self.store: Any = None                # and its store (tests read what a moved peer holds)
        self.stopped = trio.Event()
        self.stopping = trio.Event()   # a stop was asked: also wakes a peer waiting to rejoin

    def runtime(self, state: PeerState, store: Any) -> trio.CancelScope:
        """A runtime of the peer begins, with this state and store: the scope that stops it
        (cancelled already if a stop was asked before it began)."""
        self.state, self.store = state, store
        self.scope = trio.CancelScope()
        if self.stop_asked:
            self.scope.cancel()
        return self.scope

    @property
    def stop_asked(self) -> bool:
        return self.stopping.is_set()

    def cancel(self) -> None:
        self.stopping.set()
        if self.scope is not None:
            self.scope.cancel()


# --- how a runtime ended ---------------------------------------------------------------------

def why_ended(exc: BaseException) -> str:
    """Why a runtime failed, for its log line (a group's errors joined)."""
    if isinstance(exc, BaseExceptionGroup):   # each cause once: a cancel reaches every task
        return "; ".join(dict.fromkeys(why_ended(e) for e in exc.exceptions))
    return f"{type(exc).__name__}: {exc}"


def told(outcome: Outcome | None) -> str:
    """How a runtime ended (its zone lifecycle's outcome), for its log line."""
    if isinstance(outcome, Rejoin):
        return f"{outcome.why}; rejoining as a new peer"
    if isinstance(outcome, Left):
        return "handed its zone over"
    if isinstance(outcome, Stopped):
        return outcome.reason
    return "ended"


def port_taken(exc: BaseException) -> bool:
    """Whether `exc` (or one of a group's) is a listen refused because the port is in use."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(lambda e: isinstance(e, OSError) and e.errno == errno.EADDRINUSE) is not None
    return isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE


def one_typed(group: BaseExceptionGroup) -> BaseException:
    """The peer's own error out of its nursery's group (e.g. a refused join), or the group itself
    when something else failed too."""
    typed, rest = group.split(EventCloudError)
    # the condition sees the nested groups too: true for a group would keep the whole of it
    if typed is not None and (rest is None or rest.subgroup(
            lambda e: not isinstance(e, (trio.Cancelled, BaseExceptionGroup))) is None):
        while isinstance(typed, BaseExceptionGroup):
            typed = typed.exceptions[0]
        return typed
    return group
