"""The wire protocol as a sans-I/O codec: bytes in, messages out; messages in, bytes out.

A frame is a 4-byte big-endian length followed by one msgpack map. The map is a message
envelope: ``k`` (kind: request, reply, error or push), ``id`` (request id, for requests,
replies and errors), ``op`` (the operation, for requests and pushes), ``hlc`` (the
sender's hybrid-clock time) and ``b`` (the body, a map). Nothing here touches a socket or a
clock, so every bad-input path (garbage, oversized frames, unknown operations) is tested
without the network, in the style of h11.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import msgpack

from eventcloud.rdf.model import IRI, CompoundEvent, Literal, ModelError, Quad, Term, make_quad

REQUEST, REPLY, ERROR, PUSH = "req", "rep", "err", "push"
#: What a notification carries: the subscription and event only, all solutions, or all quads.
NOTIFICATION_KINDS = ("signal", "bindings", "event")
KINDS = frozenset({REQUEST, REPLY, ERROR, PUSH})
DEFAULT_MAX_FRAME = 32 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The peer on the other end broke the protocol; the connection cannot continue."""

    def __init__(self, message: str, code: str = "protocol") -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class Message:
    kind: str
    op: str | None = None
    id: int | None = None
    hlc: int = 0
    body: dict[str, Any] = field(default_factory=dict)


