"""The child process of a gathered query (peers/queries/child_process.py), run as a script.

    python peers/queries/query_child.py   # msgpack [query, N-Quads, memory, result bytes] on stdin,
                                          # [form, serialized result] or ["error", reason] on stdout

It imports nothing of EventCloud (its packages' imports would cost every query ~0.6 s): the
standard library, msgpack and pyoxigraph only, and EventCloud's FILTER functions for a query that
calls them.
"""

from __future__ import annotations

import sys

import msgpack
import pyoxigraph as ox


def _child() -> None:
    import resource

    text, data, memory, max_bytes, taxonomy = msgpack.unpackb(sys.stdin.buffer.read())
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        store = ox.Store()
        store.load(data, format=ox.RdfFormat.N_QUADS)
        functions = None
        if taxonomy is not None:   # a query calling EventCloud's FILTER functions (imported only then)
            from eventcloud.sparql.query_functions import custom_functions
            from eventcloud.sparql.taxonomy import Taxonomy

            functions = custom_functions(text, Taxonomy.from_wire(taxonomy))
        result = store.query(text, use_default_graph_as_union=True, custom_functions=functions)
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
