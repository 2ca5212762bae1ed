"""The RPC layer on its own (an RpcPair over memory streams): replies, typed errors, pushes,
the in-flight limit, the bounded outbox, and connections that break or carry garbage."""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing

from eventcloud.errors import ConnectionLost, ErrorCode, RemoteError, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.testing import open_rpc_pair
from eventcloud.wire.frames import FrameDecoder, Kind
from eventcloud.wire.hlc import HybridClock, pack
from eventcloud.wire.messages import Counted
from eventcloud.wire.ops import Op


async def echo(conn, op, body):
    if op is Op.COUNT:
        return Counted(len(body))
    if op is Op.DELETE:
        raise RequestError("nothing to delete here", ErrorCode.NOT_FOUND)
    if op is Op.STATUS:
        raise KeyError("a bug")
    if op is Op.FIND:
        return {"blob": "x" * 5000}
    return {"op": op.value, **body}


async def test_requests_get_replies_and_typed_errors(autojump_clock):
    async with open_rpc_pair(server={"on_request": echo, "max_frame": 4096}) as pair:
        assert await pair.client.call(Op.PING, {"a": 1}) == {"op": "ping", "a": 1}
        assert await pair.client.call(Op.COUNT, {"x": 1, "y": 2}) == {"count": 2}
        with pytest.raises(RemoteError) as info:
            await pair.client.call(Op.DELETE, {})
        assert info.value.code is ErrorCode.NOT_FOUND and info.value.message == "nothing to delete here"
        with pytest.raises(RemoteError) as info:
            await pair.client.call(Op.STATUS, {})
        assert info.value.code is ErrorCode.INTERNAL and "KeyError" in info.value.message
        with pytest.raises(RemoteError) as info:  # a reply over the frame limit becomes an error reply
            await pair.client.call(Op.FIND, {})
        assert info.value.code is ErrorCode.TOO_LARGE
        assert await pair.client.call(Op.PING, {}) == {"op": "ping"}  # the connection goes on


async def test_a_connection_without_handler_refuses_requests(autojump_clock):
    async with open_rpc_pair() as pair:
        with pytest.raises(RemoteError) as info:
            await pair.client.call(Op.PING, {})
        assert info.value.code is ErrorCode.UNKNOWN_OP


async def test_pushes_reach_the_push_handler_and_a_failing_one_does_not_end_the_connection(autojump_clock):
    got = []

    def on_push(conn, op, body):
        got.append((op, body))
        if body.get("boom"):
            raise ValueError("bad push handler")

    async with open_rpc_pair(client={"on_push": on_push}, server={"on_request": echo}) as pair:
        await pair.server.push(Op.NOTIFICATION, {"n": 1})
        await pair.server.push(Op.NOTIFICATION, {"boom": True})
        await pair.server.push(Op.NOTIFICATION, {"n": 2})
        await pair.client.call(Op.PING, {})  # replies come after the pushes sent before them
        assert [b for _, b in got] == [{"n": 1}, {"boom": True}, {"n": 2}]
        assert not pair.client.closed


async def test_an_async_push_handler_runs_in_its_own_task_within_the_in_flight_limit(autojump_clock):
    """Pushes between peers (commits) are served like requests without a reply: a slow one
    does not hold up reading, at most `max_inflight` run at once, a failing one is logged."""
    running, most, done = 0, 0, []

    async def on_push(conn, op, body):
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            await trio.sleep(1)
            if body.get("boom"):
                raise ValueError("bad push handler")
            done.append(body["n"])
        finally:
            running -= 1

    async with open_rpc_pair(server={"on_request": echo, "on_push": on_push, "max_inflight": 3}) as pair:
        await pair.client.push(Op.COMMIT, {"boom": True})
        for n in range(6):
            await pair.client.push(Op.COMMIT, {"n": n})
        started = trio.current_time()
        with trio.fail_after(10):
            while len(done) < 6:
                await trio.sleep(0.1)
        assert sorted(done) == list(range(6)) and most == 3
        assert trio.current_time() - started < 4  # three at a time, not one by one
        assert await pair.client.call(Op.PING, {}) == {"op": "ping"}  # the connection goes on


async def test_clocks_merge_on_every_message(autojump_clock):
    async with open_rpc_pair(server={"on_request": echo}) as pair:
        pair.client.clock.observe(pack(3_000_000, 0))  # the client is 50 minutes ahead
        await pair.client.call(Op.PING, {})
        assert pair.server.clock.last > pack(3_000_000, 0)


async def test_requests_in_flight_per_connection_are_bounded(autojump_clock):
    running, most = 0, 0
    release = trio.Event()

    async def slow(conn, op, body):
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1
        return {}

    async with open_rpc_pair(server={"on_request": slow, "max_inflight": 3}) as pair:
        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(pair.client.call, Op.PING, {})
            await trio.sleep(1)
            assert running == 3  # the reader stopped reading: the others wait in the stream
            release.set()
        assert most == 3


async def test_the_outbox_is_bounded_when_the_other_side_stops_reading(autojump_clock):
    left, right = trio.testing.lockstep_stream_pair()  # a write blocks until the other side reads
    conn = RpcConnection(left, HybridClock(lambda: 0), max_outbox=10_000)
    peak = 0
    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(conn.push, Op.NOTIFICATION, {"blob": "y" * 1000})
        for _ in range(20):
            await trio.sleep(0.1)
            peak = max(peak, conn._outbox_bytes)
        assert 0 < peak <= 10_000 + 1100
        nursery.cancel_scope.cancel()


