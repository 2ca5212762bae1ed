"""One error hierarchy for the whole system, and the error codes that cross the wire.

Every error EventCloud raises on purpose derives from `EventCloudError` and carries an
`ErrorCode`; an error reply on the wire is exactly (code, message), so a client in any
language can act on the code and show the message. The split follows h11: a
`ProtocolError` breaks a *connection* (garbage, an oversized frame) and the connection is
closed after one error frame; a `RequestError` fails *one request* and the connection goes
on. `LocalProtocolError` is raised when this side would break the protocol (a reply too
large to send), `RemoteProtocolError` when the other side did.

Errors of the pure packages (a malformed term, a refused subscription, bad RDF input) are
request errors too: they reach the user with their code and message, never a traceback.
The `internal` code is reserved for bugs.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """The `code` of an error reply; documented one by one in docs/protocol.md."""

    # connection-fatal: the connection is closed after the error frame
    PROTOCOL = "protocol"                  # not a frame of ours: bad msgpack, bad envelope
    TOO_LARGE = "too-large"                # a frame over the size limit
    UNKNOWN_OP = "unknown-op"              # an operation this peer does not know
    # per request
    BAD_REQUEST = "bad-request"            # a field missing, of the wrong type, or invalid
    BAD_SUBSCRIPTION = "bad-subscription"  # subscription text refused (names the construct)
    BAD_QUERY = "bad-query"                # one-time SPARQL query refused or failed
    BAD_RDF = "bad-rdf"                    # RDF input that does not parse or breaks the model
    NOT_FOUND = "not-found"                # no such subscription, event or peer
    GONE = "gone"                          # a subscription that ended (lease expired, cancelled), or
                                           # notifications no longer kept (acknowledged)
    FORBIDDEN = "forbidden"                # not allowed for this connection or ticket
    UNREACHABLE = "unreachable"            # a peer on the way did not answer
    UNAVAILABLE = "unavailable"            # a zone has no live owner right now; retry
    NOT_SERVING = "not-serving"            # this peer serves no zone yet (joining, restarting): peers
                                           # route around it as if it were down; retry, or another peer
    BUSY = "busy"                          # overloaded; retry later
    TIMEOUT = "timeout"                    # gave up waiting
    ROUTING = "routing"                    # no route (a routing loop or a broken overlay)
    CANNOT_LEAVE = "cannot-leave"          # a leave that cannot be done now
    CONFLICT = "conflict"                  # a graph IRI that holds another event (other content)
    INCOMPATIBLE = "incompatible"          # a joining peer whose operator set or clock is not the overlay's
    INTERNAL = "internal"                  # a bug: please report it


#: Codes after which the connection that carried them is closed.
CONNECTION_FATAL = frozenset({ErrorCode.PROTOCOL, ErrorCode.TOO_LARGE, ErrorCode.UNKNOWN_OP})
#: Codes worth retrying the same request for (the cause is transient).
TRANSIENT = frozenset({ErrorCode.UNREACHABLE, ErrorCode.UNAVAILABLE, ErrorCode.NOT_SERVING, ErrorCode.BUSY,
                       ErrorCode.TIMEOUT})


class EventCloudError(Exception):
    """Base of every error EventCloud raises on purpose: a code and a message for people."""

    default_code = ErrorCode.INTERNAL

    def __init__(self, message: str, code: ErrorCode | str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = _code(code) if code is not None else self.default_code

    @property
    def transient(self) -> bool:
        return self.code in TRANSIENT


def _code(code: ErrorCode | str) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.INTERNAL


# --- connection-level -------------------------------------------------------------------------

class ProtocolError(EventCloudError):
    """The protocol was broken; the connection cannot continue."""

    default_code = ErrorCode.PROTOCOL


class LocalProtocolError(ProtocolError):
    """This side would break the protocol (e.g. a message over the frame limit)."""


class RemoteProtocolError(ProtocolError):
    """The other side broke the protocol (garbage, an oversized or malformed frame)."""


class ConnectionLost(EventCloudError):
    """The connection closed or broke before the reply arrived."""

    default_code = ErrorCode.UNREACHABLE


class Unreachable(ConnectionLost):
    """Nothing answers at that address."""


# --- per request ------------------------------------------------------------------------------

class RequestError(EventCloudError):
    """One request failed; the connection goes on. Raised by handlers, sent as an error reply."""

    default_code = ErrorCode.BAD_REQUEST


class BadRequest(RequestError):
    """A request body that does not fit its message type (names the field)."""

    default_code = ErrorCode.BAD_REQUEST


class RemoteError(RequestError):
    """The other side answered a request with an error reply (its code and message)."""

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        super().__init__(message, code)

    def __str__(self) -> str:
        return f"{self.message} [{self.code}]"


class OperatorMismatch(RequestError):
    """A peer may not join an overlay whose operators differ from its own (names the missing ones)."""

    default_code = ErrorCode.INCOMPATIBLE

    def __init__(self, message: str, missing: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing   # the overlay's operators this peer lacks
        self.extra = extra       # this peer's operators the overlay lacks


class ClockOffset(RequestError):
    """This host's wall clock is further from other peers' than the overlay allows: leases set by
    one peer are compared with another's clock, so it may not serve until its time is set right."""

    default_code = ErrorCode.INCOMPATIBLE


class Unavailable(RequestError):
    """The request cannot be served now (a peer down, a zone without owner, overload)."""

    default_code = ErrorCode.UNAVAILABLE


class AuthorityUnreachable(Unavailable):
    """The ownership authority (etcd, or the local one) did not answer: no ownership change now."""


class LeaseExpired(Unavailable):
    """A lease the ownership authority no longer knows: whatever it held is released."""


class Fenced(Unavailable):
    """A write refused by the fence: its owner's lease on the zone lapsed, or a newer epoch of the
    zone exists. Nothing of it was acknowledged; the client retries and reaches the zone's owner."""


# --- pure-package errors (input that breaks the model or a language) --------------------------

class InputError(BadRequest, ValueError):
    """Base of the pure packages' input errors (a BadRequest, and a ValueError as they reject values)."""


class ModelError(InputError):
    """A term, quad or compound event that breaks the data model."""

    default_code = ErrorCode.BAD_REQUEST


class GeometryError(InputError):
    """Bad geometry input: invalid space parameters, garbage wire data, impossible split/route."""

    default_code = ErrorCode.BAD_REQUEST
