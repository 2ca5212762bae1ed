"""The client commands of `eventcloud` (publish, query, find, delete, status, leave),
each an async function of the parsed arguments returning an exit code. They speak to an
entry peer through the SDK only."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

import trio

from eventcloud.cli.credentials import client_options
from eventcloud.cli.render import cell, partition_report, quads_text, table
from eventcloud.client import ClientError, connect


class Progress:
    """A line on stderr, redrawn at most 5 times a second on a terminal; elsewhere (a log, a
    pipe: big jobs only) a plain line every 2 s instead, since redrawing there wrote hundreds
    of escape sequences into one line of the log."""

    def __init__(self, show: bool, terminal: bool | None = None) -> None:
        self.show = show
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self._every = 0.2 if self.terminal else 2.0
        self._last = 0.0
        self._drawn = False

    def line(self, text: str, force: bool = False) -> None:
        now = time.perf_counter()
        if self.show and (force or now - self._last >= self._every):
            self._last = now
            if self.terminal:
                self._drawn = True
                print(f"\r{text}\x1b[K", end="", file=sys.stderr, flush=True)
            elif not force:
                print(text, file=sys.stderr, flush=True)

    def done(self) -> None:
        if self._drawn:
            print(file=sys.stderr, flush=True)
            self._drawn = False


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _rate(count: int, seconds: float) -> str:
    if seconds < 0.05:
        return ""
    rate = count / seconds
    return f" ({rate:.0f} events/s)" if rate >= 10 else f" ({rate:.2g} events/s)"


async def publish(args: argparse.Namespace) -> int:
    """Publish files, directories or stdin: checked first (nothing is published from a malformed
    file), then streamed in batches with bounded memory, at --rate events/s if given. Ctrl-C stops
    it and says what was stored."""
    from eventcloud.cli.inputs import events_of, expand
    from eventcloud.rdf.files import RDFInputError

    skipped: list[str] = []
    try:
        inputs = expand(args.files, args.format, skipped)
    except RDFInputError as exc:
        print(f"eventcloud publish: {exc} (nothing was published)", file=sys.stderr)
        return 1
    if skipped:
        print(f"eventcloud publish: skipping {len(skipped)} CSV file{'s' * (len(skipped) > 1)} that "
              f"{'are' if len(skipped) > 1 else 'is'} no CityBench stream this reader knows: "
              f"{', '.join(skipped[:5])}{' …' if len(skipped) > 5 else ''}", file=sys.stderr)
    stamp = int(time.time() * 1000)
    big = sum(i.size or 0 for i in inputs) > 8 * 1024 * 1024
    progress = Progress(args.progress or sys.stderr.isatty() or big)
    total_events = total_quads = None
    if all(i.path is not None for i in inputs):  # stdin is read once: it streams unchecked
        total_events = total_quads = 0
        try:
            for index, item in enumerate(inputs):
                size = item.size or 0

                def checked(handle: Any, item: Any = item, size: int = size) -> None:
                    where = handle.tell() if size else 0
                    progress.line(f"checking {item.label}: {where * 100 // max(size, 1)}% "
                                  f"({where / 1e6:,.1f} of {size / 1e6:,.1f} MB), {_plural(total_events, 'event')}")

                for event in events_of(item, source=args.source, timestamp_ms=stamp, sequence=index,
                                       position=checked):
                    total_events += 1
                    total_quads += len(event)
        except RDFInputError as exc:
            progress.done()
            print(f"eventcloud publish: {exc} (nothing was published)", file=sys.stderr)
            return 1
        progress.done()
        if total_events == 0:
            print("eventcloud publish: no events in the input (nothing was published)", file=sys.stderr)
            return 1

    done = [0, 0]          # events, quads acknowledged
    in_flight = [0]
    started = time.perf_counter()
    batch = max(1, min(args.batch, int(args.rate // 10) or 1)) if args.rate else args.batch
    failure: list[str] = []
    interrupted = False

    def produce() -> Any:
        for index, item in enumerate(inputs):
            chunk: list = []
            for event in events_of(item, source=args.source, timestamp_ms=stamp, sequence=index):
                chunk.append(event)
                if len(chunk) >= batch:
                    yield chunk
                    chunk = []
            if chunk:
                yield chunk

    async with connect(args.peer, source=args.source, **client_options(args)) as client:
        send, receive = trio.open_memory_channel[Any](0)

        async def worker(receive: trio.MemoryReceiveChannel, stop: trio.CancelScope) -> None:
            async with receive:
                async for events in receive:
                    in_flight[0] += len(events)
                    try:
                        await client.publish_batch(events)
                    except ClientError as exc:
                        failure.append(exc.message)
                        stop.cancel()
                        return
                    in_flight[0] -= len(events)
                    done[0] += len(events)
                    done[1] += sum(len(e) for e in events)
                    of = f"/{total_events:,}" if total_events else ""
                    progress.line(f"published {done[0]:,}{of} events{_rate(done[0], time.perf_counter() - started)}")

        async def feed() -> None:
            sent = 0
            async with send:
                for events in produce():
                    if args.rate:
                        await trio.sleep_until(trio.current_time() + max(0.0, started + sent / args.rate
                                                                        - time.perf_counter()))
                    await send.send(events)
                    sent += len(events)
                    await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            async def on_interrupt() -> None:
                nonlocal interrupted
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        interrupted = True
                        nursery.cancel_scope.cancel()
                        return

            nursery.start_soon(on_interrupt)
            async with trio.open_nursery() as work:
                for _ in range(max(1, args.concurrency)):
                    work.start_soon(worker, receive.clone(), work.cancel_scope)
                try:
                    await feed()
                except RDFInputError as exc:  # stdin, found malformed while streaming
                    failure.append(str(exc))
                    work.cancel_scope.cancel()
                receive.close()
            nursery.cancel_scope.cancel()
    progress.done()
    seconds = time.perf_counter() - started
    stored = f"{_plural(done[0], 'event')} ({_plural(done[1], 'quad')}) in {seconds:.2f} s{_rate(done[0], seconds)}"
    if interrupted or failure:
        why = "interrupted" if interrupted else failure[0]
        of = f" of {total_events:,}" if total_events else ""
        maybe = (f"; {_plural(in_flight[0], 'more event')} in flight may be stored too, each whole"
                 if in_flight[0] else "")
        again = ("publishing the same input again completes it" if interrupted else
                 "once the input is mended there, publishing it again completes it")
        print(f"eventcloud publish: {why}: published {done[0]:,}{of} events ({_plural(done[1], 'quad')}) in "
              f"{seconds:.2f} s, each stored whole{maybe}; {again} (stored events are retries, never notified "
              f"twice)", file=sys.stderr)
        return 130 if interrupted else 1
    print(f"published {stored}")
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
        else:   # printed as the pages come: an export of any size holds one page at a time
            async with await client.find_stream(*pattern) as quads:
                async for page in quads.pages():
                    sys.stdout.write(quads_text(page))
    return 0


async def dump(args: argparse.Namespace) -> int:
    """Every stored quad (or a pattern's) as N-Quads or TriG, written page by page."""
    from eventcloud.rdf.model import ModelError, term_from_n3
    from eventcloud.rdf.results import quads_bytes

    try:
        pattern = [term_from_n3(t) if t else None for t in (args.graph, args.subject, args.predicate, args.object)]
    except ModelError as exc:
        print(f"eventcloud dump: {exc}", file=sys.stderr)
        return 2
    try:
        out = open(args.output, "wb") if args.output else sys.stdout.buffer
    except OSError as exc:
        print(f"eventcloud dump: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    began, written = time.monotonic(), 0
    try:
        async with connect(args.peer, **client_options(args)) as client:
            async with await client.find_stream(*pattern) as quads:
                async for page in quads.pages():
                    out.write(quads_bytes(page, "quads" if args.format == "nquads" else "trig"))
                    written += len(page)
        out.flush()
    finally:
        if args.output:
            out.close()
    if args.output:
        print(f"dumped {written:,} quads to {args.output} in {time.monotonic() - began:.1f} s", file=sys.stderr)
    return 0


async def delete(args: argparse.Namespace) -> int:
    async with connect(args.peer, **client_options(args)) as client:
        removed = await client.delete(args.graph.strip("<>"))
    if removed:
        print(f"deleted {_plural(removed, 'quad')} of {args.graph.strip('<>')}")
    else:  # deleting is idempotent: a retry after a lost answer finds nothing, and that is success
        print(f"no quad of {args.graph.strip('<>')} is stored: nothing to delete")
    return 0


async def query(args: argparse.Namespace) -> int:
    from eventcloud.rdf.results import GRAPH_FORMATS, graph_bytes, solutions_bytes

    text = query_text(args)
    form = args.format
    async with connect(args.peer, **client_options(args)) as client:
        async with await client.query_stream(text) as answer:
            if answer.form == "solutions" and form in ("csv", "tsv", "xml", "json"):
                await _write_rows(answer, form)   # rows written as they come
                return 0
            result: Any
            if answer.form == "graph":
                result = answer.text
            elif answer.form == "boolean":
                result = {"head": {}, "boolean": answer.boolean}
            else:   # a table: its columns are as wide as their widest cell
                result = {"head": {"vars": list(answer.variables)},
                          "results": {"bindings": [row async for row in answer]}}
    if isinstance(result, str):  # CONSTRUCT / DESCRIBE: RDF
        if form in ("table", "ntriples"):
            sys.stdout.write(result)
        elif form == "json" or form in GRAPH_FORMATS:
            data = graph_bytes(result, "jsonld" if form == "json" else form)
            sys.stdout.buffer.write(data if data.endswith(b"\n") or not data else data + b"\n")  # a prompt after it
            sys.stdout.flush()
        else:
            print(f"eventcloud query: a CONSTRUCT/DESCRIBE result is a graph: use --format ntriples, turtle, nquads, "
                  f"rdfxml or json (JSON-LD), not {form}", file=sys.stderr)
            return 2
        return 0
    if form in GRAPH_FORMATS:
        print(f"eventcloud query: a SELECT/ASK result is solutions: use --format table, json, csv, tsv or xml, "
              f"not {form}", file=sys.stderr)
        return 2
    if form == "json":
        print(json.dumps(result, indent=1, ensure_ascii=False))
    elif form in ("csv", "tsv", "xml"):
        sys.stdout.buffer.write(solutions_bytes(result, form))
        if form == "xml":
            sys.stdout.buffer.write(b"\n")
        sys.stdout.flush()
    elif "boolean" in result:
        print("true" if result["boolean"] else "false")
    else:
        columns = result["head"]["vars"]
        rows = [[cell(b.get(c)) for c in columns] for b in result["results"]["bindings"]]
        table(columns, rows)
    return 0


async def _write_rows(answer: Any, form: str) -> None:
    from eventcloud.rdf.results import SolutionsWriter

    writer = SolutionsWriter(form, answer.variables)
    out = sys.stdout.buffer
    out.write(writer.start())
    async for page in answer.pages():
        out.write(writer.rows(page))
        out.flush()
    out.write(writer.end() + (b"\n" if form in ("xml", "json") else b""))
    out.flush()


def query_text(args: argparse.Namespace) -> str:
    """The query: the argument, `-` (stdin), `@FILE`, or --file FILE."""
    from eventcloud.client import ClientError

    given = args.sparql
    path = args.file
    if given is not None and path is not None:
        raise ClientError("give the query as an argument or with --file, not both")
    if given is None and path is None:
        raise ClientError("give the query: as an argument, `-` to read it from stdin, @FILE or --file FILE")
    if given == "-":
        return sys.stdin.read()
    if given is not None and given.startswith("@"):
        path = given[1:]
    if path is not None:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except OSError as exc:
            raise ClientError(f"cannot read the query file {path}: {exc.strerror or exc}") from None
    return given  # type: ignore[return-value]


async def status(args: argparse.Namespace) -> int:
    from eventcloud.overlay.labels import interval_text

    async with connect(args.peer, **client_options(args)) as client:
        result = await client.status()
    ok, report = partition_report(result)
    if args.format == "json":
        print(json.dumps({**result.to_wire(), "partition": ok}, indent=1))
        return 0
    space = result.space
    rows = []
    for p in result.peers:
        span = "  ".join(f"{axis[0]} {interval_text(space, lo, hi, 8)}"
                         for axis, (lo, hi) in zip(("graph", "subject", "predicate", "object"), p.zone.bounds))
        rows.append([p.id, p.address + (" (down)" if p.down else ""), f"{p.quads:,}", f"{p.subscriptions:,}",
                     str(len(p.neighbours)), span])
    table(["peer", "address", "quads", "subs", "neighbours", "zone (g s p o: from, to)"], rows)
    events = sum(p.events_claimed for p in result.peers)
    subscriptions = sum(p.subscriptions_homed for p in result.peers)
    print(f"{sum(p.quads for p in result.peers):,} quads, {events:,} event{'s' * (events != 1)}, "
          f"{subscriptions:,} subscription{'s' * (subscriptions != 1)} (each counted once, though held by several "
          f"peers)")
    print(f"algorithm: {result.algorithm}; mapping: {result.space.mapping}; {report}")
    return 0