def encode(message: Message, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """One frame for `message`; ProtocolError if it would exceed `max_frame`."""
    envelope: dict[str, Any] = {"k": message.kind, "hlc": message.hlc, "b": message.body}
    if message.op is not None:
        envelope["op"] = message.op
    if message.id is not None:
        envelope["id"] = message.id
    payload = msgpack.packb(envelope, use_bin_type=True)
    if len(payload) > max_frame:
        raise ProtocolError(
            f"message {message.op or message.kind} is {len(payload)} bytes, over the "
            f"{max_frame}-byte frame limit",
            code="too-large",
        )
    return _HEADER.pack(len(payload)) + payload


class FrameDecoder:
    """Accumulates received bytes and yields complete, validated messages."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME, known_ops: frozenset[str] | None = None):
        self._buffer = bytearray()
        self._max_frame = max_frame
        self._known_ops = known_ops

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def next_message(self) -> Message | None:
        """The next complete message, or None if more bytes are needed."""
        if len(self._buffer) < _HEADER.size:
            return None
        (length,) = _HEADER.unpack_from(self._buffer)
        if length > self._max_frame:
            raise ProtocolError(
                f"frame of {length} bytes is over the {self._max_frame}-byte limit", code="too-large"
            )
        if len(self._buffer) < _HEADER.size + length:
            return None
        payload = bytes(self._buffer[_HEADER.size : _HEADER.size + length])
        del self._buffer[: _HEADER.size + length]
        return self._validate(payload)

    def _validate(self, payload: bytes) -> Message:
        try:
            envelope = msgpack.unpackb(payload, raw=False, strict_map_key=True)
        except Exception as exc:  # msgpack raises several unrelated types on garbage
            raise ProtocolError(f"frame is not valid msgpack: {exc}") from None
        if not isinstance(envelope, dict):
            raise ProtocolError("frame is not a message envelope (a map)")
        kind = envelope.get("k")
        if kind not in KINDS:
            raise ProtocolError(f"unknown message kind {kind!r}")
        op, ident, hlc, body = envelope.get("op"), envelope.get("id"), envelope.get("hlc", 0), envelope.get("b", {})
        if not isinstance(hlc, int) or hlc < 0:
            raise ProtocolError(f"invalid clock value {hlc!r}")
        if not isinstance(body, dict):
            raise ProtocolError("message body is not a map")
        if kind in (REQUEST, PUSH):
            if not isinstance(op, str):
                raise ProtocolError(f"{kind} message without an operation name")
            if self._known_ops is not None and op not in self._known_ops:
                raise ProtocolError(f"unknown message type {op!r}", code="unknown-op")
        if kind in (REQUEST, REPLY, ERROR) and not (isinstance(ident, int) or (kind == ERROR and ident is None)):
            raise ProtocolError(f"{kind} message without a request id")
        return Message(kind, op, ident, hlc, body)


# --- terms, quads and events on the wire --------------------------------------------------
# An IRI is a str; a literal is [lexical, datatype] or [lexical, datatype, language].


def term_to_wire(term: Term) -> Any:
    if isinstance(term, IRI):
        return term.value
    if term.language is not None:
        return [term.lexical, term.datatype, term.language]
    return [term.lexical, term.datatype]


def term_from_wire(data: Any, trusted: bool = False) -> Term:
    """Decode a term. `trusted` skips re-validating terms another peer already validated
    (the entry peer checks everything a client sends); it is the hot path of routing."""
    if trusted:
        if type(data) is str:
            return _trusted_iri(data)
        if isinstance(data, list) and len(data) in (2, 3):
            return _trusted_literal(data[0], data[1], data[2] if len(data) == 3 else None)
    try:
        if isinstance(data, str):
            return IRI(data)
        if isinstance(data, list) and len(data) in (2, 3) and all(isinstance(x, str) for x in data):
            return Literal(data[0], data[1], data[2] if len(data) == 3 else None)
    except ModelError as exc:
        raise ProtocolError(f"invalid term: {exc}", code="bad-request") from None
    raise ProtocolError(f"invalid term encoding {data!r}", code="bad-request")


_new = object.__new__
_set = object.__setattr__


@lru_cache(maxsize=1 << 16)
def _trusted_iri(value: str) -> IRI:
    """IRIs recur constantly (graphs, predicates, shared subjects); they are immutable."""
    iri = _new(IRI)
    _set(iri, "value", value)
    return iri


def _trusted_literal(lexical: str, datatype: str, language: str | None) -> Literal:
    literal = _new(Literal)
    _set(literal, "lexical", lexical)
    _set(literal, "datatype", datatype)
    _set(literal, "language", language)
    return literal


def quad_to_wire(quad: Quad) -> list[Any]:
    return [quad.g.value, term_to_wire(quad.s), quad.p.value, term_to_wire(quad.o)]


def quad_from_wire(data: Any) -> Quad:
    if not isinstance(data, list) or len(data) != 4:
        raise ProtocolError(f"invalid quad encoding {data!r}", code="bad-request")
    try:
        return make_quad(*(term_from_wire(x) for x in data))
    except ModelError as exc:
        raise ProtocolError(f"invalid quad: {exc}", code="bad-request") from None


def event_to_wire(event: CompoundEvent) -> dict[str, Any]:
    return {"g": event.graph.value, "q": [[term_to_wire(q.s), q.p.value, term_to_wire(q.o)] for q in event.quads]}


def event_from_wire(data: Any, trusted: bool = False) -> CompoundEvent:
    if not isinstance(data, dict) or not isinstance(data.get("g"), str) or not isinstance(data.get("q"), list):
        raise ProtocolError("invalid compound event encoding", code="bad-request")
    try:
        graph = term_from_wire(data["g"], trusted)
        quads = []
        for item in data["q"]:
            if not isinstance(item, list) or len(item) != 3:
                raise ProtocolError(f"invalid triple encoding {item!r}", code="bad-request")
            s, p, o = (term_from_wire(x, trusted) for x in item)
            quads.append(Quad(graph, s, p, o) if trusted else make_quad(graph, s, p, o))
        if trusted:
            event = _new(CompoundEvent)
            _set(event, "graph", graph)
            _set(event, "quads", tuple(quads))
            return event
        return CompoundEvent(graph, tuple(quads))
    except ModelError as exc:
        raise ProtocolError(f"invalid compound event: {exc}", code="bad-request") from None


def pattern_to_wire(terms: tuple[Term | None, ...]) -> list[Any]:
    return [None if t is None else term_to_wire(t) for t in terms]


def pattern_from_wire(data: Any) -> tuple[Term | None, Term | None, Term | None, Term | None]:
    if not isinstance(data, list) or len(data) != 4:
        raise ProtocolError(f"invalid quad pattern {data!r}: expected [g, s, p, o] with null for variables", code="bad-request")
    g, s, p, o = (None if x is None else term_from_wire(x) for x in data)
    return g, s, p, o


def field_of(body: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """A required body field of the given type, or a bad-request ProtocolError naming it."""
    value = body.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ProtocolError(f"field {name!r} must be {expected}, got {type(value).__name__}", code="bad-request")
    return value
