"""One peer across its runtimes: the first, then a new peer on the same port each time one ends
superseded (its zone taken over by its replica while it was frozen or cut off, or moved by the
rebalancer), rejoining through the peers the last one knew.

`run_peer` is what the daemon, the in-process overlay and the tests run; each runtime
(peers/runtime/peer_runtime.py) receives it to run the other peers of its process (stand-ins,
annexes), which rejoin the same way.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import replace

import trio

from eventcloud.errors import EventCloudError
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Empty, OverlayInfo
from eventcloud.wire.ops import Op
from eventcloud.net.tls import client_context, server_context
from eventcloud.net.transport import TcpTransport, Transport
from eventcloud.overlay import Outcome, Rejoin, Zone
from eventcloud.sparql.taxonomy import Taxonomy
from peers.authority import Authority
from peers.config import PeerConfig
from peers.net import PeerAuth
from peers.process import PeerLauncher, ProcessPeers
from peers.runtime.lifecycle import REJOIN_FOR, Lifetime, StartedOnce, drop_stale, one_typed, port_taken
from peers.runtime.peer_runtime import PeerRuntime, RunningPeer
from peers.runtime.restart_checks import ask
from peers.store import PeerState, PeerStore, StateError

log = logging.getLogger(__name__)

__all__ = ["overlay_authority", "run_peer", "wall_clock_ms"]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)




async def run_peer(config: PeerConfig, transport: Transport | None = None, *, physical_ms=wall_clock_ms,
                   task_status: trio.TaskStatus[RunningPeer] = trio.TASK_STATUS_IGNORED,
                   process: ProcessPeers | None = None, state: PeerState | None = None,
                   store: PeerStore | None = None, taxonomy: Taxonomy | None = None,
                   join_annex: tuple[Zone, Zone] | None = None, annex_launcher: PeerLauncher | None = None,
                   authority: Authority | None = None) -> None:
    """Run one peer until cancelled; `task_status.started` gets a handle once it serves.

    `state` and `store` start an in-memory stand-in from a replica's copy (tests); with a data
    directory they come from its files. `taxonomy`: the class taxonomy to start with when the
    data directory holds none (a stand-in starts with its launcher's). `process` and
    `annex_launcher`: given to the other peers a process runs (stand-ins, annexes), None for its
    first peer. `authority`: the ownership authority (peers/authority); None: the peer decides
    ownership alone."""
    transport = transport or _tcp(config)
    once = StartedOnce(task_status)
    lifetime = Lifetime()
    process = process if process is not None else ProcessPeers()
    outcome: Outcome | None = await _run_once(
        PeerRuntime(config, transport, physical_ms, process, state, store, taxonomy, lifetime, join_annex=join_annex,
                    annex_launcher=annex_launcher, authority=authority, launch=run_peer), once)
    # Rejoin as a new peer, for as long as each runtime ends to rejoin (taken over, or moved by
    # the rebalancer): through the addresses the last one gave, keeping its port for clients.
    while isinstance(outcome, Rejoin):
        rejoin: Rejoin = outcome
        listen = config.listen
        if rejoin.listen and listen.endswith(":0"):  # running before: keep its port for its clients
            listen = listen.rpartition(":")[0] + ":" + rejoin.listen.rpartition(":")[2]
        addresses, at, after, outcome = rejoin.through, rejoin.at, rejoin.after, None
        if after > 0:
            with trio.move_on_after(after):
                await lifetime.stopping.wait()
        # The peers it knows may be moving or rejoining too: round after round, pausing longer
        # each time, for REJOIN_FOR seconds at most.
        give_up, pause = trio.current_time() + REJOIN_FOR, config.retry_window / 10
        while outcome is None and trio.current_time() < give_up:
            for address in addresses:
                if lifetime.stop_asked:
                    lifetime.stopped.set()
                    return
                fresh = replace(config, join=address, listen=listen)
                if config.data_dir is not None:   # each attempt is a new peer: never resume what the last one
                    drop_stale(config.data_dir)   # left (a join its splitter may have taken back)
                ident = "?"
                try:
                    attempt = PeerRuntime(fresh, transport, physical_ms, process, None, None, taxonomy, lifetime,
                                          join_at=at, rejoining=True, annex_launcher=annex_launcher,
                                          authority=authority, launch=run_peer)
                    ident = attempt.state.id
                    log.info("peer %s (listening on %s): rejoining through %s", ident, listen, address)
                    outcome = await _run_once(attempt, once)
                    if not isinstance(outcome, Rejoin):
                        lifetime.stopped.set()   # stopped: set already, unless a stop came before it served
                        return
                    break
                except EventCloudError as exc:
                    log.warning("peer %s: rejoining through %s failed: %s", ident, address, exc)
                except (OSError, BaseExceptionGroup) as exc:
                    # The port it kept for its clients was taken while it was away (the OS hands
                    # free ports to outgoing connections too): any free port, rather than no peer.
                    if listen == config.listen or not port_taken(exc):
                        raise
                    log.warning("port %s was taken while this peer was away; listening on another one",
                                listen.rpartition(":")[2])
                    listen = config.listen
                    break
            else:
                await trio.sleep(pause)
                pause = min(pause * 2, config.retry_window * 2)
        if outcome is None:
            lifetime.stopped.set()
            raise StateError("this peer left its zone to rejoin as a new peer (taken over by its replica, or "
                             "moved by the rebalancer), and no peer it knew lets it rejoin; start it with "
                             "--join ADDRESS of a live peer") from None


async def _run_once(runtime: PeerRuntime, once: StartedOnce) -> Outcome:
    """One runtime of a peer, to its end; the peer's own error, not its nursery's group, when it fails."""
    try:
        return await runtime.run(once)  # type: ignore[arg-type]
    except BaseExceptionGroup as group:  # a step failed inside the peer's nursery
        raise one_typed(group) from None


async def overlay_authority(config: PeerConfig, address: str, *, attempts: int = 5) -> str | None:
    """The ownership authority of the overlay the peer at `address` belongs to, as it tells
    joiners ("" : it names none); None if it does not answer (`attempts` times, a second apart)."""
    clock = HybridClock(wall_clock_ms, 0, max_ahead_ms=int(config.max_clock_offset * 2000))
    auth = PeerAuth(lambda: "joining", config.secret, config.admin_token, Counter(),
                    publish_policy=config.publish_policy)
    transport = _tcp(config)
    for attempt in range(attempts):
        reply = await ask(transport, clock, auth, address, Op.OVERLAY_INFO, Empty(), within=config.retry_window)
        if reply is not None:
            return OverlayInfo.from_wire(reply).authority
        if attempt + 1 < attempts:
            await trio.sleep(1)
    return None


def _tcp(config: PeerConfig) -> TcpTransport:
    """TCP, with TLS on every connection when the peer has a certificate."""
    if not config.tls:
        return TcpTransport()
    return TcpTransport(server_tls=server_context(config.tls_cert, config.tls_key),
                        client_tls=client_context(config.tls_ca), handshake_timeout=config.frame_timeout)
