"""The daemon commands: `eventcloud peer` (one peer in the foreground) and `eventcloud cluster`
(N local peer processes). The only part of the CLI that imports the daemon (`peers`)."""

from __future__ import annotations

import argparse
import errno
import gc
import logging
import os
import signal
import stat
import sys
import time
from functools import partial
from typing import Any, Callable

import trio

from eventcloud.cli.credentials import CredentialError, read_admin_token, read_publish_policy, read_secret
from eventcloud.cli.render import root_cause
from eventcloud.errors import EventCloudError

__all__ = ["peer", "cluster"]


def operator_knobs(args: argparse.Namespace) -> dict:
    """PeerConfig knobs of the operator options."""
    return {"operators": tuple(args.operators), "operator_plugins": not args.no_operator_plugins,
            "evaluation_order": args.evaluation_order, "operator_budget": args.operator_budget,
            "statistics_file": args.statistics}


def operator_flags(args: argparse.Namespace) -> list[str]:
    """The same options, passed on to every peer a local cluster starts."""
    flags = [f for module in args.operators for f in ("--operators", module)]
    flags += ["--evaluation-order", args.evaluation_order, "--operator-budget", str(args.operator_budget)]
    if args.no_operator_plugins:
        flags.append("--no-operator-plugins")
    if args.statistics is not None:
        flags += ["--statistics", str(args.statistics)]
    return flags


async def _authority(args: argparse.Namespace, config: Any, hosting: trio.Nursery) -> Any:
    """The peer's ownership authority: the etcd named; none with `--authority none`; else the
    first peer of an overlay (no `--join`) hosts one (peers/authority/hosted.py) and a joiner uses
    the one the peer it joins names (remembered in its data directory for its restarts)."""
    from peers.authority import (
        EtcdAuthority, authority_token, learned_url, remember_url, serve_hosted_authority,
    )
    from peers.config import advertised_address
    from peers.runtime import overlay_authority

    log = logging.getLogger("eventcloud.peer")
    alone = ("no ownership authority (%s): this peer decides alone when to take a zone over, so a network "
             "partition can depose a live owner (docs/reliability.md)")
    token = authority_token(config.secret)
    if args.authority == "none":
        log.warning(alone, "--authority none")
        return None
    if args.authority is not None:
        return EtcdAuthority(args.authority)
    if not args.join:
        host = config.listen.rpartition(":")[0] or "127.0.0.1"
        url = await hosting.start(serve_hosted_authority, config.data_dir, host, token)
        # the peer's advertised host (with or without its port) at the authority's own port
        host_told = (config.advertise.rpartition(":")[0] or config.advertise) if config.advertise else None
        advertised = "http://" + advertised_address(url.partition("://")[2], host_told)
        log.warning("this peer hosts the overlay's ownership authority at %s (peers joining it use it): while "
                    "this peer is down no zone changes owner, and its data directory holds the authority; for more, "
                    "run etcd and name it with --authority (docs/reliability.md)", advertised)
        return EtcdAuthority(url.replace("0.0.0.0", "127.0.0.1"), token=token, advertised=advertised)
    url = await overlay_authority(config, args.join)
    if url is None:
        url = learned_url(config.data_dir)
    if not url:
        log.warning(alone, f"the overlay at {args.join} names none")
        return None
    remember_url(config.data_dir, url)
    log.info("ownership authority: %s (named by the overlay at %s)", url, args.join)
    return EtcdAuthority(url, token=token if url.startswith("http://") else None)


