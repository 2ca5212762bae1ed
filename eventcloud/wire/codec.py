"""The one codec: every value that crosses the wire, to msgpack-able data and back.

Terms, quads, compound events, quad patterns, CAN points, boxes and zones, neighbours,
coordinate spaces, CSMA partial matches and solution rows each have one `*_to_wire` and one
`*_from_wire` here, and nowhere else. Decoders validate and raise `BadRequest` naming what is
wrong, so a malformed value from any client becomes a clear `bad-request` error.

Wire forms (msgpack):
    IRI          "http://…"                      (a str)
    literal      [lexical, datatype] or [lexical, datatype, language]
    quad         [g, s, p, o]                    (g and p IRIs)
    triple       [s, p, o]                       (inside an event, whose graph is given once)
    event        {"graph": g, "quads": [triple…]}
    pattern      [g, s, p, o] with nil for a variable
    coordinate   a lower-case hex string          (coordinates exceed 64 bits)
    point        [c, c, c, c];  box: [[lo, hi] × 4];  zone: [box, [split dimension…]]
    neighbour    {"id": …, "address": …, "zone": zone}
    partial      [[remaining pattern index…], [[variable, term]…]]  (bindings sorted by name)

`trusted=True` skips re-validating what another peer already validated (the entry peer checks
everything a client sends); it is the hot path of routing and matching.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from eventcloud.errors import BadRequest, GeometryError, ModelError
from eventcloud.matching.csma import PartialMatch
from eventcloud.overlay.coordinates import DIMENSIONS, Box, CoordinateSpace, Point
from eventcloud.overlay.plans import Neighbour
from eventcloud.overlay.zones import Zone
from eventcloud.rdf.model import (
    IRI, RDF_LANGSTRING, CompoundEvent, Literal, Quad, Term, make_quad, trusted_iri, trusted_literal,
)

__all__ = [
    "term_to_wire", "term_from_wire", "iri_from_wire", "quad_to_wire", "quad_from_wire", "triple_to_wire",
    "triple_from_wire", "event_to_wire", "event_from_wire", "pattern_to_wire", "pattern_from_wire",
    "coordinate_to_wire", "point_to_wire", "point_from_wire", "box_to_wire", "box_from_wire", "zone_to_wire", "zone_from_wire",
    "neighbour_to_wire", "neighbour_from_wire", "space_to_wire", "space_from_wire", "partial_to_wire",
    "partial_from_wire", "solutions_to_wire", "solutions_from_wire", "trusted_iri",
]

Pattern = tuple[Term | None, Term | None, Term | None, Term | None]

_NDIM = len(DIMENSIONS)
#: A coordinate: lower-case hex, or "<hex>*<k>" for hex × 96^k. A term's coordinate is its
#: prefix in base 96 (the printable-ASCII radix of the default space) padded with zero digits,
#: so this is about as long as the term rather than the axis (docs/protocol.md).
_COORDINATE = re.compile(r"([0-9a-f]{1,2048})(?:\*([1-9][0-9]{0,3}))?")
_BASE = 96
_MAX_POWER = 1024
_POWERS = [_BASE ** k for k in range(_MAX_POWER + 1)]
_MAX_SPLITS = 65536


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --- terms ------------------------------------------------------------------------------------

def term_to_wire(term: Term) -> Any:
    if type(term) is IRI:
        return term.value
    if term.language is not None:  # type: ignore[union-attr]
        return [term.lexical, term.datatype, term.language]  # type: ignore[union-attr]
    return [term.lexical, term.datatype]  # type: ignore[union-attr]


def term_from_wire(data: Any, trusted: bool = False) -> Term:
    """A term; BadRequest if `data` is not one (or, untrusted, breaks the data model)."""
    if trusted:
        if type(data) is str:
            return trusted_iri(data)
        if type(data) is list and len(data) in (2, 3):
            return trusted_literal(data[0], data[1], data[2] if len(data) == 3 else None)
    try:
        if isinstance(data, str):
            return IRI(data)
        if isinstance(data, (list, tuple)) and len(data) in (2, 3) and all(isinstance(x, str) for x in data):
            if len(data) == 3:
                if data[1] != RDF_LANGSTRING:
                    raise ModelError("a language-tagged literal has datatype rdf:langString")
                return Literal(data[0], language=data[2])
            if not data[1]:
                raise ModelError("a literal needs a datatype IRI")
            return Literal(data[0], data[1])
    except ModelError as exc:
        raise BadRequest(f"invalid term: {exc}") from None
    raise BadRequest(f"invalid term encoding {_show(data)}: expected an IRI string or [lexical, datatype(, language)]")


def iri_from_wire(data: Any, what: str = "IRI", trusted: bool = False) -> IRI:
    term = term_from_wire(data, trusted) if data is not None else None
    if type(term) is not IRI:
        raise BadRequest(f"{what} must be an IRI, got {_show(data)}")
    return term


_new = object.__new__
_set = object.__setattr__


# --- quads and events -------------------------------------------------------------------------

def quad_to_wire(quad: Quad) -> list[Any]:
    return [quad.g.value, term_to_wire(quad.s), quad.p.value, term_to_wire(quad.o)]


def quad_from_wire(data: Any, trusted: bool = False) -> Quad:
    if not isinstance(data, list) or len(data) != 4:
        raise BadRequest(f"invalid quad encoding {_show(data)}: expected [g, s, p, o]")
    if trusted:
        return Quad(*(term_from_wire(x, True) for x in data))  # type: ignore[arg-type]
    try:
        return make_quad(*(term_from_wire(x) for x in data))
    except ModelError as exc:
        raise BadRequest(f"invalid quad: {exc}") from None


def triple_to_wire(quad: Quad) -> list[Any]:
    return [term_to_wire(quad.s), quad.p.value, term_to_wire(quad.o)]


def triple_from_wire(graph: IRI, data: Any, trusted: bool = False) -> Quad:
    if type(data) is not list or len(data) != 3:
        raise BadRequest(f"invalid triple encoding {_show(data)}: expected [s, p, o]")
    if trusted:
        return Quad(graph, _t(data[0]), _t(data[1]), _t(data[2]))  # type: ignore[arg-type]
    try:
        return make_quad(graph, term_from_wire(data[0]), term_from_wire(data[1]), term_from_wire(data[2]))
    except ModelError as exc:
        raise BadRequest(f"invalid quad: {exc}") from None


def _t(data: Any) -> Term:
    if type(data) is str:
        return trusted_iri(data)
    return term_from_wire(data, True)


def event_to_wire(event: CompoundEvent) -> dict[str, Any]:
    return {"graph": event.graph.value, "quads": [triple_to_wire(q) for q in event.quads]}


def event_from_wire(data: Any, trusted: bool = False) -> CompoundEvent:
    if not isinstance(data, dict) or not isinstance(data.get("graph"), str) or not isinstance(data.get("quads"), list):
        raise BadRequest('invalid compound event encoding: expected {"graph": IRI, "quads": [[s, p, o], …]}')
    graph = iri_from_wire(data["graph"], "the graph of an event", trusted)
    quads = tuple(triple_from_wire(graph, item, trusted) for item in data["quads"])
    if trusted:
        event = _new(CompoundEvent)
        _set(event, "graph", graph)
        _set(event, "quads", quads)
        return event
    try:
        return CompoundEvent(graph, quads)
    except ModelError as exc:
        raise BadRequest(f"invalid compound event: {exc}") from None


def pattern_to_wire(terms: Pattern | tuple[Term | None, ...]) -> list[Any]:
    return [None if t is None else term_to_wire(t) for t in terms]


def pattern_from_wire(data: Any) -> Pattern:
    if not isinstance(data, list) or len(data) != 4:
        raise BadRequest(f"invalid quad pattern {_show(data)}: expected [g, s, p, o] with null for variables")
    g, s, p, o = (None if x is None else term_from_wire(x) for x in data)
    return g, s, p, o


def solutions_to_wire(solutions: list[dict[str, Term]]) -> list[dict[str, Any]]:
    return [{k: term_to_wire(v) for k, v in s.items()} for s in solutions]


def solutions_from_wire(data: Any, trusted: bool = False) -> tuple[dict[str, Term], ...]:
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise BadRequest("solutions must be a list of {variable: term} maps")
    return tuple({str(k): term_from_wire(v, trusted) for k, v in row.items()} for row in data)


# --- CAN geometry -----------------------------------------------------------------------------

@lru_cache(maxsize=1 << 16)
def coordinate_to_wire(value: int) -> str:
    """A coordinate as compact text (see `_COORDINATE`)."""
    if value <= 0xFFFF:
        return format(value, "x")
    k = min((value & -value).bit_length() // 5, _MAX_POWER)  # 96^k = 2^5k · 3^k divides it: 5k <= 2-adic order
    while k > 2 and value % _POWERS[k]:
        k -= 1
    if k <= 2:
        return format(value, "x")
    return f"{value // _POWERS[k]:x}*{k}"


def _coordinate(value: Any, what: str) -> int:
    match = _COORDINATE.fullmatch(value) if type(value) is str else None
    if match is None or (match.group(2) is not None and int(match.group(2)) > _MAX_POWER):
        raise BadRequest(f"{what} must be a lower-case hex string, got {_show(value)}")
    digits, power = match.groups()
    return int(digits, 16) * _POWERS[int(power)] if power else int(digits, 16)


def point_to_wire(point: Point) -> list[str]:
    return [coordinate_to_wire(c) for c in point]


def point_from_wire(data: Any) -> Point:
    if not isinstance(data, list) or len(data) != _NDIM:
        raise BadRequest(f"invalid point {_show(data)}: expected {_NDIM} hex coordinates")
    return tuple(_coordinate(x, f"the {d} coordinate") for x, d in zip(data, DIMENSIONS))  # type: ignore[return-value]


def box_to_wire(box: Box) -> list[list[str]]:
    """[lo, hi] per axis; [lo] alone for the one-coordinate interval [lo, lo + 1) of a constant."""
    return [[coordinate_to_wire(lo)] if hi == lo + 1 else [coordinate_to_wire(lo), coordinate_to_wire(hi)]
            for lo, hi in box]


def box_from_wire(data: Any) -> Box:
    if not isinstance(data, list) or len(data) != _NDIM:
        raise BadRequest(f"invalid box {_show(data)}: expected {_NDIM} [lo, hi] pairs of hex coordinates")
    bounds = []
    for pair, dim in zip(data, DIMENSIONS):
        if not isinstance(pair, list) or len(pair) not in (1, 2):
            raise BadRequest(f"box bound along {dim} must be [lo, hi] or [lo], got {_show(pair)}")
        lo = _coordinate(pair[0], f"box bound along {dim}")
        hi = _coordinate(pair[1], f"box bound along {dim}") if len(pair) == 2 else lo + 1
        if not lo < hi:
            raise BadRequest(f"empty box interval along {dim}")
        bounds.append((lo, hi))
    return tuple(bounds)  # type: ignore[return-value]


def zone_to_wire(zone: Zone) -> list[Any]:
    """[bounds, splits, sides]; [bounds, splits] for a zone with no path in the split tree (and
    from peers before paths were kept: read as such)."""
    bounds = [[coordinate_to_wire(lo), coordinate_to_wire(hi)] for lo, hi in zone.bounds]
    if zone.splits and zone.placed:
        return [bounds, list(zone.splits), list(zone.sides)]
    return [bounds, list(zone.splits)]


#: Zones decoded lately, by their wire form: the same few zones come back in every delivery's
#: reply, and checking one (eight coordinates) costs more than the lookup. Bounded: cleared when full.
_ZONES: dict[tuple[Any, ...], Zone] = {}
_ZONES_MAX = 4096


def zone_from_wire(data: Any) -> Zone:
    """A zone; BadRequest on anything malformed (GeometryError is a BadRequest too)."""
    key = _zone_key(data)
    if key is not None:
        known = _ZONES.get(key)
        if known is not None:
            return known
    zone = _zone_checked(data)
    if key is not None:
        if len(_ZONES) >= _ZONES_MAX:
            _ZONES.clear()
        _ZONES[key] = zone
    return zone


def _zone_key(data: Any) -> tuple[Any, ...] | None:
    """The wire form as a hashable key, or None when it is not plainly one (then it is only
    checked). Pairs must be lists and split dimensions exact ints (a string pair "0f" would make
    the key of ["0", "f"], a bool compare equal to 0 or 1), so equal keys are equally valid."""
    if type(data) is not list or len(data) not in (2, 3):
        return None
    bounds, splits, sides = data if len(data) == 3 else (*data, [])
    if type(bounds) is not list or type(splits) is not list or type(sides) is not list \
            or not all(type(d) is int for d in splits) or not all(type(d) is int for d in sides) \
            or not all(type(pair) is list for pair in bounds):
        return None
    key = tuple(tuple(pair) for pair in bounds), tuple(splits), tuple(sides)
    try:
        hash(key)
    except TypeError:  # a list or map where a coordinate should be
        return None
    return key


def _zone_checked(data: Any) -> Zone:
    if not isinstance(data, (list, tuple)) or len(data) not in (2, 3):
        raise GeometryError(f"a zone on the wire is [bounds, splits] or [bounds, splits, sides], got {_show(data)}")
    raw_bounds, raw_splits, raw_sides = data if len(data) == 3 else (*data, ())
    if not isinstance(raw_bounds, (list, tuple)) or len(raw_bounds) != _NDIM:
        raise GeometryError(f"zone bounds must be {_NDIM} [lo, hi] pairs, got {_show(raw_bounds)}")
    bounds = []
    for dim, pair in zip(DIMENSIONS, raw_bounds):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise GeometryError(f"zone bound {dim} must be [lo, hi], got {_show(pair)}")
        lo, hi = (_zone_hex(x, dim) for x in pair)
        if not lo < hi:
            raise GeometryError(f"empty zone interval along {dim}: [{lo:#x}, {hi:#x})")
        bounds.append((lo, hi))
    if not isinstance(raw_splits, (list, tuple)) or len(raw_splits) > _MAX_SPLITS:
        raise GeometryError(f"zone splits must be a list of dimensions, got {_show(raw_splits)}")
    for d in raw_splits:
        if not isinstance(d, int) or isinstance(d, bool) or not 0 <= d < _NDIM:
            raise GeometryError(f"a split dimension must be an integer in 0..{_NDIM - 1}, got {d!r}")
    if not isinstance(raw_sides, (list, tuple)) or len(raw_sides) not in (0, len(raw_splits)):
        raise GeometryError(f"zone sides must be a list of 0 or 1, one per split, got {_show(raw_sides)}")
    for side in raw_sides:
        if type(side) is not int or side not in (0, 1):
            raise GeometryError(f"a split side must be 0 (lower) or 1 (upper), got {side!r}")
    return Zone(tuple(bounds), tuple(raw_splits), tuple(raw_sides))  # type: ignore[arg-type]


def _zone_hex(value: Any, dimension: str) -> int:
    try:
        return _coordinate(value, f"zone bound along {dimension}")
    except BadRequest as exc:
        raise GeometryError(exc.message) from None


def neighbour_to_wire(ident: str, neighbour: Neighbour) -> dict[str, Any]:
    wire = {"id": ident, "address": neighbour.address, "zone": zone_to_wire(neighbour.zone)}
    if neighbour.incarnation:
        wire["incarnation"] = neighbour.incarnation
    return wire


def neighbour_from_wire(data: Any) -> tuple[str, Neighbour]:
    if not isinstance(data, dict):
        raise BadRequest(f"invalid neighbour record {_show(data)}: expected {{id, address, zone}}")
    ident, address = data.get("id"), data.get("address")
    if type(ident) is not str or not ident:
        raise BadRequest("a neighbour record needs an 'id' string")
    if type(address) is not str or not address:
        raise BadRequest("a neighbour record needs an 'address' string")
    incarnation = data.get("incarnation", 0)
    if type(incarnation) is not int or incarnation < 0:
        raise BadRequest("a neighbour record's 'incarnation' must be a non-negative integer")
    return ident, Neighbour(address, zone_from_wire(data.get("zone")), incarnation)


def space_to_wire(space: CoordinateSpace) -> dict[str, Any]:
    return space.to_dict()


def space_from_wire(data: Any) -> CoordinateSpace:
    return CoordinateSpace.from_dict(data)


# --- CSMA -------------------------------------------------------------------------------------

def partial_to_wire(partial: PartialMatch) -> list[Any]:
    return [list(partial.remaining), [[name, term_to_wire(term)] for name, term in partial.bindings]]


def partial_from_wire(data: Any) -> PartialMatch:
    """A rewritten subscription's state; BadRequest if it is not one."""
    if not isinstance(data, (list, tuple)) or len(data) != 2:
        raise BadRequest("invalid partial match: expected [remaining, bindings]")
    remaining, pairs = data
    if not isinstance(remaining, (list, tuple)) or not all(type(i) is int and i >= 0 for i in remaining):
        raise BadRequest("invalid partial match: remaining must be a list of pattern indexes")
    if len(set(remaining)) != len(remaining) or list(remaining) != sorted(remaining):
        raise BadRequest("invalid partial match: remaining must be sorted and without duplicates")
    if not isinstance(pairs, (list, tuple)):
        raise BadRequest("invalid partial match: bindings must be a list of [name, term] pairs")
    bindings = []
    for pair in pairs:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not isinstance(pair[0], str) or not pair[0]:
            raise BadRequest(f"invalid partial match: invalid binding {_show(pair)}")
        bindings.append((pair[0], term_from_wire(pair[1])))
    names = [name for name, _ in bindings]
    if names != sorted(set(names)):
        raise BadRequest("invalid partial match: bindings must be sorted by variable name and without duplicates")
    return PartialMatch(tuple(remaining), tuple(bindings))
