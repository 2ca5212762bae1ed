"""`eventcloud subscribe` and `eventcloud subscriptions list|renew|cancel`.

A durable subscriber keeps a small state file per subscription (its id, ticket and the number
of the last notification it printed), written right after each line it prints, so that
`eventcloud subscribe --resume ID` continues after exactly that line, whoever's peer it
reaches. The file lives in --state-dir ($EVENTCLOUD_STATE_DIR, else
~/.local/state/eventcloud) and is readable by its owner only: it holds the ticket.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from eventcloud.cli.credentials import client_options
from eventcloud.cli.render import notification_json, quads_text, table
from eventcloud.client import ClientError, connect
from eventcloud.errors import ErrorCode

__all__ = ["subscribe", "subscriptions", "StateFile", "TICKET_ENV", "STATE_ENV"]

TICKET_ENV = "EVENTCLOUD_TICKET"
STATE_ENV = "EVENTCLOUD_STATE_DIR"


class StateFile:
    """Where a durable subscriber keeps (id, ticket, last number printed)."""

    def __init__(self, directory: Path | None, ident: str) -> None:
        base = directory or Path(os.environ.get(STATE_ENV) or Path.home() / ".local" / "state" / "eventcloud")
        self.path = base / "subscriptions" / f"{ident}.json"

    def read(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(data))
        os.replace(partial, self.path)  # no fsync: it must survive this process, not the machine


def _ticket(args: argparse.Namespace, saved: dict[str, Any]) -> str:
    if getattr(args, "ticket_file", None):
        try:
            return args.ticket_file.read_text().strip()
        except OSError as exc:
            raise ClientError(f"cannot read the ticket file {args.ticket_file}: {exc.strerror or exc}") from None
    ticket = os.environ.get(TICKET_ENV, "").strip() or saved.get("ticket", "")
    if not ticket:
        raise ClientError(f"subscription {args.id if hasattr(args, 'id') else args.resume}: no ticket (give "
                          f"--ticket-file, set {TICKET_ENV}, or resume where it was made)", ErrorCode.FORBIDDEN)
    return ticket


def _say(line: str) -> None:
    print(f"eventcloud subscribe: {line}", file=sys.stderr, flush=True)


#: What --format nquads prints (an event's quads) is only in notifications of this kind.
_NQUADS_NEEDS = "event"


def _nquads_refused(kind: str) -> int:
    _say(f"--format nquads prints the events' quads, which only --kind event notifications carry (this "
         f"subscription is of kind {kind}): use --kind event, or --format jsonl or table for {kind}")
    return 2


async def subscribe(args: argparse.Namespace) -> int:
    durable = args.durable or args.resume is not None
    if args.format == "nquads" and args.resume is None and args.kind != _NQUADS_NEEDS:
        return _nquads_refused(args.kind)   # before anything is made
    async with connect(args.peer, on_event=_say, **client_options(args)) as client:
        if args.resume is not None:
            state = StateFile(args.state_dir, args.resume)
            saved = state.read()
            after = args.after if args.after is not None else saved.get("after")
            sub = await client.resume(args.resume, _ticket(args, saved), after, auto_ack=False)
            header = {"subscription": sub.id, "status": "resumed", "durable": True, "after": sub.resumed_after,
                      "expires": sub.expires}
            if args.format == "nquads" and sub.kind != _NQUADS_NEEDS:
                return _nquads_refused(sub.kind)   # resumed, nothing acknowledged: a later resume gets it all
        else:
            sub = await client.subscribe(args.sparql, kind=args.kind, durable=durable, lease=args.lease or 0.0,
                                         auto_ack=False)
            state = StateFile(args.state_dir, sub.id)
            header = {"subscription": sub.id, "status": "active", "durable": durable}
            if durable:
                header |= {"ticket": sub.ticket, "expires": sub.expires}
        if durable and args.resume is None:
            state.write({"id": sub.id, "ticket": sub.ticket, "after": 0, "peer": client.address})
        if args.format == "jsonl":
            print(json.dumps(header), flush=True)
        else:
            what = f"durable, ticket in {state.path}" if durable else args.kind
            print(f"# subscription {sub.id} {header['status']} ({what}); Ctrl-C to stop", file=sys.stderr,
                  flush=True)
        if args.count == 0:  # made (and, if durable, kept with its ticket): nothing to wait for
            return 0
        count = 0
        try:
            async for note in sub:
                _print(args.format, note)
                if durable:
                    state.write({"id": sub.id, "ticket": sub.ticket, "after": note.seq, "peer": client.address})
                    sub.ack(note.seq)
                count += 1
                if args.count is not None and count >= args.count:
                    break
        except ClientError as exc:
            _say(exc.message)
            return 1
    return 0


def _print(form: str, note: Any) -> None:
    if form == "jsonl":
        print(json.dumps(notification_json(note), ensure_ascii=False), flush=True)
    elif form == "nquads":
        sys.stdout.write(quads_text(note.quads) if note.quads else f"# {note.event}\n")
        sys.stdout.flush()
    else:
        print(f"{note.seq or '':>6} {note.kind:8s} {note.event}", flush=True)
        for solution in note.solutions:
            print("         " + "  ".join(f"?{k}={v.n3()}" for k, v in solution.items()), flush=True)
        for quad in note.quads:
            print("         " + quad.n_quads(), flush=True)
        if note.error:
            print(f"         ! {note.error}", flush=True)


async def subscriptions(args: argparse.Namespace) -> int:
    """list (operators: needs the admin token where one is set), renew and cancel (the ticket)."""
    async with connect(args.peer, **client_options(args)) as client:
        if args.action == "list":
            found = await client.subscriptions()
            if args.format == "json":
                print(json.dumps([s.to_wire() for s in found], indent=1))
                return 0
            rows = [[s.id, s.kind, "durable" if s.durable else "session", _when(s.expires), str(s.peers),
                     f"{s.last}/{s.acked}/{s.retained}" if s.durable else "", s.attached or s.entry,
                     " ".join(s.sparql.split())[:60]] for s in found]
            table(["id", "kind", "type", "lease ends", "peers", "last/acked/kept", "delivered by", "sparql"], rows)
            return 0
        saved = StateFile(args.state_dir, args.id).read()
        if args.action == "renew":
            expires = await client.renew(args.id, _ticket(args, saved), args.lease or 0.0)
            print(f"subscription {args.id} renewed until {_when(expires)}")
        else:
            ticket = "" if args.admin else _ticket(args, saved)
            await client.unsubscribe(args.id, ticket)
            print(f"subscription {args.id} cancelled")
    return 0


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"