def peer(args: argparse.Namespace) -> int:
    from eventcloud.overlay import CoordinateSpace
    from peers.config import PeerConfig
    from peers.runtime import run_peer
    from peers.runtime import describe_peer, serve_task_dumps

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # every renewal with the ownership authority is an HTTP request: httpx's own line for each
    # would drown --log-level info (the authority's failures are logged by peers.authority)
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))
    # rdflib logs a traceback for each literal of a query it cannot cast (ill-typed, or past
    # int()'s digit limit); SPARQL keeps such a literal as it is, which is what happens: noise
    logging.getLogger("rdflib.term").setLevel(logging.ERROR)
    try:
        config = PeerConfig(listen=args.listen, join=args.join, data_dir=args.data_dir, algorithm=args.algorithm,
                            space=CoordinateSpace(mapping=args.mapping), advertise=args.advertise, seed=args.seed,
                            replicas=args.replicas, fsync=not args.no_fsync, failure_timeout=args.failure_timeout,
                            lease_ttl=args.lease_ttl,
                            secret=read_secret(args.secret_file), admin_token=read_admin_token(args.admin_token_file),
                            publish_policy=read_publish_policy(args.publish_policy),
                            max_connections=args.max_connections, max_per_address=args.max_per_address,
                            reserved_connections=args.reserved_connections,
                            first_request_timeout=args.first_request_timeout,
                            tls_cert=args.tls_cert, tls_key=args.tls_key, tls_ca=args.tls_ca,
                            retain_count=args.retain_count, retain_bytes=args.retain_bytes,
                            lease_max=args.lease_max, lease_default=min(86_400.0, args.lease_max),
                            max_clock_offset=args.max_clock_offset,
                            rebalance_every=args.rebalance_every, rebalance_ratio=args.rebalance_ratio,
                            rebalance_min_quads=args.rebalance_min_quads,
                            rebalance_make_room=args.rebalance_make_room,
                            neighbour_limit=args.neighbour_limit, host_neighbour_cap=args.host_neighbour_cap,
                            annex_every=args.annex_every,
                            query_budget=args.query_budget, query_memory_mb=args.query_memory,
                            **operator_knobs(args))
    except CredentialError as exc:
        print(f"eventcloud peer: {exc.message}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"eventcloud peer: {exc}", file=sys.stderr)
        return 2
    if args.authority not in (None, "none"):
        from peers.authority import parse_authority

        try:
            parse_authority(args.authority)
        except (ValueError, EventCloudError) as exc:
            print(f"eventcloud peer: --authority: {exc}", file=sys.stderr)
            return 2
    if args.stop_with_stdin and not stdin_is_a_pipe():
        print("eventcloud peer: --stop-with-stdin needs standard input to be a pipe or a socket (the peer "
              "stops when its other end closes); here it is a file or a terminal", file=sys.stderr)
        return 2

    async def serve() -> None:
        async with trio.open_nursery() as hosting:   # a hosted authority outlives the peer it serves
            authority = await _authority(args, config, hosting)
            try:
                await serve_with(authority)
            finally:
                if authority is not None:
                    with trio.CancelScope(shield=True):
                        await authority.aclose()
                hosting.cancel_scope.cancel()

    async def serve_with(authority: Any) -> None:
        async with trio.open_nursery() as nursery:
            running = await nursery.start(partial(run_peer, config, authority=authority))
            print(f"eventcloud peer {running.id}: listening on {running.address} "
                  f"({running.state.algorithm})", flush=True)

            async def on_signal() -> None:
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        running.stop()
                        return

            nursery.start_soon(on_signal)
            if args.stop_with_stdin:
                nursery.start_soon(stop_when_stdin_closes, running.stop)
            await nursery.start(serve_task_dumps, lambda: describe_peer(running.current))
            await running.stopped.wait()  # a signal, or `eventcloud leave`
            nursery.cancel_scope.cancel()

    # A peer holds many long-lived objects (subscriptions, their index, recent events): with the
    # default young-generation threshold (700) the collector runs so often that it is a large
    # part of every subscribe; 50,000 made building and indexing a subscription 1.5-1.7x
    # cheaper. What a young collection then mostly walks is requests still in flight (a
    # subscribe_many's decoded items), once per collection: 200,000 walks them a quarter as
    # often (+6% subscribes/s; a young collection is 10-40 ms). The middle generation is still
    # collected every ~1 M net allocations, as before (docs/pubsub.md, "Registering subscriptions").
    gc.set_threshold(200_000, 5, 100)
    try:
        trio.run(serve)
    except Exception as exc:  # startup failures: bad join address, corrupt state, port in use
        cause = root_cause(exc)
        if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
            print(f"eventcloud peer: cannot listen on {args.listen}: address already in use (another peer or "
                  f"program serves there; pick another port, or port 0 for any free one)", file=sys.stderr)
        elif isinstance(cause, OSError) and cause.errno == errno.EADDRNOTAVAIL:
            print(f"eventcloud peer: cannot listen on {args.listen}: no such address on this machine",
                  file=sys.stderr)
        elif not isinstance(cause, (EventCloudError, OSError)):  # a bug: keep what is needed to fix it
            logging.getLogger("eventcloud.peer").error("the peer stopped on an unexpected error", exc_info=exc)
            print(f"eventcloud peer: internal error (please report it, with the traceback above): "
                  f"{type(cause).__name__}: {cause}", file=sys.stderr)
        else:
            print(f"eventcloud peer: {cause}", file=sys.stderr)
        return 1
    return 0




def stdin_is_a_pipe() -> bool:
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):  # closed, or replaced by an object without a descriptor
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def stop_when_stdin_closes(stop: Callable[[], None]) -> None:
    """Call `stop` once standard input reaches its end: the process holding the pipe's other end
    (the cluster that started this peer) has closed it, or died, however it died. What is
    written to the pipe is read and ignored."""
    stream = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stream:
        while await stream.receive_some(4096):
            pass
    logging.getLogger("eventcloud.peer").warning("standard input closed (the process that started this peer "
                                                 "has gone): stopping")
    stop()


