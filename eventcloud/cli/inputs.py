"""What `eventcloud publish` reads: files, directories and stdin, in RDF or as CityBench streams,
turned into events lazily so that a file of any size is published with bounded memory.

Quad files (N-Quads, TriG) stream one event at a time (an event's quads must be together);
CityBench `.stream`/`.csv` files give one event per row (SSN observations naming the sensor and
its property, `eventcloud.rdf.citybench`); Turtle, N-Triples, N3 and RDF/XML files are one
event each and are parsed whole. A directory stands for the files in it (recursively) whose
extension says their format; `-` is standard input (N-Quads unless --format says otherwise).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from eventcloud.rdf.citybench import is_stream, read_stream
from eventcloud.rdf.files import FORMATS, QUAD_FORMATS, RDFInputError, guess_format, parse_events, read_events, \
    stream_events
from eventcloud.rdf.model import CompoundEvent

__all__ = ["Input", "expand", "events_of", "STREAM_EXTENSIONS", "INPUT_FORMATS"]

STREAM_EXTENSIONS = (".stream", ".csv")
INPUT_FORMATS = tuple(sorted(FORMATS)) + ("citybench",)


@dataclass(frozen=True)
class Input:
    label: str                 # the path as given, or "stdin"
    path: Path | None          # None: standard input
    format: str

    @property
    def size(self) -> int | None:
        try:
            return self.path.stat().st_size if self.path is not None else None
        except OSError:
            return None


def _format_of(path: Path, given: str | None) -> str:
    if given is not None:
        return given
    if path.suffix.lower() in STREAM_EXTENSIONS:
        return "citybench"
    return guess_format(path)


def expand(names: list[str], given: str | None, skipped: list[str] | None = None) -> list[Input]:
    """The inputs named on the command line; RDFInputError for what cannot be read. In a
    directory, a CSV that is no CityBench stream this reader knows is left out (named in
    `skipped`) rather than failing the whole directory."""
    inputs: list[Input] = []
    for name in names:
        if name == "-":
            inputs.append(Input("stdin", None, given or "nquads"))
            continue
        path = Path(name)
        if path.is_dir():
            found = [p for p in sorted(path.rglob("*")) if p.is_file() and not p.name.startswith(".")
                     and _known(p, given)]
            unknown = [p for p in found if _format_of(p, given) == "citybench" and not is_stream(p)]
            if skipped is not None:
                skipped += [str(p) for p in unknown]
            found = [p for p in found if p not in unknown]
            if not found:
                raise RDFInputError(name, None, "is a directory holding no file with an RDF or CityBench extension "
                                                "(.nq .trig .ttl .nt .n3 .rdf .owl .xml .rss .stream .csv)")
            inputs += [Input(str(p), p, _format_of(p, given)) for p in found]
            continue
        if not path.exists():
            raise RDFInputError(name, None, "no such file")
        inputs.append(Input(name, path, _format_of(path, given)))
    return inputs


def _known(path: Path, given: str | None) -> bool:
    try:
        _format_of(path, given)
        return True
    except RDFInputError:
        return False


def events_of(item: Input, *, source: str, timestamp_ms: int, sequence: int,
              position: Callable[[BinaryIO], None] | None = None) -> Iterator[CompoundEvent]:
    """The events of one input, lazily; `position(handle)` is called after each event (progress)."""
    if item.format == "citybench":
        if item.path is None:
            raise RDFInputError("stdin", None, "CityBench streams are read from files (.stream or .csv)")
        yield from read_stream(item.path)
        return
    if item.format in QUAD_FORMATS:
        handle: BinaryIO = sys.stdin.buffer if item.path is None else _open(item)
        try:
            for event in stream_events(handle, item.format, name=item.label, source=source,
                                       timestamp_ms=timestamp_ms, sequence=sequence):
                yield event
                if position is not None:
                    position(handle)
        finally:
            if item.path is not None:
                handle.close()
        return
    if item.path is None:
        yield from parse_events(sys.stdin.buffer.read(), item.format, name="stdin", source=source,
                                timestamp_ms=timestamp_ms, sequence=sequence)
        return
    yield from read_events(item.path, item.format, source=source, timestamp_ms=timestamp_ms, sequence=sequence)


def _open(item: Input) -> BinaryIO:
    try:
        return open(item.path, "rb")  # type: ignore[arg-type]
    except OSError as exc:
        raise RDFInputError(item.label, None, f"cannot read file: {exc.strerror or exc}") from None
