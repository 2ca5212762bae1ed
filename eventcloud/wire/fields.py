"""Codecs of domain values (terms, quads, points, zones, …) shared by every message module."""

from __future__ import annotations

import re
from typing import Any

from eventcloud.errors import BadRequest
from eventcloud.overlay.plans import Neighbour
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire import codec as c
from eventcloud.wire.schema import Codec

_PEER_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")


def _peer_id(data: Any, trusted: bool) -> str:
    """A peer's id names files and directories (replica copies, stand-ins): never a path."""
    if type(data) is not str or _PEER_ID.fullmatch(data) is None:
        raise BadRequest(f"expected a peer id (1 to 64 letters, digits, '-' or '_'), got {str(data)[:40]!r}")
    return data


def _batch(data: Any, trusted: bool) -> list[Any]:
    if type(data) is not list:
        raise BadRequest(f"expected a batch of store mutations (a list), got {type(data).__name__}")
    return data


def _lease(data: Any, trusted: bool) -> tuple[str, int]:
    if type(data) not in (list, tuple) or len(data) != 2 or type(data[0]) is not str or type(data[1]) is not int:
        raise BadRequest(f"expected a lease [subscription id, expires in ms], got {str(data)[:60]}")
    return data[0], data[1]


PEER_ID = Codec("a peer id", lambda v: v, _peer_id)
#: A subscription's new lease end: [id, expires (physical ms)].
LEASE = Codec("a lease [id, expires]", lambda v: [v[0], v[1]], _lease, "[id, expires]")
#: One writer's store mutations; each is checked by the store before anything is logged.
BATCH = Codec("a batch of store mutations", lambda v: list(v), _batch)
TERM = Codec("an RDF term", c.term_to_wire, c.term_from_wire)
IRI_ = Codec("an IRI", lambda v: v.value, lambda d, t: c.iri_from_wire(d, "value", t))
QUAD = Codec("a quad", c.quad_to_wire, c.quad_from_wire)
EVENT = Codec("a compound event", c.event_to_wire, c.event_from_wire)
PATTERN = Codec("a quad pattern", c.pattern_to_wire, lambda d, t: c.pattern_from_wire(d))
POINT = Codec("a point", c.point_to_wire, lambda d, t: c.point_from_wire(d))
BOX = Codec("a box", c.box_to_wire, lambda d, t: c.box_from_wire(d))
ZONE = Codec("a zone", c.zone_to_wire, lambda d, t: c.zone_from_wire(d))
SPACE = Codec("a coordinate space", c.space_to_wire, lambda d, t: c.space_from_wire(d))
PARTIAL = Codec("a partial match", c.partial_to_wire, lambda d, t: c.partial_from_wire(d))
SOLUTIONS = Codec("solutions", c.solutions_to_wire, c.solutions_from_wire)


def _neighbours_decode(data: Any, trusted: bool) -> dict[str, Neighbour]:
    if not isinstance(data, list):
        raise BadRequest("expected a list of neighbour records")
    return dict(c.neighbour_from_wire(item) for item in data)


NEIGHBOURS = Codec("neighbour records", lambda table: [c.neighbour_to_wire(k, n) for k, n in table.items()],
                   _neighbours_decode)
NEIGHBOUR = Codec("a neighbour record", lambda kn: c.neighbour_to_wire(*kn), lambda d, t: c.neighbour_from_wire(d))

ALL: tuple[None, None, None, None] = (None, None, None, None)
TAXONOMY = Codec("a taxonomy", lambda t: t.to_wire(), lambda d, t: Taxonomy.from_wire(d))
NOTIFICATION_KINDS = ("signal", "bindings", "event")
