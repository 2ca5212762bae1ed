"""`eventcloud gateway`: the HTTP gateway (SPARQL Protocol, publishing, SSE and WebSocket
subscriptions, the dashboard) in the foreground, in front of the peers given."""

from __future__ import annotations

import argparse
import errno
import logging
import signal
import sys

import trio

from eventcloud.cli.credentials import CredentialError, client_options
from eventcloud.cli.render import root_cause

__all__ = ["gateway"]


def gateway(args: argparse.Namespace) -> int:
    from eventcloud.web.app import Gateway, GatewaySettings
    from eventcloud.web.overlay import Overlay
    from eventcloud.web.server import serve_gateway

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        options = client_options(args)
    except CredentialError as exc:
        print(f"eventcloud gateway: {exc.message}", file=sys.stderr)
        return 2
    overlay = Overlay(args.peer, admin_token=options["admin_token"], publish_token=options["publish_token"],
                      tls=options["tls"])
    settings = GatewaySettings(admin_token=options["admin_token"], cors=tuple(args.cors or ()),
                               max_body=args.max_body, ack_delay=args.ack_delay, linger=args.linger)
    app = Gateway(overlay, settings)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(serve_gateway, app, args.listen)
            auth = ("bearer token required for DELETE /events and the subscription list" if settings.admin_token else
                    "no admin token given: if the overlay has one (eventcloud cluster writes it to DATA_DIR/admin.token),"
                    " DELETE /events answers 403 until the gateway is started with --admin-token-file")
            state = f"connected through {overlay.address}" if overlay.connected else f"not connected yet: {overlay.error}"
            print(f"eventcloud gateway: listening on {url} for the overlay at {', '.join(args.peer)} "
                  f"({state}; {auth})", flush=True)
            print(f"  dashboard {url}/   SPARQL {url}/sparql   publish POST {url}/events   "
                  f"subscribe {url}/subscriptions/stream?query=…   WebSocket {url.replace('http', 'ws', 1)}/ws",
                  file=sys.stderr, flush=True)
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    try:
        trio.run(main)
    except (OSError, BaseExceptionGroup) as failure:
        exc = root_cause(failure)
        if not isinstance(exc, OSError):
            raise
        if exc.errno == errno.EADDRINUSE:
            print(f"eventcloud gateway: cannot listen on {args.listen}: address already in use (another gateway "
                  f"or program serves there; pick another port, or :0 for any free one)", file=sys.stderr)
        else:
            print(f"eventcloud gateway: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0
