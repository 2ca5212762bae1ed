"""How the CLI shows things: notifications, quads, result tables, zones, and errors in one line."""

from __future__ import annotations

import json
from typing import Any, Sequence

from eventcloud.client import Notification
from eventcloud.overlay.routing import partition_check
from eventcloud.rdf.model import Quad
from eventcloud.wire.messages import Status

__all__ = ["notification_json", "quads_text", "cell", "table", "partition_report", "root_cause"]


def root_cause(exc: BaseException) -> BaseException:
    """The one error inside nested exception groups (trio wraps errors from nurseries)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def notification_json(note: Notification) -> dict[str, Any]:
    """A notification as one line of `eventcloud subscribe`: solutions as N3 terms by variable."""
    head: dict[str, Any] = {"subscription": note.subscription, "event": note.event, "kind": note.kind}
    if note.seq:
        head["seq"] = note.seq
    return {**head, **note.json_fields(lambda solutions: {
        "solutions": [{k: v.n3() for k, v in s.items()} for s in solutions]})}


_XSD = "http://www.w3.org/2001/XMLSchema#"
#: Datatypes whose values a table shows as bare numbers (68971, not "68971"^^xsd:integer).
PLAIN_NUMBERS = frozenset(_XSD + t for t in (
    "integer", "decimal", "double", "float", "long", "int", "short", "byte", "nonNegativeInteger",
    "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedLong", "unsignedInt", "unsignedShort",
    "unsignedByte", "boolean"))


def quads_text(quads: Sequence[Quad]) -> str:
    return "".join(q.n_quads() + "\n" for q in quads)


def cell(binding: dict[str, Any] | None) -> str:
    if binding is None:
        return ""
    if binding["type"] == "uri":
        return f"<{binding['value']}>"
    if binding["type"] == "literal":
        value = json.dumps(binding["value"], ensure_ascii=False)
        if "xml:lang" in binding:
            return f"{value}@{binding['xml:lang']}"
        if binding.get("datatype") in PLAIN_NUMBERS:  # counts and measures read as numbers
            return binding["value"]
        if "datatype" in binding and not binding["datatype"].endswith("#string"):
            return f"{value}^^<{binding['datatype']}>"
        return value
    return f"_:{binding['value']}"


def table(columns: list[str], rows: list[list[str]]) -> None:
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


def partition_report(status: Status) -> tuple[bool, str]:
    """Do the peers' zones partition the space exactly? (volumes add up, none overlap)"""
    ok, overlaps = partition_check(status.space.whole_space(), [p.zone.bounds for p in status.peers])
    return ok, f"zones partition the space: {'yes' if ok else 'NO'} ({len(status.peers)} zones, {overlaps} overlaps)"
