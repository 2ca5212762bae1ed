"""What the gateway's tests share: the gateway served in-process on trio (port 0), and a
Server-Sent Events reader that parses a stream as a browser would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, AsyncIterator

import httpx

from eventcloud.web.app import Gateway, GatewaySettings
from eventcloud.web.overlay import Overlay
from eventcloud.web.server import serve_gateway


@dataclass
class Served:
    url: str
    app: Gateway
    token: str | None

    @property
    def auth(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=self.auth, timeout=30, **kwargs)


async def serve(nursery, peers: list[str], token: str | None, **settings: Any) -> Served:
    app = Gateway(Overlay(peers, admin_token=token), GatewaySettings(admin_token=token, **settings))
    url = await nursery.start(serve_gateway, app, "127.0.0.1:0")
    return Served(url, app, token)


# --- Server-Sent Events, read as a client would ---------------------------------------------------

@dataclass
class SseEvent:
    id: str | None
    event: str
    data: Any


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """Parse an event stream (https://html.spec.whatwg.org/#event-stream-interpretation)."""
    ident, name, data = None, "message", []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SseEvent(ident, name, json.loads("\n".join(data)))
            ident, name, data = None, "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value
            elif field == "id":
                ident = value
