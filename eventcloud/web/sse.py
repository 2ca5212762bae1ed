"""Server-Sent Events framing (https://html.spec.whatwg.org/multipage/server-sent-events.html):
the bytes of one event, a keep-alive comment, and the Last-Event-ID a reconnecting client sends.

Each notification is one event whose `id:` is its durable sequence number, so a client that
reconnects with `Last-Event-ID: N` (browsers do it by themselves) gets exactly the
notifications after N.
"""

from __future__ import annotations

import json
from typing import Any

from eventcloud.web.http import HttpError, Request

__all__ = ["event", "comment", "last_event_id", "HEADERS"]

HEADERS = [("cache-control", "no-cache"), ("x-accel-buffering", "no")]


def event(data: Any, *, id: int | None = None, name: str | None = None, retry_ms: int | None = None) -> bytes:
    """One SSE event; `data` is sent as JSON (one line: JSON escapes every newline)."""
    lines = []
    if retry_ms is not None:
        lines.append(f"retry: {retry_ms}")
    if name is not None:
        lines.append(f"event: {name}")
    if id is not None:
        lines.append(f"id: {id}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def comment(text: str = "") -> bytes:
    return f": {text}\n\n".encode("utf-8")


def last_event_id(request: Request) -> int | None:
    """The number after which to resume: the Last-Event-ID header, else a `lastEventId` or `after`
    parameter (for clients that cannot set headers); None when none is given."""
    value = request.header("last-event-id")
    if value is None:
        value = request.param("lastEventId") or request.param("after")
    if value is None or not value.strip():
        return None
    value = value.strip()
    if not value.isdigit():
        raise HttpError(400, f"Last-Event-ID must be a notification number (0, 1, 2, …), got {value[:40]!r}")
    return int(value)
