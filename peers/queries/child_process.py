"""One-time queries over gathered quads, evaluated in a child process with a time and memory budget.

A query of several patterns is answered by gathering their quads at the entry peer and letting
pyoxigraph join them. That evaluation cannot be interrupted: patterns that share no variable
multiply their matches (three over 50,000 quads make 10^14 rows), and in a thread such a query
would hold a core and one of the peer's query threads for good, while its rows could exhaust the
peer's memory. In a child process it is stopped when its budget runs out and the client gets a
BAD_QUERY naming the budget; the peer is not touched. A child costs ~70 ms to start, paid only by
queries that gather.

    python -m peers.queries.child_process   # the child: msgpack [query, N-Quads, memory, result bytes] on stdin,
                                    # [form, serialized result] or ["error", reason] on stdout
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Iterable

import msgpack
import pyoxigraph as ox
import trio

from eventcloud.errors import ErrorCode, RequestError
from eventcloud.rdf.model import Quad
from eventcloud.rdf.oxigraph import quad_to_ox

__all__ = ["QueryBudget", "evaluate_in_child"]


@dataclass(frozen=True)
class QueryBudget:
    seconds: float = 30.0
    memory_mb: int = 2048
    max_bytes: int = 32 * 1024 * 1024  # the largest result sent back (a reply over the frame limit fails anyway)


async def evaluate_in_child(text: str, quads: Iterable[Quad], budget: QueryBudget) -> tuple[str, str]:
    """(form, serialized result) of `text` over `quads`: "graph" (N-Triples), "boolean" or
    "solutions" (SPARQL JSON). RequestError(BAD_QUERY) if it fails or runs past its budget."""
    data = ox.serialize((quad_to_ox(q) for q in quads), format=ox.RdfFormat.N_QUADS)
    payload = msgpack.packb([text, data, budget.memory_mb * 1024 * 1024, budget.max_bytes])
    with trio.move_on_after(budget.seconds) as scope:
        done = await trio.run_process([sys.executable, "-m", "peers.queries.child_process"], stdin=payload,
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


def _child() -> None:
    import resource

    text, data, memory, max_bytes = msgpack.unpackb(sys.stdin.buffer.read())
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        store = ox.Store()
        store.load(data, format=ox.RdfFormat.N_QUADS)
        result = store.query(text, use_default_graph_as_union=True)
        if isinstance(result, ox.QueryTriples):
            answer = ["graph", result.serialize(format=ox.RdfFormat.N_TRIPLES).decode()]
        else:
            form = "boolean" if isinstance(result, ox.QueryBoolean) else "solutions"
            answer = [form, result.serialize(format=ox.QueryResultsFormat.JSON).decode()]
        if len(answer[1]) > max_bytes:
            answer = ["error", f"the result is {len(answer[1]):,} bytes, over the {max_bytes:,}-byte limit of a "
                               f"reply: add a LIMIT, or aggregate"]
    except (SyntaxError, ValueError, OSError) as exc:
        answer = ["error", f"query failed: {exc}"]
    except MemoryError:
        answer = ["error", f"the query needed more than its memory budget of {memory // (1024 * 1024)} MB"]
    sys.stdout.buffer.write(msgpack.packb(answer))


if __name__ == "__main__":
    _child()
