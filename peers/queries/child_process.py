"""One-time queries over gathered quads, evaluated in a child process with a time and memory budget.

A query of several patterns is answered by gathering their quads at the entry peer and letting
pyoxigraph join them. That evaluation cannot be interrupted: patterns that share no variable
multiply their matches (three over 50,000 quads make 10^14 rows), and in a thread such a query
would hold a core and one of the peer's query threads for good, while its rows could exhaust the
peer's memory. In a child process it is stopped when its budget runs out and the client gets a
BAD_QUERY naming the budget; the peer is not touched. The child (peers/queries/query_child.py,
run as a script: importing the `peers` package would cost it ~0.6 s) starts in ~40 ms, paid only
by queries that gather.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import msgpack
import pyoxigraph as ox
import trio

from eventcloud.errors import ErrorCode, RequestError
from eventcloud.rdf.model import Quad
from eventcloud.rdf.oxigraph import quad_to_ox

__all__ = ["QueryBudget", "evaluate_in_child", "RESULT_BYTES"]

#: The largest result a child sends back: answers are paged out to the client (cursors.py), so
#: the limit is the entry peer's memory, not a frame.
RESULT_BYTES = 512 * 1024 * 1024

CHILD = Path(__file__).with_name("query_child.py")


@dataclass(frozen=True)
class QueryBudget:
    seconds: float = 30.0
    memory_mb: int = 2048
    max_bytes: int = 32 * 1024 * 1024  # the largest result sent back (a reply over the frame limit fails anyway)


async def evaluate_in_child(text: str, quads: Iterable[Quad], budget: QueryBudget,
                            taxonomy: dict[str, Any] | None = None) -> tuple[str, str]:
    """(form, serialized result) of `text` over `quads`: "graph" (N-Triples), "boolean" or
    "solutions" (SPARQL JSON). RequestError(BAD_QUERY) if it fails or runs past its budget.
    `taxonomy` (its wire form): for a query calling EventCloud's FILTER functions."""
    data = ox.serialize((quad_to_ox(q) for q in quads), format=ox.RdfFormat.N_QUADS)
    payload = msgpack.packb([text, data, budget.memory_mb * 1024 * 1024, budget.max_bytes, taxonomy])
    with trio.move_on_after(budget.seconds) as scope:
        done = await trio.run_process([sys.executable, str(CHILD)], stdin=payload,
                                      capture_stdout=True, capture_stderr=True, check=False)
    if scope.cancelled_caught:
        raise RequestError(f"the query ran past its budget of {budget.seconds:g} s and was stopped (patterns "
                           f"that share no variable multiply their matches)", ErrorCode.BAD_QUERY)
    try:
        form, out = msgpack.unpackb(done.stdout)
    except (ValueError, TypeError, msgpack.UnpackException):
        # no answer: the evaluator aborted, at the memory limit ("memory allocation of N bytes failed")
        # or for another reason (its first line says which)
        said = done.stderr.decode(errors="replace").strip().splitlines()
        if any("memory allocation" in line for line in said):
            raise RequestError(f"the query needed more than its memory budget of {budget.memory_mb} MB and was "
                               f"stopped (patterns that share no variable multiply their matches)",
                               ErrorCode.BAD_QUERY) from None
        raise RequestError(f"the query's evaluation failed ({(said or [f'exit status {done.returncode}'])[0][:200]})",
                           ErrorCode.BAD_QUERY) from None
    if form == "error":
        raise RequestError(out, ErrorCode.BAD_QUERY)
    return form, out
