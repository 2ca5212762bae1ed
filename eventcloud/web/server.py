"""Serving the gateway: hypercorn's trio worker around the ASGI app (`eventcloud gateway`).

Why hypercorn: it is the maintained ASGI server with a native trio worker (the project's
stack: no asyncio loop beside trio), HTTP/1.1 and HTTP/2 through h11/h2 and WebSocket through
wsproto (sans-I/O protocol libraries, like our own wire layer), and it reports the bound
address to `nursery.start`, so tests serve on port 0.
"""

from __future__ import annotations

import logging
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from eventcloud.web.app import Gateway

__all__ = ["serve_gateway"]


async def serve_gateway(gateway: Gateway, listen: str, *,
                        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Run the gateway (its overlay connection, then the HTTP server) until cancelled; started
    with the base URL it serves, e.g. http://127.0.0.1:8080."""
    config = Config()
    config.bind = [listen]
    config.accesslog = None
    config.errorlog = logging.getLogger("eventcloud.web.server")
    config.keep_alive_timeout = 75
    config.graceful_timeout = 1
    config.websocket_ping_interval = 20
    async with trio.open_nursery() as nursery:
        await nursery.start(gateway.run)
        binds: Any = await nursery.start(serve, gateway, config)
        task_status.started(binds[0])
