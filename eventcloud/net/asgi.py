"""What every ASGI application of ours answers alike: the lifespan protocol (hypercorn sends
startup and shutdown; neither the gateway nor the local authority has anything to do then)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

__all__ = ["answer_lifespan"]


async def answer_lifespan(receive: Callable[[], Awaitable[dict[str, Any]]],
                          send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """Acknowledge startup and shutdown until the server shuts down."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
