"""The client-side subcommands of `eventcloud` (publish, query, status, subscribe, demo),
each an async function of the parsed arguments returning an exit code."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import trio

from eventcloud.cli.main import DEMO_SUBSCRIPTION, notification_json, quads_text
from eventcloud.client import connect
from eventcloud.overlay.zones import Zone


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
            events.extend(read_events(path, args.format, source=args.source, sequence=index))
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
    async with connect(args.peer, source=args.source) as client:
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
    async with connect(args.peer) as client:
        reply = await client._call("leave", {})
    print(f"peer at {args.peer} left; its zone went to peer {reply['heir']}")
    return 0


async def find(args: argparse.Namespace) -> int:
    from eventcloud.rdf.model import ModelError, term_from_n3

    try:
        pattern = [term_from_n3(t) if t else None for t in (args.graph, args.subject, args.predicate, args.object)]
    except ModelError as exc:
        print(f"eventcloud find: {exc}", file=sys.stderr)
        return 2
    async with connect(args.peer) as client:
        if args.count:
            print(await client.count(*pattern))
        else:
            sys.stdout.write(quads_text(await client.find(*pattern)))
    return 0


async def delete(args: argparse.Namespace) -> int:
    async with connect(args.peer) as client:
        removed = await client.delete(args.graph.strip("<>"))
    print(f"deleted {removed} quads of {args.graph.strip('<>')}")
    return 0


async def query(args: argparse.Namespace) -> int:
    async with connect(args.peer) as client:
        result = await client.query(args.sparql)
    if isinstance(result, str):
        sys.stdout.write(result)
    elif args.format == "json":
        print(json.dumps(result, indent=1))
    elif "boolean" in result:
        print("true" if result["boolean"] else "false")
    else:
        columns = result["head"]["vars"]
        rows = [[_cell(b.get(c)) for c in columns] for b in result["results"]["bindings"]]
        _table(columns, rows)
    return 0


def _cell(binding: dict[str, Any] | None) -> str:
    if binding is None:
        return ""
    if binding["type"] == "uri":
        return f"<{binding['value']}>"
    if binding["type"] == "literal":
        value = json.dumps(binding["value"], ensure_ascii=False)
        if "xml:lang" in binding:
            return f"{value}@{binding['xml:lang']}"
        if "datatype" in binding and not binding["datatype"].endswith("#string"):
            return f"{value}^^<{binding['datatype']}>"
        return value
    return f"_:{binding['value']}"


def _table(columns: list[str], rows: list[list[str]]) -> None:
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


def partition_report(status: dict[str, Any]) -> tuple[bool, str]:
    """Do the peers' zones partition the space exactly? (volumes add up, none overlap)"""
    from eventcloud.overlay.zones import CoordinateSpace

    space = CoordinateSpace.from_dict(status["space"])
    zones = [Zone.from_wire(p["zone"]) for p in status["peers"]]
    volume = 0
    for zone in zones:
        v = 1
        for lo, hi in zone.bounds:
            v *= hi - lo
        volume += v
    overlaps = sum(1 for i, a in enumerate(zones) for b in zones[i + 1:] if a.intersects(b.bounds))
    ok = volume == space.top ** 4 and overlaps == 0
    return ok, f"zones partition the space: {'yes' if ok else 'NO'} ({len(zones)} zones, {overlaps} overlaps)"


async def status(args: argparse.Namespace) -> int:
    async with connect(args.peer) as client:
        result = await client.status()
    ok, report = partition_report(result)
    if args.format == "json":
        result["partition"] = ok
        print(json.dumps(result, indent=1))
        return 0
    from eventcloud.overlay.zones import CoordinateSpace

    top = CoordinateSpace.from_dict(result["space"]).top
    rows = []
    for p in result["peers"]:
        zone = Zone.from_wire(p["zone"])
        span = " ".join(f"[{lo / top:.3f},{hi / top:.3f})" for lo, hi in zone.bounds)
        rows.append([p["id"], p["address"], str(p["quads"]), str(p["subscriptions"]), str(len(p["neighbours"])), span])
    _table(["peer", "address", "quads", "subs", "neighbours", "zone (graph subject predicate object)"], rows)
    print(f"algorithm: {result['algorithm']}; mapping: {result['space']['mapping']}; {report}")
    return 0


async def subscribe(args: argparse.Namespace) -> int:
    async with connect(args.peer) as client:
        sub = await client.subscribe(args.sparql, kind=args.kind)
        if args.format == "jsonl":
            print(json.dumps({"subscription": sub.id, "status": "active"}), flush=True)
        else:
            print(f"# subscription {sub.id} active ({args.kind}); Ctrl-C to stop", file=sys.stderr, flush=True)
        count = 0
        async for note in sub:
            if args.format == "jsonl":
                print(json.dumps(notification_json(note), ensure_ascii=False), flush=True)
            elif args.format == "nquads":
                sys.stdout.write(quads_text(note.quads) if note.quads else f"# {note.event}\n")
                sys.stdout.flush()
            else:
                _print_note(note)
            count += 1
            if args.count is not None and count >= args.count:
                break
    return 0


def _print_note(note: Any) -> None:
    print(f"{note.kind:8s} {note.event}", flush=True)
    for solution in note.solutions:
        print("         " + "  ".join(f"?{k}={v.n3()}" for k, v in solution.items()), flush=True)
    for quad in note.quads:
        print("         " + quad.n_quads(), flush=True)


async def demo(args: argparse.Namespace) -> int:
    from peers.cluster import LocalCluster

    from eventcloud.cli.demo import citybench_dir, demo_events

    events = demo_events(args.events)
    what = ("Aarhus sensor observations (CityBench)" if citybench_dir() is not None else
            "synthetic sensor observations (CityBench data not found: set EVENTCLOUD_CITYBENCH)")
    print(f"== starting a local cluster of {args.peers} peers ({args.algorithm})", flush=True)
    cluster = LocalCluster(args.peers, algorithm=args.algorithm)
    try:
        await trio.to_thread.run_sync(cluster.start)
        print(f"   entry peer {cluster.entry}; peers {', '.join(cluster.addresses)}", flush=True)
        async with connect(cluster.entry, source="demo-subscriber") as subscriber, \
                connect(cluster.addresses[-1], source="demo-publisher") as publisher:
            sub = await subscriber.subscribe(DEMO_SUBSCRIPTION, kind="bindings")
            print(f"== subscribed ({sub.id[:8]}…):\n{DEMO_SUBSCRIPTION}", flush=True)
            expected = sum(1 for e in events if _demo_matches(e))
            print(f"== publishing {len(events)} {what} from {cluster.addresses[-1]} "
                  f"({expected} have a value over 30)", flush=True)
            received = 0

            async def listen() -> None:
                nonlocal received
                async for note in sub:
                    received += 1
                    for s in note.solutions:
                        print(f"   notification {received:3d}: {s['obs'].n3()} value {s['value'].lexical}", flush=True)
                    if received >= expected:
                        return

            with trio.move_on_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(listen)
                    for event in events:
                        await publisher.publish(event)
            count = await publisher.query("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }")
            stored = count["results"]["bindings"][0]["n"]["value"]
            print(f"== {received} notifications for {expected} matching events; {stored} quads stored "
                  f"across {args.peers} peers", flush=True)
            return 0 if received == expected else 1
    finally:
        await trio.to_thread.run_sync(cluster.stop)


def _demo_matches(event: Any) -> bool:
    for quad in event.quads:
        if quad.p.value.endswith("hasValue"):
            try:
                if float(quad.o.lexical) > 30:
                    return True
            except ValueError:
                pass
    return False
