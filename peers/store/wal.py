"""A write-ahead log: what makes a peer's writes durable before it acknowledges them.

Every change to a peer's store is first appended here as one record and the file is fsynced
(one fsync for all the records written together); only then is the change applied to the
store (pyoxigraph on RocksDB, whose own writes reach the disk later) and acknowledged. After a
crash, even of the machine, the records are replayed into the store on start (every change is
idempotent). A checkpoint flushes the store and empties the log.

A record on disk is a 4-byte big-endian length, a 4-byte CRC-32 of the payload, then the
payload (msgpack). A torn record at the end (a crash in the middle of a write) is dropped on
replay; a corrupt record elsewhere stops the replay there with an error naming the offset.
Blocking: call it off the event loop.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator

import msgpack

from eventcloud.errors import EventCloudError

__all__ = ["WriteAheadLog", "WalError"]

_HEAD = struct.Struct(">II")
_MAX_RECORD = 256 * 1024 * 1024


class WalError(EventCloudError):
    """A log that cannot be read back (corrupt in the middle, not only torn at the end)."""


class WriteAheadLog:
    """`durable=False` skips the fsync (the OS still has the data: a process crash loses
    nothing, a machine crash may lose the last writes); for experiments that say so."""

    def __init__(self, path: str | Path, *, durable: bool = True) -> None:
        self.path = Path(path)
        self.durable = durable
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab")
        self.size = self.path.stat().st_size
        self.fsyncs = 0

    def append(self, records: Iterable[Any], *, sync: bool = True) -> int:
        """Write the records and (with `sync`) make them durable; the number of bytes written."""
        chunks = []
        for record in records:
            payload = msgpack.packb(record, use_bin_type=True)
            chunks.append(_HEAD.pack(len(payload), zlib.crc32(payload)) + payload)
        if not chunks:
            return 0
        data = b"".join(chunks)
        self._file.write(data)
        self._file.flush()
        if self.durable and sync:
            os.fsync(self._file.fileno())
            self.fsyncs += 1
        self.size += len(data)
        return len(data)

    def replay(self) -> Iterator[Any]:
        """Every complete record, in order; a torn tail is cut off the file."""
        with open(self.path, "rb") as handle:
            data = handle.read()
        offset = 0
        while offset < len(data):
            if len(data) - offset < _HEAD.size:
                break  # torn header
            length, crc = _HEAD.unpack_from(data, offset)
            end = offset + _HEAD.size + length
            if length > _MAX_RECORD:
                raise WalError(f"{self.path}: record at byte {offset} claims {length} bytes; the log is corrupt")
            if end > len(data):
                break  # torn payload
            payload = data[offset + _HEAD.size: end]
            if zlib.crc32(payload) != crc:
                if end == len(data):
                    break  # the last record, half written
                raise WalError(f"{self.path}: record at byte {offset} fails its checksum; the log is corrupt")
            yield msgpack.unpackb(payload, raw=False)
            offset = end
        if offset < len(data):
            self._cut(offset)

    def _cut(self, offset: int) -> None:
        self._file.close()
        with open(self.path, "r+b") as handle:
            handle.truncate(offset)
            handle.flush()
            os.fsync(handle.fileno())
        self._file = open(self.path, "ab")
        self.size = offset

    def truncate(self) -> None:
        """Empty the log (after a checkpoint made everything in it durable in the store)."""
        self._cut(0)

    def close(self) -> None:
        self._file.close()
