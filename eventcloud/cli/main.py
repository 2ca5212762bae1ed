"""`eventcloud`: the entry point and the command dispatch table.

Each command is a thin shell over the SDK (`eventcloud.client`) or, for `peer` and
`cluster`, the daemon; errors are one line saying what went wrong and what to do, exit code
1 (2 for usage errors, as argparse does).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

import trio

from eventcloud.cli.credentials import PEER_ENV, TOKEN_ENV
from eventcloud.cli.parser import build_parser
from eventcloud.cli.render import root_cause
from eventcloud.errors import ErrorCode, EventCloudError
from eventcloud.net.transport import AddressError, parse_address

__all__ = ["main", "COMMANDS"]


def _client(name: str, module: str = "eventcloud.cli.commands") -> Callable:
    def run(args) -> int:  # type: ignore[no-untyped-def]
        import importlib

        return trio.run(getattr(importlib.import_module(module), name), args)
    return run


def _daemon(name: str) -> Callable:
    def run(args) -> int:  # type: ignore[no-untyped-def]
        from eventcloud.cli import daemon

        return getattr(daemon, name)(args)
    return run


def _gateway(args) -> int:  # type: ignore[no-untyped-def]
    from eventcloud.cli.gateway import gateway

    return gateway(args)


def _demo(args) -> int:  # type: ignore[no-untyped-def]
    from eventcloud.cli.demo import demo

    return trio.run(demo, args)


#: command name -> function of the parsed arguments returning the exit code
COMMANDS: dict[str, Callable] = {
    "peer": _daemon("peer"), "cluster": _daemon("cluster"), "demo": _demo, "gateway": _gateway,
    **{name: _client(name) for name in ("publish", "query", "find", "dump", "delete", "status", "leave")},
    "subscribe": _client("subscribe", "eventcloud.cli.subscriptions"),
    "subscriptions": _client("subscriptions", "eventcloud.cli.subscriptions"),
    "schema": _client("schema", "eventcloud.cli.schema"),
}


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _quiet_stdout() -> None:
    """After a broken pipe (`eventcloud … | head`): nothing more to say, and no error at exit
    when Python flushes stdout (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _peers(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--peer, else $EVENTCLOUD_PEER (comma-separated), for every command that talks to a peer."""
    if getattr(args, "peer", "") is not None:
        return
    parser = getattr(args, "command_parser", parser)  # `eventcloud status: error: …` under status's usage
    text = os.environ.get(PEER_ENV, "").strip()
    if not text:
        parser.error(f"give an entry peer with --peer HOST:PORT (or set {PEER_ENV}=HOST:PORT)")
    peers = [p.strip() for p in text.split(",") if p.strip()]
    for peer in peers:
        try:
            parse_address(peer)
        except AddressError as exc:
            parser.error(f"{PEER_ENV}: {exc}")
    args.peer = peers


def _command(args: argparse.Namespace) -> str:
    """The command as typed, with its action: `subscriptions list`, `schema load`, `delete`."""
    action = getattr(args, "action", None)
    return f"{args.command} {action}" if action else args.command


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command_parser = getattr(args, "command_parser", parser)
    if args.command == "subscribe" and (args.resume is None) == (args.sparql is None):
        command_parser.error("give the SPARQL text, or --resume ID (not both)")
    if getattr(args, "after", None) is not None and args.resume is None:
        command_parser.error("--after goes with --resume")
    _peers(parser, args)
    name = _command(args)
    try:
        code = COMMANDS[args.command](args)
        sys.stdout.flush()  # a reader gone (`| head`) shows here at the latest, not at exit
        return code
    except BaseException as exc:  # every way out is one line, never a traceback, unless it is a bug
        leaves = _leaves(exc)
        if any(isinstance(leaf, BrokenPipeError) for leaf in leaves):
            _quiet_stdout()
            return 141  # as a shell reports a command killed by SIGPIPE
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            print(f"eventcloud {name}: interrupted", file=sys.stderr)
            return 130
        cause = root_cause(exc)
        if isinstance(cause, EventCloudError):
            print(f"eventcloud {name}: {cause.message}", file=sys.stderr)
            if cause.code is ErrorCode.FORBIDDEN and "admin token" in cause.message:
                print(f"eventcloud {name}: give it with `eventcloud {name} --admin-token-file FILE …` "
                      f"(a local cluster writes it to DATA_DIR/admin.token) or set {TOKEN_ENV}", file=sys.stderr)
            return 1
        if isinstance(cause, SystemExit):
            raise
        raise
