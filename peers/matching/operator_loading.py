"""Which operators a peer has: installed plugins and configured modules, checked alike on every peer.

`load_operators` reads the `eventcloud.operators` entry-point group (installed plugins, each
naming an `Operator`, an iterable of them, or a callable returning either) and the modules or
`Operator` objects of `PeerConfig.operators` (a module exposes `OPERATORS`); a configured one
replaces a plugin's under the same IRI. A module that cannot be imported or holds no operators
is an `OperatorLoadError`: the peer does not start. Every peer of an overlay must have the same
operators (a subscription's FILTER means the same wherever it is evaluated):
`check_same_operators` refuses a joiner that differs, naming the differences.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any, Callable, Iterable

from eventcloud.errors import EventCloudError, OperatorMismatch
from eventcloud.sparql.filters.operators import NO_OPERATORS, Operator, OperatorSet

__all__ = ["ENTRY_POINT_GROUP", "OperatorLoadError", "check_same_operators", "load_operators"]

ENTRY_POINT_GROUP = "eventcloud.operators"


class OperatorLoadError(EventCloudError):
    """Operators named at peer start that cannot be loaded (a module missing or without OPERATORS)."""


def _as_operators(found: Any, origin: str) -> list[Operator]:
    if callable(found) and not isinstance(found, Operator):
        found = found()
    if isinstance(found, Operator):
        return [found]
    if isinstance(found, OperatorSet):
        return list(found.values())
    try:
        items = list(found)
    except TypeError:
        raise OperatorLoadError(f"{origin} gives {type(found).__name__}, not operators") from None
    if not all(isinstance(op, Operator) for op in items):
        raise OperatorLoadError(f"{origin} gives something that is not an Operator")
    return items


def load_operators(configured: Iterable[Any] = (), *, plugins: bool = True,
                   entry_points: Callable[[], Iterable[Any]] | None = None) -> OperatorSet:
    """The peer's operator set: installed plugins (if `plugins`), then `configured` (module names
    exposing OPERATORS, or Operator objects) replacing plugins' operators of the same IRI."""
    by_iri: dict[str, Operator] = {}
    if plugins:
        points = entry_points() if entry_points is not None else importlib.metadata.entry_points(
            group=ENTRY_POINT_GROUP)
        for point in points:
            try:
                loaded = point.load()
            except Exception as exc:
                raise OperatorLoadError(f"operator plugin {point.name} ({point.value}) cannot be loaded: {exc}") from None
            for op in _as_operators(loaded, f"operator plugin {point.name}"):
                by_iri[op.iri] = op
    mine: dict[str, Operator] = {}
    for item in configured:
        if isinstance(item, Operator):
            ops = [item]
        elif isinstance(item, str):
            try:
                module = importlib.import_module(item)
            except ImportError as exc:
                raise OperatorLoadError(f"operator module {item!r} cannot be imported: {exc}") from None
            if not hasattr(module, "OPERATORS"):
                raise OperatorLoadError(f"operator module {item!r} has no OPERATORS")
            ops = _as_operators(module.OPERATORS, f"operator module {item!r}")
        else:
            ops = _as_operators(item, f"operator entry {item!r}")
        for op in ops:
            if op.iri in mine and mine[op.iri] is not op:
                raise OperatorLoadError(f"two configured operators are registered under {op.iri}")
            mine[op.iri] = op
    by_iri.update(mine)
    return OperatorSet(by_iri.values()) if by_iri else NO_OPERATORS


def check_same_operators(mine: Iterable[str], overlay: Iterable[str], where: str) -> None:
    """Raise OperatorMismatch naming the differences if a joiner's operators are not the overlay's."""
    mine, overlay = set(mine), set(overlay)
    if mine == overlay:
        return
    missing, extra = tuple(sorted(overlay - mine)), tuple(sorted(mine - overlay))
    parts = []
    if missing:
        parts.append(f"the joining peer lacks the overlay's operator(s) {', '.join(missing)}")
    if extra:
        parts.append(f"the overlay lacks the joining peer's operator(s) {', '.join(extra)}")
    raise OperatorMismatch(f"cannot join through {where}: every peer of an overlay must have the same operators; "
                           + "; ".join(parts) + " (load them with --operators MODULE or as installed plugins)",
                           missing, extra)
