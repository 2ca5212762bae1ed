"""`eventcloud`: the entry point and the command dispatch table.

Each command is a thin shell over the SDK (`eventcloud.client`) or, for `peer` and
`cluster`, the daemon; errors are one line saying what went wrong and what to do, exit code
1 (2 for usage errors, as argparse does).
"""

from __future__ import annotations

import sys
from typing import Callable, Sequence

import trio

from eventcloud.cli.parser import build_parser
from eventcloud.cli.render import root_cause
from eventcloud.errors import EventCloudError

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
    **{name: _client(name) for name in ("publish", "query", "find", "delete", "status", "leave")},
    "subscribe": _client("subscribe", "eventcloud.cli.subscriptions"),
    "subscriptions": _client("subscriptions", "eventcloud.cli.subscriptions"),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "subscribe" and (args.resume is None) == (args.sparql is None):
        parser.error("subscribe needs the SPARQL text, or --resume ID (not both)")
    if getattr(args, "after", None) is not None and args.resume is None:
        parser.error("--after goes with --resume")
    try:
        return COMMANDS[args.command](args)
    except (EventCloudError, BaseExceptionGroup) as exc:
        cause = root_cause(exc)
        if not isinstance(cause, EventCloudError):
            raise
        print(f"eventcloud {args.command}: {cause.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