def cluster(args: argparse.Namespace) -> int:
    from peers.supervisor import ClusterError, LocalCluster

    stop = {"now": False}

    def on_signal(signum: int, frame: Any) -> None:
        stop["now"] = True

    # before anything starts: a Ctrl-C while the authority started (a KeyboardInterrupt there)
    # left its thread behind, and the command ended killed by SIGINT after saying "interrupted"
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cluster = LocalCluster(args.peers, data_dir=args.data_dir, port=args.port, algorithm=args.algorithm,
                           mapping=args.mapping, host=args.host, replicas=args.replicas, fsync=not args.no_fsync,
                           secure=not args.open, tls=(args.tls_cert, args.tls_key, args.tls_ca)
                           if args.tls_cert else None, authority=args.authority or "local",
                           extra=operator_flags(args) + ([] if args.rebalance_every is None
                                                         else ["--rebalance-every", str(args.rebalance_every)]))

    def started(index: int, total: int) -> None:
        print(f"  peer {index}/{total} up", file=sys.stderr, flush=True)
        if stop["now"]:
            raise ClusterError(f"interrupted while starting ({index} of {total} peers were up; all stopped)")

    try:
        cluster.start(progress=started)
    except ClusterError as exc:
        cluster.stop()
        print(f"eventcloud cluster: {exc}", file=sys.stderr)
        return 130 if stop["now"] else 1
    print(cluster.entry, flush=True)
    peers = f"{args.peers} peer{'s' if args.peers != 1 else ''}"
    print(f"eventcloud cluster: {peers} ({args.algorithm}) at {', '.join(cluster.addresses)}; Ctrl-C stops them",
          file=sys.stderr, flush=True)
    if cluster.secure:
        print(f"eventcloud cluster: cluster secret in {cluster.secret_file} (more peers: eventcloud peer "
              f"--secret-file {cluster.secret_file} --join {cluster.entry} …); admin token for leave and delete "
              f"in {cluster.admin_token_file} (--admin-token-file)", file=sys.stderr, flush=True)
    reported: dict[int, object] = {}  # peer index -> the process whose exit was reported
    restarts: dict[int, list[float]] = {}   # peer index -> when it was restarted lately
    try:
        while not stop["now"]:
            time.sleep(0.2)
            for index, proc in enumerate(cluster.processes):
                if proc.poll() is not None and not stop["now"] and reported.get(index) is not proc:
                    reported[index] = proc  # once per process: a peer restarted later is watched again
                    _restart(cluster, index, proc.returncode, restarts, ClusterError)
    finally:
        cluster.stop()
    return 0


#: a peer that exits this often within RESTART_WINDOW seconds is not restarted again
RESTARTS_ALLOWED, RESTART_WINDOW = 3, 60.0


def _restart(cluster: Any, index: int, code: int, restarts: dict[int, list[float]], failed: type) -> None:
    """A peer of the cluster exited: restart it with its command (its data directory, its port
    when free: the address the cluster printed keeps working), unless it left the overlay (exit
    0) or keeps exiting (then say so: its own messages above tell why)."""
    where = f"peer {index} ({cluster.addresses[index]})"
    if code == 0:
        print(f"eventcloud cluster: {where} exited with code 0 (it left the overlay): not restarted",
              file=sys.stderr, flush=True)
        return
    now = time.monotonic()
    recent = [t for t in restarts.get(index, []) if now - t < RESTART_WINDOW]
    if len(recent) >= RESTARTS_ALLOWED:
        print(f"eventcloud cluster: {where} exited with code {code}, its {len(recent) + 1}th exit within "
              f"{RESTART_WINDOW:g} s: not restarted again (its messages above say why)", file=sys.stderr, flush=True)
        return
    restarts[index] = recent + [now]
    print(f"eventcloud cluster: {where} exited with code {code}; restarting it", file=sys.stderr, flush=True)
    try:
        address = cluster.start_peer(index)
    except failed as exc:
        print(f"eventcloud cluster: {where} could not be restarted: {exc}", file=sys.stderr, flush=True)
        return
    print(f"eventcloud cluster: peer {index} serves again at {address}", file=sys.stderr, flush=True)
