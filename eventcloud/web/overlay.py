"""The gateway's I/O adapter to the overlay: SDK connections, and overlay errors as HTTP errors.

One shared connection (`Overlay.client`) carries the short requests: queries, publications,
status, renew and cancel. It is opened at start and reopened whenever it is lost; while no peer
answers, requests fail at once with 502 naming the peers tried, and the gateway keeps serving.
Each live stream (an SSE response, a WebSocket) opens a connection of its own
(`Overlay.session`), so that what a stream attached ends with it: nothing is pushed to the
gateway for a subscriber that left.
"""

from __future__ import annotations

import logging
import ssl
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import AsyncIterator, Iterator

import trio

from eventcloud.client import Client, ClientError, connect
from eventcloud.errors import ErrorCode, EventCloudError
from eventcloud.web.http import HttpError, from_code

log = logging.getLogger(__name__)

__all__ = ["Overlay", "translated", "Unavailable"]


class Unavailable(HttpError):
    """No connection to the overlay right now."""


class _Closing(Exception):
    """Leaves a session's `connect` without acknowledging what was handed out but not confirmed."""


class translated:
    """`with translated(): …` turns SDK errors and time-outs into HttpErrors."""

    def __init__(self, what: str = "", forbidden: str = "") -> None:
        self.what = what
        self.forbidden = forbidden  # added to a refusal for want of the admin token

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:  # type: ignore[no-untyped-def]
        if exc is None or isinstance(exc, HttpError):
            return False
        if isinstance(exc, EventCloudError):
            hint = self.forbidden if exc.code is ErrorCode.FORBIDDEN and "admin token" in exc.message else ""
            raise from_code(exc.code, f"{self.what}{exc.message}{hint}") from None
        if isinstance(exc, trio.TooSlowError):
            raise HttpError(504, f"{self.what}the overlay did not answer in time", code=ErrorCode.TIMEOUT.value) from None
        return False


class Overlay:
    def __init__(self, peers: list[str], *, admin_token: str | None = None, publish_token: str | None = None,
                 tls: ssl.SSLContext | str | Path | bool | None = None, request_timeout: float = 60.0,
                 reconnect: float = 10.0) -> None:
        if not peers:
            raise ValueError("the gateway needs at least one peer address")
        self.peers = list(peers)
        self.admin_token = admin_token
        # what a client refused for want of the admin token is told: it is the gateway's to hold
        self._forbidden = "" if admin_token else ("; this gateway holds none: start it with `eventcloud gateway "
                                                  "--admin-token-file FILE`")
        self.publish_token = publish_token   # where the overlay has a publish policy: what POST /events may publish
        self.tls = tls
        self.request_timeout = request_timeout
        self.reconnect = reconnect
        self.error: str | None = "not connected yet"
        self.sessions = 0
        self._client: Client | None = None
        self._connected = trio.Event()

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.lost is None

    @property
    def address(self) -> str | None:
        return self._client.address if self.connected else None  # type: ignore[union-attr]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the shared connection open (started after the first attempt, whether it worked)."""
        started = False
        delay = 0.2
        while True:
            try:
                async with connect(self.peers, source="gateway", admin_token=self.admin_token,
                                   publish_token=self.publish_token, tls=self.tls, reconnect=self.reconnect, on_event=lambda line: log.info("overlay: %s", line)) as client:
                    self._client, self.error, delay = client, None, 0.2
                    self._connected.set()
                    log.info("gateway connected to the overlay through %s", client.address)
                    if not started:
                        task_status.started()
                        started = True
                    while client.lost is None:
                        await trio.sleep(0.2)
                    self.error = client.lost
            except ClientError as exc:
                self.error = exc.message
            self._client = None
            self._connected = trio.Event()
            log.warning("gateway: no connection to the overlay: %s", self.error)
            if not started:
                task_status.started()
                started = True
            await trio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def client(self) -> Client:
        """The shared connection; 502 while there is none."""
        client = self._client
        if client is None or client.lost is not None:
            raise HttpError(502, f"no connection to the overlay (peers {', '.join(self.peers)}): "
                                 f"{self.error or (client.lost if client else 'reconnecting')}",
                            code=ErrorCode.UNREACHABLE.value)
        return client

    @contextmanager
    def request(self, what: str = "") -> Iterator[None]:
        """Bound a request in time and translate its failures."""
        with translated(what, self._forbidden), trio.fail_after(self.request_timeout):
            yield

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Client]:
        """A connection of its own for one stream. On leaving, only what the stream acknowledged
        explicitly (`Subscription.ack`) is acknowledged to the overlay."""
        try:
            with translated(forbidden=self._forbidden):
                async with connect(self.peers, source="gateway-stream", admin_token=self.admin_token,
                                   publish_token=self.publish_token, tls=self.tls, reconnect=self.reconnect) as client:
                    self.sessions += 1
                    try:
                        yield client
                    finally:
                        self.sessions -= 1
                    raise _Closing()
        except _Closing:
            pass
