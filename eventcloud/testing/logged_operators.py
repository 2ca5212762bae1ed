"""Operators for tests that run real peer processes: the overlapping workload's counting operators
(`operator_workload.CountingOperators`), each call also appended to a file of its process.

A peer loads them with `--operators eventcloud.testing.logged_operators`. With the environment
variable `EVENTCLOUD_CALL_LOG` naming a directory, every call writes one line `iri<TAB>args` to
`<directory>/<pid>.log`, so a test can count, per peer and per event, how often each distinct
(operator, arguments) pair was evaluated. Without the variable nothing is written.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from eventcloud.testing.operator_workload import CountingOperators

__all__ = ["OPERATORS", "LOG_VARIABLE"]

LOG_VARIABLE = "EVENTCLOUD_CALL_LOG"


class _LoggedOperators(CountingOperators):
    """Counting operators whose calls are also logged, one line each (calls may run in threads)."""

    _lock = threading.Lock()

    def _counted(self, iri, function):
        counted = super()._counted(iri, function)
        directory = os.environ.get(LOG_VARIABLE)
        if not directory:
            return counted

        def logged(*args):
            with self._lock, open(Path(directory) / f"{os.getpid()}.log", "a", encoding="utf-8") as log:
                log.write(f"{iri}\t{args!r}\n")
            return counted(*args)
        logged.__name__ = function.__name__
        return logged


OPERATORS = tuple(_LoggedOperators().operator_set().values())
