"""The pages of many peers' cursors, read as one stream at the entry peer.

A paged multicast answers with each peer's first page and the cursor of its rest (`rows`,
`cursor`, `at`: peers/queries/cursors.py); the rest is pulled from each peer directly, several
peers at once, each at most one page ahead of the reader. A reader that stops early (a LIMIT
met, a client gone, an error) closes the cursors still open, so no peer keeps producing.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RequestError
from eventcloud.wire.messages import CursorNext, Page
from eventcloud.wire.ops import Op
from peers.queries.cursors import Cursors

__all__ = ["PeerPages", "close_answers", "open_peer_pages"]

#: Seconds spent telling a peer that its cursor is no longer read (it closes idle ones anyway).
CLOSE_WAIT = 2.0

Call = Callable[[str, Op, Any], Awaitable[dict[str, Any]]]


class PeerPages:
    """How the entry peer reaches the cursors of a paged answer: its own directly, others' by a call."""

    def __init__(self, call: Call, cursors: Cursors, address: Callable[[], str]) -> None:
        self.call = call
        self.cursors = cursors
        self.address = address

    async def next(self, at: str, cursor: str, seq: int) -> tuple[list[Any], bool]:
        if at == self.address():
            return await self.cursors.next(cursor, seq)
        page = Page.from_wire(await self.call(at, Op.CURSOR_NEXT, CursorNext(cursor, seq)), trusted=True)
        return list(page.rows), page.more

    async def close(self, at: str, cursor: str) -> None:
        if at == self.address():
            self.cursors.close(cursor)
            return
        with trio.move_on_after(CLOSE_WAIT):
            try:
                await self.call(at, Op.CURSOR_CLOSE, CursorNext(cursor))
            except EventCloudError:
                pass   # unreachable or gone: it closes the cursor when idle


async def close_answers(pages: PeerPages, answers: list[Any]) -> None:
    """Close the cursors that paged answers opened (a multicast attempt thrown away: its answers
    are never read, and each cursor would hold a slot at its peer until it idles out)."""
    opened: list[tuple[str, str]] = []

    def walk(answer: Any) -> None:
        if isinstance(answer, list):
            for one in answer:
                walk(one)
        elif isinstance(answer, dict) and isinstance(answer.get("at"), str) and \
                isinstance(answer.get("cursor"), str) and answer["cursor"]:
            opened.append((answer["at"], answer["cursor"]))

    walk(answers)
    async with trio.open_nursery() as closing:
        for at, cursor in opened:
            closing.start_soon(pages.close, at, cursor)


def _answer(answer: Any) -> tuple[list[Any], str, str]:
    try:
        rows, cursor, at = answer["rows"], answer["cursor"], answer["at"]
    except (KeyError, TypeError):
        raise RequestError("malformed paged answer from a peer", ErrorCode.INTERNAL) from None
    if not isinstance(rows, list) or not isinstance(cursor, str) or not isinstance(at, str):
        raise RequestError("malformed paged answer from a peer", ErrorCode.INTERNAL)
    return rows, cursor, at


@asynccontextmanager
async def open_peer_pages(pages: PeerPages, answers: list[Any], *, at_once: int = 8
                          ) -> AsyncIterator[AsyncIterator[list[Any]]]:
    """An iterator of every page of `answers` (each peer's first page, then the rest of its
    cursor), in the order they arrive. Leaving the block early closes the cursors still open."""
    opened = [_answer(a) for a in answers]
    still_open: dict[str, str] = {cursor: at for _, cursor, at in opened if cursor}
    send, receive = trio.open_memory_channel[list[Any]](max(1, len(still_open)))
    limiter = trio.CapacityLimiter(at_once)

    async def pull(at: str, cursor: str, out: trio.MemorySendChannel) -> None:
        async with out:
            more, seq = True, 0
            try:
                while more:
                    seq += 1
                    async with limiter:
                        rows, more = await pages.next(at, cursor, seq)
                    if not more:
                        still_open.pop(cursor, None)
                    if rows:
                        await out.send(rows)
            except EventCloudError as exc:   # the reader raises it (typed, not in a group)
                still_open.pop(cursor, None)
                await out.send(RequestError(f"a peer at {at} did not finish its part of the answer: {exc.message}",
                                            exc.code))

    async def every_page() -> AsyncIterator[list[Any]]:
        for rows, _, _ in opened:
            if rows:
                yield rows
        async for item in receive:
            if isinstance(item, EventCloudError):
                raise item
            yield item

    try:
        async with trio.open_nursery() as nursery:
            async with send:
                for cursor, at in list(still_open.items()):
                    nursery.start_soon(pull, at, cursor, send.clone())
            yield every_page()
            nursery.cancel_scope.cancel()   # read what it wanted: the rest is not pulled
    except BaseExceptionGroup as group:
        typed, _ = group.split(EventCloudError)
        if typed is None:
            raise
        while isinstance(typed, BaseExceptionGroup):
            typed = typed.exceptions[0]
        raise typed from None
    finally:
        if still_open:
            with trio.CancelScope(shield=True):
                async with trio.open_nursery() as closing:
                    for cursor, at in still_open.items():
                        closing.start_soon(pages.close, at, cursor)
