"""Frames as a sans-I/O protocol: bytes in, messages out; messages in, bytes out.

A frame is a 4-byte big-endian length followed by one msgpack map, the envelope:

    k    kind: "req" (request), "rep" (reply), "err" (error reply) or "push"
    id   request id (requests, replies, errors; an error without id is connection-level)
    op   operation name (requests and pushes), one of `eventcloud.wire.ops.Op`
    hlc  the sender's hybrid-clock time (an unsigned 64-bit integer)
    b    the body: a map whose fields the op's message type (`eventcloud.wire.messages`) fixes

Nothing here touches a socket or a clock, so every bad-input path (garbage, oversized
frames, unknown operations) is tested without the network, in the style of h11.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgpack

from eventcloud.errors import BadRequest, ErrorCode, LocalProtocolError, RemoteProtocolError
from eventcloud.wire.ops import Op, parse_op

__all__ = ["Kind", "Message", "FrameDecoder", "encode", "DEFAULT_MAX_FRAME", "MAX_HLC"]

DEFAULT_MAX_FRAME = 32 * 1024 * 1024
#: Largest clock value a frame may carry (msgpack's unsigned 64-bit range).
MAX_HLC = (1 << 64) - 1
_HEADER = struct.Struct(">I")


class Kind(StrEnum):
    REQUEST = "req"
    REPLY = "rep"
    ERROR = "err"
    PUSH = "push"


_KINDS = {k.value: k for k in Kind}


@dataclass(frozen=True, slots=True)
class Message:
    """One decoded frame. Immutable: build a new one rather than changing a field."""

    kind: Kind
    op: Op | None = None
    id: int | None = None
    hlc: int = 0
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def error_code(self) -> ErrorCode:
        try:
            return ErrorCode(self.body.get("code"))
        except ValueError:
            return ErrorCode.INTERNAL


def encode(message: Message, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """One frame for `message`; LocalProtocolError (too-large) if it would exceed `max_frame`."""
    envelope: dict[str, Any] = {"k": message.kind.value, "hlc": message.hlc, "b": message.body}
    if message.op is not None:
        envelope["op"] = message.op.value
    if message.id is not None:
        envelope["id"] = message.id
    try:
        payload = msgpack.packb(envelope, use_bin_type=True)
    except UnicodeEncodeError as exc:
        raise BadRequest(f"message {message.op or message.kind.value} holds text that is not valid Unicode "
                         f"({exc.reason}: {exc.object[exc.start:exc.end]!r})") from None
    except (OverflowError, TypeError, ValueError) as exc:
        raise BadRequest(f"message {message.op or message.kind.value} cannot be encoded: {exc}") from None
    if len(payload) > max_frame:
        raise LocalProtocolError(
            f"message {message.op or message.kind} is {len(payload)} bytes, over the {max_frame}-byte frame limit",
            ErrorCode.TOO_LARGE,
        )
    return _HEADER.pack(len(payload)) + payload


#: The first bytes of HTTP (a response, or a request's method): the other side is an HTTP server
#: or client, whose first four bytes would otherwise read as a frame length of about 1.2 GB.
_HTTP_STARTS = frozenset({b"HTTP", b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN"})
_HTTP_HERE = ("the other side speaks HTTP, not EventCloud's peer protocol: an HTTP server (such as "
              "`eventcloud gateway`) is no peer, and a peer serves no HTTP; give the CLI and the SDK a "
              "peer's address (the one `eventcloud cluster` or `eventcloud peer` printed), and HTTP "
              "clients the gateway's")


class FrameDecoder:
    """Accumulates received bytes and yields complete, validated messages.

    `accepted_ops` limits the operations a request may name (a peer accepts client and peer
    operations only); None accepts every known one.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME, accepted_ops: frozenset[Op] | None = None) -> None:
        self._framed = False   # a whole frame arrived: the other side speaks this protocol
        self._buffer = bytearray()
        self._max_frame = max_frame
        self._accepted = accepted_ops

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buffer)

    def next_message(self) -> Message | None:
        """The next complete message, or None if more bytes are needed (RemoteProtocolError on garbage)."""
        if len(self._buffer) < _HEADER.size:
            return None
        if not self._framed and bytes(self._buffer[:4]) in _HTTP_STARTS:
            raise RemoteProtocolError(_HTTP_HERE, ErrorCode.BAD_REQUEST)
        (length,) = _HEADER.unpack_from(self._buffer)
        if length > self._max_frame:
            raise RemoteProtocolError(f"frame of {length} bytes is over the {self._max_frame}-byte limit",
                                      ErrorCode.TOO_LARGE)
        if len(self._buffer) < _HEADER.size + length:
            return None
        payload = bytes(self._buffer[_HEADER.size: _HEADER.size + length])
        del self._buffer[: _HEADER.size + length]
        self._framed = True
        return self._validate(payload)

    def _validate(self, payload: bytes) -> Message:
        try:
            envelope = msgpack.unpackb(payload, raw=False, strict_map_key=True)
        except Exception as exc:  # msgpack raises several unrelated types on garbage
            raise RemoteProtocolError(f"frame is not valid msgpack: {exc}") from None
        if not isinstance(envelope, dict):
            raise RemoteProtocolError("frame is not a message envelope (a map)")
        kind = _KINDS.get(envelope.get("k")) if isinstance(envelope.get("k"), str) else None
        if kind is None:
            raise RemoteProtocolError(f"unknown message kind {envelope.get('k')!r}")
        raw_op, ident, hlc, body = envelope.get("op"), envelope.get("id"), envelope.get("hlc", 0), envelope.get("b", {})
        if type(hlc) is not int or not 0 <= hlc <= MAX_HLC:
            raise RemoteProtocolError(f"invalid clock value {hlc!r}")
        if not isinstance(body, dict):
            raise RemoteProtocolError("message body is not a map")
        op = None
        if kind in (Kind.REQUEST, Kind.PUSH):
            if not isinstance(raw_op, str):
                raise RemoteProtocolError(f"{kind.value} message without an operation name")
            op = parse_op(raw_op)
            if op is None or (kind is Kind.REQUEST and self._accepted is not None and op not in self._accepted):
                raise RemoteProtocolError(f"unknown message type {raw_op!r}", ErrorCode.UNKNOWN_OP)
        if kind is not Kind.PUSH and not (type(ident) is int or (kind is Kind.ERROR and ident is None)):
            raise RemoteProtocolError(f"{kind.value} message without a request id")
        return Message(kind, op, ident if kind is not Kind.PUSH else None, hlc, body)
