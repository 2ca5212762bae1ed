"""Offline statistics on a peer: the file experiments/spark/statistics.py writes, read at start.

The document (eventcloud.matching.statistics, `to_dict` form) holds counts, so a peer starting
from it goes on learning online from there. A file that is missing or malformed stops the peer
with a `StatisticsError` naming it (a typo should not silently mean "no statistics").
"""

from __future__ import annotations

import json
from pathlib import Path

from eventcloud.errors import EventCloudError
from eventcloud.matching.statistics import Statistics

__all__ = ["StatisticsError", "load_statistics"]


class StatisticsError(EventCloudError):
    """A statistics file that cannot be read."""


def load_statistics(path: Path | None) -> Statistics:
    """Statistics to start from: the file's, or none (empty) when no file is given."""
    if path is None:
        return Statistics()
    try:
        return Statistics.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError) as exc:
        raise StatisticsError(f"cannot use the statistics file {path}: {exc}") from None
