"""HTTP as the gateway sees it: a request read from an ASGI scope, a response to send, an
error with a status, content negotiation, and the one table from overlay error codes to
HTTP statuses. No I/O here: `app` reads the body and sends the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qsl

from eventcloud.errors import ErrorCode

__all__ = ["Request", "Response", "HttpError", "negotiate", "media_type", "STATUS_OF", "REASONS", "from_code"]

REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
           409: "Conflict", 410: "Gone", 413: "Content Too Large", 415: "Unsupported Media Type",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}

#: The HTTP status of each overlay error code (docs/web.md lists them).
STATUS_OF: Mapping[ErrorCode, int] = {
    ErrorCode.BAD_REQUEST: 400, ErrorCode.BAD_SUBSCRIPTION: 400, ErrorCode.BAD_QUERY: 400, ErrorCode.BAD_RDF: 400,
    ErrorCode.NOT_FOUND: 404, ErrorCode.GONE: 410, ErrorCode.FORBIDDEN: 403, ErrorCode.TOO_LARGE: 413,
    ErrorCode.CANNOT_LEAVE: 409, ErrorCode.CONFLICT: 409,
    ErrorCode.UNREACHABLE: 502, ErrorCode.ROUTING: 502, ErrorCode.PROTOCOL: 502, ErrorCode.UNKNOWN_OP: 502,
    ErrorCode.INTERNAL: 502,
    ErrorCode.UNAVAILABLE: 503, ErrorCode.BUSY: 503, ErrorCode.TIMEOUT: 504,
}


class HttpError(Exception):
    """A request that fails with `status`; `message` is the plain-text body people read."""

    def __init__(self, status: int, message: str, headers: Iterable[tuple[str, str]] = (),
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = list(headers)
        self.code = code  # the overlay's error code, when the overlay refused

    def response(self) -> "Response":
        body = self.message if self.message.endswith("\n") else self.message + "\n"
        headers = list(self.headers)
        if self.code:
            headers.append(("eventcloud-error", self.code))
        if self.status in (503,) and not any(k.lower() == "retry-after" for k, _ in headers):
            headers.append(("retry-after", "1"))
        return Response(self.status, body.encode("utf-8"), "text/plain; charset=utf-8", headers)


def from_code(code: ErrorCode | str, message: str) -> HttpError:
    """The HttpError for an overlay refusal (its code decides the status)."""
    try:
        known = ErrorCode(code)
    except ValueError:
        known = ErrorCode.INTERNAL
    status = STATUS_OF.get(known, 502)
    if known is ErrorCode.INTERNAL:
        message = f"the overlay failed with an internal error: {message}"
    return HttpError(status, message, code=known.value)


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)

    def header_list(self) -> list[tuple[bytes, bytes]]:
        out = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers]
        if self.content_type is not None:
            out.append((b"content-type", self.content_type.encode("latin-1")))
        out.append((b"content-length", str(len(self.body)).encode()))
        return out


@dataclass
class Request:
    """What a handler needs of one request; `body` is filled in by the app for methods with one."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""
    client: str = ""

    @classmethod
    def from_scope(cls, scope: Mapping[str, Any]) -> "Request":
        headers: dict[str, str] = {}
        for name, value in scope.get("headers", ()):
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        client = scope.get("client") or ("", 0)
        return cls(scope.get("method", "GET").upper(), scope.get("path", "/"),
                   parse_query(scope.get("query_string", b"")), headers, client=f"{client[0]}:{client[1]}")

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def header(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)

    @property
    def content_type(self) -> str:
        return media_type(self.headers.get("content-type", ""))

    def form(self) -> dict[str, list[str]]:
        """The body as application/x-www-form-urlencoded fields."""
        try:
            text = self.body.decode("utf-8")
        except UnicodeDecodeError:
            raise HttpError(400, "the form body is not UTF-8 text") from None
        return parse_query(text)


def parse_query(text: bytes | str) -> dict[str, list[str]]:
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    fields: dict[str, list[str]] = {}
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=False, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        raise HttpError(400, "the query string is not UTF-8 after percent-decoding") from None
    for key, value in pairs:
        fields.setdefault(key, []).append(value)
    return fields


def media_type(header: str) -> str:
    """`text/turtle; charset=utf-8` -> `text/turtle`."""
    return header.split(";", 1)[0].strip().lower()


def _accept_entries(header: str) -> list[tuple[str, float, int]]:
    """(media range, q, position) for each entry of an Accept header."""
    entries = []
    for position, part in enumerate(header.split(",")):
        pieces = [p.strip() for p in part.split(";")]
        name = pieces[0].lower()
        if not name:
            continue
        q = 1.0
        for param in pieces[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = max(0.0, min(1.0, float(value)))
                except ValueError:
                    q = 0.0
        entries.append((name, q, position))
    return entries


def negotiate(accept: str | None, offered: list[str]) -> str | None:
    """The offered media type the Accept header prefers (the first offered on a tie or without a
    header); None when it accepts none of them (-> 406)."""
    if not accept or not accept.strip():
        return offered[0]
    entries = _accept_entries(accept)
    best: tuple[float, int, int, int] | None = None
    chosen: str | None = None
    for rank, candidate in enumerate(offered):
        kind = candidate.split("/", 1)[0]
        match: tuple[float, int, int] | None = None  # (q, specificity, -position)
        for name, q, position in entries:
            if name == candidate:
                specificity = 2
            elif name == f"{kind}/*":
                specificity = 1
            elif name == "*/*" or name == "*":
                specificity = 0
            else:
                continue
            if match is None or (specificity, -position) > (match[1], match[2]):
                match = (q, specificity, -position)
        if match is None or match[0] <= 0:
            continue
        key = (match[0], match[1], match[2], -rank)
        if best is None or key > best:
            best, chosen = key, candidate
    return chosen
