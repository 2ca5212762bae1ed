"""A bounded table, least recently used out, that threads may share without a lock.

Parsing caches (shapes, templates, recurring IRIs) are read by the event loop and by worker
threads; each step below is one dict operation (atomic under the GIL), and a key evicted or
emptied by another thread between two steps is simply missed: the caller computes it again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

__all__ = ["LruTable", "MISSING"]

#: What `get` returns for a key not held (None may be a held value).
MISSING: Any = object()


class LruTable:
    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Any) -> bool:
        return key in self._items

    def get(self, key: Any) -> Any:
        """The value held for `key` (now the most recently used), or MISSING."""
        found = self._items.get(key, MISSING)
        if found is not MISSING:
            try:
                self._items.move_to_end(key)
            except KeyError:  # evicted meanwhile by another thread
                pass
        return found

    def put(self, key: Any, value: Any) -> None:
        self._items[key] = value
        if len(self._items) > self.size:
            try:
                self._items.popitem(last=False)
            except KeyError:  # emptied meanwhile by another thread
                pass
