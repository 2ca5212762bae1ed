"""`eventcloud schema load FILE` and `eventcloud schema show`: the overlay's class taxonomy
(the `rdfs:subClassOf` triples that is-a subscriptions read; docs/subscriptions.md)."""

from __future__ import annotations

import argparse
import json

from eventcloud.cli.credentials import client_options
from eventcloud.cli.render import table
from eventcloud.client import connect


async def schema(args: argparse.Namespace) -> int:
    async with connect(args.peer, **client_options(args)) as client:
        if args.action == "load":
            info = await client.load_schema(args.file, args.format)
        else:
            info = await client.schema()
    taxonomy = info.taxonomy
    if args.action == "show" and args.format_out == "turtle":
        print(taxonomy.to_turtle(), end="")
        return 0
    if args.action == "show" and args.format_out == "json":
        print(json.dumps(info.to_wire(), indent=1))
        return 0
    if args.action == "load":
        print(f"taxonomy version {taxonomy.version} ({len(taxonomy.edges)} subclass edges, digest "
              f"{taxonomy.digest}) loaded on {len(info.peers)} peer{'s' if len(info.peers) != 1 else ''}")
    else:
        print(f"taxonomy version {taxonomy.version}: {len(taxonomy.edges)} subclass edges, digest {taxonomy.digest}")
        table(["peer", "version", "digest"], [[p.id, str(p.version), p.digest] for p in info.peers])
    behind = [p.id for p in info.peers if p.version != taxonomy.version]
    if info.unreachable or behind:
        print(f"not yet on {', '.join(list(info.unreachable) + behind)}: they take it from a neighbour "
              f"within seconds of coming back")
    return 0
