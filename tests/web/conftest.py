"""Fixtures of the gateway's tests: a real local overlay (peer processes, with a cluster secret
and an admin token) shared by a module, and the gateway served in-process on trio (port 0)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, AsyncIterator

import httpx
import pytest

from eventcloud.web.app import Gateway, GatewaySettings
from eventcloud.web.overlay import Overlay
from eventcloud.web.server import serve_gateway
from peers.cluster import LocalCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # no takeover within 60 s however loaded the machine: a peer stalled past the default 3 s by
    # a loaded CI machine would have its zone taken over and step down, ending the gateway's
    # sessions through it (tests/peers/test_freeze.py tests that behaviour itself)
    with LocalCluster(3, data_dir=tmp_path_factory.mktemp("cluster"), extra=["--failure-timeout", "60"]) as running:
        yield running


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


@pytest.fixture
async def gateway(nursery, cluster) -> Served:
    return await serve(nursery, [cluster.entry], cluster.admin_token, cors=("http://app.example",))


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
