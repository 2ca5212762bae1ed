"""The client commands of `eventcloud` (publish, query, find, delete, status, leave),
each an async function of the parsed arguments returning an exit code. They speak to an
entry peer through the SDK only."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import trio

from eventcloud.cli.credentials import client_options
from eventcloud.cli.render import cell, partition_report, quads_text, table
from eventcloud.client import connect


def _progress(done: int, total: int, started: float, width: int = 30) -> None:
    filled = int(width * done / total) if total else width
    rate = done / max(time.perf_counter() - started, 1e-9)
    print(f"\r[{'#' * filled}{' ' * (width - filled)}] {done}/{total} events  {rate:,.0f}/s",
          end="" if done < total else "\n", file=sys.stderr, flush=True)


async def publish(args: argparse.Namespace) -> int:
    from eventcloud.rdf.files import RDFInputError, read_events

    events = []
    for index, path in enumerate(args.files):
        try:  # the sequence number keeps graph IRIs of triple files read in one millisecond apart
            events.extend(read_events(path, args.format, source=args.source, sequence=index,
                                      timestamp_ms=int(time.time() * 1000)))
        except RDFInputError as exc:
            print(f"eventcloud publish: {exc} (nothing was published)", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"eventcloud publish: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    total_quads = sum(len(e) for e in events)
    started = time.perf_counter()
    show = sys.stderr.isatty() or len(events) >= 100
    done = 0
    batches = [events[i:i + args.batch] for i in range(0, len(events), max(1, args.batch))]
    async with connect(args.peer, source=args.source, **client_options(args)) as client:
        send, receive = trio.open_memory_channel[Any](0)

        async def worker(receive: trio.MemoryReceiveChannel) -> None:
            nonlocal done
            async with receive:
                async for batch in receive:
                    await client.publish_batch(batch)
                    done += len(batch)
                    if show:
                        _progress(done, len(events), started)

        async with trio.open_nursery() as nursery:
            for _ in range(max(1, args.concurrency)):
                nursery.start_soon(worker, receive.clone())
            async with send:
                for batch in batches:
                    await send.send(batch)
            receive.close()
    seconds = time.perf_counter() - started
    print(f"published {len(events)} events ({total_quads} quads) in {seconds:.2f} s "
          f"({len(events) / max(seconds, 1e-9):,.0f} events/s)")
    return 0


async def leave(args: argparse.Namespace) -> int:
    async with connect(args.peer[0], reconnect=0, **client_options(args)) as client:
        heir = await client.leave()
    print(f"peer at {args.peer[0]} left; its zone went to peer {heir}")
    return 0


async def find(args: argparse.Namespace) -> int:
    from eventcloud.rdf.model import ModelError, term_from_n3

    try:
        pattern = [term_from_n3(t) if t else None for t in (args.graph, args.subject, args.predicate, args.object)]
    except ModelError as exc:
        print(f"eventcloud find: {exc}", file=sys.stderr)
        return 2
    async with connect(args.peer, **client_options(args)) as client:
        if args.count:
            print(await client.count(*pattern))
        else:
            sys.stdout.write(quads_text(await client.find(*pattern)))
    return 0


async def delete(args: argparse.Namespace) -> int:
    async with connect(args.peer, **client_options(args)) as client:
        removed = await client.delete(args.graph.strip("<>"))
    print(f"deleted {removed} quads of {args.graph.strip('<>')}")
    return 0


async def query(args: argparse.Namespace) -> int:
    async with connect(args.peer, **client_options(args)) as client:
        result = await client.query(args.sparql)
    if isinstance(result, str):
        sys.stdout.write(result)
    elif args.format == "json":
        print(json.dumps(result, indent=1))
    elif "boolean" in result:
        print("true" if result["boolean"] else "false")
    else:
        columns = result["head"]["vars"]
        rows = [[cell(b.get(c)) for c in columns] for b in result["results"]["bindings"]]
        table(columns, rows)
    return 0


async def status(args: argparse.Namespace) -> int:
    async with connect(args.peer, **client_options(args)) as client:
        result = await client.status()
    ok, report = partition_report(result)
    if args.format == "json":
        print(json.dumps({**result.to_wire(), "partition": ok}, indent=1))
        return 0
    top = result.space.top
    rows = []
    for p in result.peers:
        span = " ".join(f"[{lo / top:.3f},{hi / top:.3f})" for lo, hi in p.zone.bounds)
        rows.append([p.id, p.address, str(p.quads), str(p.subscriptions), str(len(p.neighbours)), span])
    table(["peer", "address", "quads", "subs", "neighbours", "zone (graph subject predicate object)"], rows)
    print(f"algorithm: {result.algorithm}; mapping: {result.space.mapping}; {report}")
    return 0
