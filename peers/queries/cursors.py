"""Answers that stream: a large result read page by page from the peer producing it.

A request whose answer may be large (a find, a pushed-down SELECT or aggregate, a query's rows
at the entry peer) opens a cursor where the answer is produced. Its pages go into a channel
that holds one page ahead, and the asker pulls them (`cursor_next`) until the last: no reply
is larger than a page, no peer holds a whole answer, and a slow reader slows the producer
(back-pressure) instead of growing anyone's memory. A store's answer is produced in a thread
of its own (pyoxigraph's iterators belong to the thread that made them: they are made, read
and dropped there); an entry peer's merged answer by a task. A cursor nobody pulls for `idle`
seconds is closed and its producer stopped; at most `max_open` are open at once; closing one
(`cursor_close`, a client gone) stops its producer at once.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Iterator

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RequestError
from eventcloud.wire.messages import CursorNext, Empty, Page
from eventcloud.wire.ops import Op
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["Cursors", "paged", "PageSink", "PAGE_ROWS", "PAGE_BYTES", "FIRST_ROWS"]

#: Rows (or quads) one page holds at most, and about how many bytes of terms.
PAGE_ROWS = 4_000
PAGE_BYTES = 2 * 1024 * 1024
#: Rows the reply that opens a cursor carries: small, as a multicast gathers every peer's first
#: page into one reply up its tree (a small answer still needs no second round trip).
FIRST_ROWS = 256
#: Seconds a cursor waits to be pulled before it is closed.
IDLE = 60.0
#: Cursors one peer keeps open at once (each may hold a thread while it produces).
MAX_OPEN = 64

PageSink = trio.MemorySendChannel  # where a task producing an answer sends its pages


def paged(items: Iterable[Any], size: Callable[[Any], int], budget: int | None = None) -> Iterator[list[Any]]:
    """`items` in pages: the first of at most FIRST_ROWS items and a sixteenth of the byte
    budget, then pages of at most PAGE_ROWS items and about `budget` bytes (PAGE_BYTES by
    default; `size` of each item; an item larger than that is a page of its own). At least one
    page, empty if there are no items."""
    rows, budget = PAGE_ROWS, budget or PAGE_BYTES
    page: list[Any] = []
    used, limit, allowed = 0, FIRST_ROWS, budget // 16
    for item in items:
        page.append(item)
        used += size(item)
        if len(page) >= limit or used >= allowed:
            yield page
            page, used, limit, allowed = [], 0, rows, budget
    if page or limit == FIRST_ROWS:
        yield page


@dataclass
class _Failed:
    error: EventCloudError


@dataclass(eq=False)
class _Cursor:
    ident: str
    receive: trio.MemoryReceiveChannel
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    dropped: bool = False   # closed by its reader (or read to the end), not expired
    seq: int = 0            # the number of the last page read
    last: tuple[list[Any], bool] = ([], True)   # and that page (sent again if asked again)


class Cursors:
    """The cursors open at one peer. `threaded=False` (in-memory test peers under a mock clock)
    produces a store's pages in the event loop instead of a thread."""

    def __init__(self, tasks: TaskStarter, counters: Counter[str], *, threaded: bool, idle: float = IDLE,
                 max_open: int = MAX_OPEN, page_bytes: int = PAGE_BYTES) -> None:
        self.tasks = tasks
        self.page_bytes = page_bytes   # a page's size, well under the frame limit
        self.counters = counters
        self.threaded = threaded
        self.idle = idle
        self.max_open = max_open
        self._open: dict[str, _Cursor] = {}
        self._ended: dict[str, _Cursor] = {}   # read to the end lately (oldest first)
        self._threads = trio.CapacityLimiter(max_open)

    def handlers(self) -> dict[Op, Any]:
        return {Op.CURSOR_NEXT: self._on_next, Op.CURSOR_CLOSE: self._on_close}

    def paged(self, items: Iterable[Any], size: Callable[[Any], int]) -> Iterator[list[Any]]:
        """`paged` with this peer's page size."""
        return paged(items, size, self.page_bytes)

    def __len__(self) -> int:
        return len(self._open)

    # --- opening ------------------------------------------------------------------------------

    async def from_store(self, produce: Callable[[], Iterator[list[Any]]]) -> tuple[list[Any], str]:
        """The first page `produce()` yields, and the cursor of the rest ("" when that was all).
        `produce` blocks (it reads the store): it runs in a thread of its own, start to end."""
        return await self._open_with(lambda cursor, send: self._drive_store(cursor, send, produce))

    async def from_task(self, produce: Callable[[PageSink], Awaitable[None]]) -> tuple[list[Any], str]:
        """As `from_store` for an answer a task produces, sending pages to the channel it is
        given (`await sink.send(page)`; an EventCloudError it raises reaches the reader)."""
        return await self._open_with(lambda cursor, send: produce(send))

    async def _open_with(self, drive: Callable[[_Cursor, PageSink], Awaitable[None]]) -> tuple[list[Any], str]:
        if len(self._open) >= self.max_open:
            raise RequestError(f"this peer streams {self.max_open} answers already; retry shortly",
                               ErrorCode.BUSY)
        send, receive = trio.open_memory_channel[Any](1)
        cursor = _Cursor(secrets.token_hex(16), receive)
        cursor.scope.deadline = trio.current_time() + self.idle
        self._open[cursor.ident] = cursor
        self.counters["cursors_opened"] += 1
        try:
            self.tasks.start_soon(self._produce, cursor, send, drive)
        except RuntimeError:
            self._drop(cursor)
            raise RequestError("this peer is stopping", ErrorCode.NOT_SERVING) from None
        page, more = await self._next(cursor)
        return page, cursor.ident if more else ""

    async def _produce(self, cursor: _Cursor, send: PageSink, drive: Callable[[_Cursor, PageSink], Awaitable[None]]
                       ) -> None:
        try:
            with cursor.scope:
                async with send:
                    try:
                        await drive(cursor, send)
                    except EventCloudError as exc:
                        await send.send(_Failed(exc))
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass   # the reader closed the cursor
                    except Exception as exc:  # a bug must not take the peer down: the reader hears of it
                        log.exception("producing a streamed answer failed")
                        await send.send(_Failed(RequestError(f"{type(exc).__name__}: {exc}", ErrorCode.INTERNAL)))
                # produced: the cursor stays open (under its deadline) until its last pages are read
                await trio.sleep_forever()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            if cursor.scope.cancelled_caught and not cursor.dropped:
                self.counters["cursors_expired"] += 1
                log.info("a streamed answer nobody read for %g s was closed", self.idle)
            self._drop(cursor)

    async def _drive_store(self, cursor: _Cursor, send: PageSink, produce: Callable[[], Iterator[list[Any]]]) -> None:
        if not self.threaded:
            for page in produce():
                await send.send(page)
            return
        token = trio.lowlevel.current_trio_token()

        def run() -> None:
            pages = produce()
            try:
                for page in pages:
                    trio.from_thread.run(send.send, page, trio_token=token)
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.RunFinishedError, trio.Cancelled):
                pass   # the reader is gone, or the cursor expired: stop reading the store
            finally:
                pages.close()   # in this thread: the store's iterator is dropped where it was made

        # Cancelling this task (an idle cursor) does not stop the thread at once: the thread
        # stops at its next page, when the reader's end is found closed (`_drop`).
        await trio.to_thread.run_sync(run, limiter=self._threads, abandon_on_cancel=True)

    # --- reading ------------------------------------------------------------------------------

    async def _next(self, cursor: _Cursor) -> tuple[list[Any], bool]:
        cursor.scope.deadline = math.inf   # a reader waits: the cursor is not idle
        try:
            item = await cursor.receive.receive()
        except trio.EndOfChannel:
            self._drop(cursor)
            return [], False
        except trio.ClosedResourceError:   # closed meanwhile (by another reader's close)
            raise _gone(cursor.ident, self.idle) from None
        finally:
            if not cursor.dropped:
                cursor.scope.deadline = trio.current_time() + self.idle
        if isinstance(item, _Failed):
            self._drop(cursor)
            raise item.error
        stats = cursor.receive.statistics()
        more = stats.open_send_channels > 0 or stats.current_buffer_used > 0
        if not more:
            self._drop(cursor)
        return item, more

    async def next(self, ident: str, seq: int = 0) -> tuple[list[Any], bool]:
        """The cursor's next page, and whether more may follow. `seq` (from 1): the page's number;
        the last page's again is that page again (a retried request)."""
        cursor = self._open.get(ident) or self._ended.get(ident)
        if cursor is None:
            raise _gone(ident, self.idle)
        if seq and seq == cursor.seq:
            return cursor.last
        if seq and seq != cursor.seq + 1:
            raise RequestError(f"page {seq} of result stream {ident[:8]}… asked for after page {cursor.seq}",
                               ErrorCode.BAD_REQUEST)
        if cursor.dropped:
            raise _gone(ident, self.idle)
        cursor.last = await self._next(cursor)
        cursor.seq += 1
        if not cursor.last[1]:
            self._ended[ident] = cursor   # its last page, kept a while for a retry
            while len(self._ended) > self.max_open:
                self._ended.pop(next(iter(self._ended)))
        return cursor.last

    def close(self, ident: str) -> None:
        self._ended.pop(ident, None)
        cursor = self._open.get(ident)
        if cursor is not None:
            self._drop(cursor)

    def _drop(self, cursor: _Cursor) -> None:
        cursor.dropped = True
        if self._open.get(cursor.ident) is cursor:
            del self._open[cursor.ident]
        cursor.receive.close()   # a producer blocked on sending sees it at once
        cursor.scope.cancel()

    async def _on_next(self, conn: Any, body: CursorNext) -> Page:
        rows, more = await self.next(body.id, body.seq)
        return Page(tuple(rows), more)

    async def _on_close(self, conn: Any, body: CursorNext) -> Empty:
        self.close(body.id)
        return Empty()


def _gone(ident: str, idle: float) -> RequestError:
    return RequestError(f"no open result stream {ident[:8]}… here: it ended, or nobody read it for {idle:g} s; "
                        f"run the request again", ErrorCode.GONE)
