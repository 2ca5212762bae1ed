"""Immutable values that many subscriptions hold alike (variables, their sets, projections),
kept once per process: a peer holds thousands of subscriptions of a few shapes, and each copy
of `frozenset({"g", "s", "v"})` costs a few hundred bytes."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["shared"]

T = TypeVar("T")

#: Distinct values kept; past it, new values are returned as they are (memory stays bounded).
LIMIT = 1 << 16
_values: dict = {}


def shared(value: T) -> T:
    """The process's copy of `value` (hashable, immutable), or `value` itself."""
    found = _values.get(value)
    if found is not None:
        return found
    if len(_values) < LIMIT:
        _values[value] = value
    return value
