"""Answers read page by page: a SELECT's rows or a find's quads as they come from the overlay.

The entry peer answers a paged request with the first page and a cursor; the rest is pulled a
page at a time (`cursor_next`, each page numbered so a retried request never skips one), so no
answer is limited by a frame and neither side holds it whole. Leaving the `async with` early
closes the cursor, which stops the peers producing it.

    async with client.query_stream("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }") as rows:
        print(rows.variables)
        async for row in rows:          # SPARQL 1.1 JSON terms by variable
            ...
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Awaitable, Callable

from eventcloud.client.link import ClientError
from eventcloud.wire.messages import CursorNext, Page
from eventcloud.wire.ops import Op

__all__ = ["ResultStream"]

Call = Callable[[Op, Any], Awaitable[dict[str, Any]]]


class ResultStream:
    """The items of one paged answer (rows, or quads for `find_stream`), in pages from the entry
    peer. `form` is "solutions" for rows; an ASK's answer is `boolean` and a CONSTRUCT's or
    DESCRIBE's `text` (N-Triples), with no rows."""

    def __init__(self, call: Call, first: list[Any], cursor: str, decode: Callable[[Any], Any], *,
                 form: str = "solutions", variables: tuple[str, ...] = (), boolean: bool | None = None,
                 text: str = "") -> None:
        self.form = form
        self.variables = variables
        self.boolean = boolean
        self.text = text
        self._call = call
        self._first = first
        self._cursor = cursor
        self._decode = decode
        self._iterating = False

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._items()

    async def _items(self) -> AsyncIterator[Any]:
        async for page in self.pages():
            for item in page:
                yield item

    async def pages(self) -> AsyncIterator[list[Any]]:
        """The items a page at a time (cheaper than one by one for large answers)."""
        if self._iterating:
            raise ClientError("this answer is being read already: read it once")
        self._iterating = True
        if self._first:
            yield [self._decode(item) for item in self._first]
        self._first = []
        seq = 0
        while self._cursor:
            seq += 1
            page = Page.from_wire(await self._call(Op.CURSOR_NEXT, CursorNext(self._cursor, seq)))
            if not page.more:
                self._cursor = ""
            if page.rows:
                yield [self._decode(item) for item in page.rows]

    async def aclose(self) -> None:
        """Stop reading: the entry peer closes the cursor (and its peers theirs)."""
        cursor, self._cursor = self._cursor, ""
        if cursor:
            try:
                await self._call(Op.CURSOR_CLOSE, CursorNext(cursor))
            except ClientError:
                pass   # gone already, or the connection is: the peer closes it when idle

    async def __aenter__(self) -> "ResultStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