async def test_a_broken_connection_fails_pending_and_later_calls(autojump_clock):
    never = trio.Event()

    async def stuck(conn, op, body):
        await never.wait()

    async with open_rpc_pair(server={"on_request": stuck}) as pair:
        async def close_soon():
            await trio.sleep(1)
            await pair.server.stream.aclose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(close_soon)
            with pytest.raises(ConnectionLost):
                await pair.client.call(Op.PING, {})
        await trio.sleep(0.1)
        assert pair.client.closed
        with pytest.raises(ConnectionLost):
            await pair.client.call(Op.PING, {})


async def test_garbage_gets_one_error_frame_then_the_connection_closes(autojump_clock):
    left, right = trio.testing.memory_stream_pair()
    closed = []
    server = RpcConnection(right, HybridClock(lambda: 0), on_request=echo, on_close=closed.append)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.run)
        await left.send_all(struct.pack(">I", 3) + b"\xc1\xc1\xc1")
        decoder = FrameDecoder()
        with trio.fail_after(5):
            while (message := decoder.next_message()) is None:
                decoder.feed(await left.receive_some())
        assert message.kind is Kind.ERROR and message.id is None and message.body["code"] == "protocol"
        with trio.fail_after(5):
            await server.wait_closed()
        assert closed and "not valid msgpack" in closed[0]


class _GatedStream:
    """A stream whose writes wait at a gate (a slow network), then go through."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.gate = trio.Event()

    async def send_all(self, data) -> None:
        await self.gate.wait()
        await self.inner.send_all(data)

    async def receive_some(self, max_bytes=None):
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_caller_cancelled_while_frames_are_written_loses_no_one_elses_frame(autojump_clock):
    """Frames of several callers go out in one write; a caller is cancelled (its own timeout)
    while the network is slow. Every other caller's request still arrives and is answered:
    none waits forever for a reply to a frame that was never sent. (Which caller's task does
    the write depends on scheduling, so each of them is the impatient one in turn, 5 times.)"""
    async with open_rpc_pair(server={"on_request": echo}) as pair:
        for round in range(20):
            gated = _GatedStream(pair.client.stream)
            pair.client.stream = gated
            answers = []

            async def caller(i: int) -> None:
                if i == round % 4:
                    with trio.move_on_after(1):
                        await pair.client.call(Op.PING, {"who": i})
                else:
                    answers.append((await pair.client.call(Op.PING, {"who": i}))["who"])

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    for i in range(4):
                        nursery.start_soon(caller, i)
                    await trio.sleep(2)        # the impatient caller gave up meanwhile
                    gated.gate.set()
            assert sorted(answers) == sorted({0, 1, 2, 3} - {round % 4}), round
            pair.client.stream = gated.inner
        assert await pair.client.call(Op.PING, {}) == {"op": "ping"}   # and the stream is intact


async def test_idle_and_frame_timeouts_count_only_while_the_reader_waits_for_bytes(autojump_clock):
    """The idle timeout closes a silent connection and the frame timeout one whose frame stalls
    (each with a clear error frame), but a reader held back by the in-flight limit (slow
    handlers) is not idle: its connection stays open however long the handlers take."""

    async def slow(conn, op, body):
        await trio.sleep(body["seconds"])
        return body

    async with open_rpc_pair(server={"on_request": slow, "max_inflight": 1, "idle_timeout": 10.0,
                                     "frame_timeout": 5.0}) as pair:
        began = trio.current_time()
        async with trio.open_nursery() as nursery:
            # the reader waits 2 × 30 s for room to dispatch the second and third: far longer
            # than the idle timeout, while it is not waiting for bytes
            for seconds in (30, 30, 5):
                nursery.start_soon(pair.client.call, Op.PING, {"seconds": seconds})
                await trio.sleep(0)
        assert trio.current_time() - began == pytest.approx(65, abs=1)
        assert not pair.server.closed
        await pair.server.wait_closed()  # silent since the reader read the third, at 60 s
        assert pair.server.close_reason == "no message for 10 s"
        assert trio.current_time() - began == pytest.approx(70, abs=1)

    async with open_rpc_pair(server={"on_request": slow, "idle_timeout": 10.0, "frame_timeout": 5.0}) as pair:
        began = trio.current_time()
        await trio.sleep(8)
        await pair.client.stream.send_all(struct.pack(">I", 100) + b"\x81")  # a frame that never completes
        await pair.server.wait_closed()
        assert pair.server.close_reason == "a frame was not completed within 5 s"
        assert trio.current_time() - began == pytest.approx(13, abs=0.5)


async def test_calls_to_a_silent_side_fail_after_the_liveness_timeout_and_a_slow_live_one_is_waited_for(
        autojump_clock):
    """gRPC's keepalive: a peer paused or cut off keeps its TCP connection, and without this
    every call to it waited for ever (a status took over 40 s behind one SIGSTOPped peer)."""
    async def slow(conn, op, body):
        if op is Op.FIND:
            await trio.sleep(60)   # far longer than the liveness timeout: pings still answered
        return {"op": op.value}

    async with open_rpc_pair(client={"liveness": 2.0}, server={"on_request": slow}) as pair:
        started = trio.current_time()
        assert await pair.client.call(Op.FIND, {}) == {"op": "find"}
        assert trio.current_time() - started == pytest.approx(60, abs=0.1)
        assert not pair.client.closed and pair.server.counters["bytes_in"] > 0

    left, right = trio.testing.memory_stream_pair()   # `right` is never read: a paused peer
    conn = RpcConnection(left, HybridClock(lambda: 0), name="to-silent", liveness=2.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run)
        await trio.sleep(30)          # idle for long: silence counts from the request, not before
        started = trio.current_time()
        with pytest.raises(ConnectionLost, match="nothing heard from the other side for 2 s"):
            await conn.call(Op.COUNT, {})
        assert trio.current_time() - started == pytest.approx(2.0, abs=0.05)
        assert conn.closed
        nursery.cancel_scope.cancel()
