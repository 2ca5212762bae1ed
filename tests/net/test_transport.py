"""Transports: real TCP on loopback (port 0), and the in-process MemoryNetwork used by tests."""

from __future__ import annotations

import socket

import pytest
import trio

from eventcloud.errors import Unreachable
from eventcloud.net.transport import AddressError, TcpTransport, parse_address
from eventcloud.testing import MemoryNetwork


async def echo(stream: trio.abc.Stream) -> None:
    try:
        async with stream:
            while data := await stream.receive_some():
                await stream.send_all(data.upper())
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # killed from outside


@pytest.mark.parametrize("transport", [TcpTransport, MemoryNetwork])
async def test_serve_reports_the_bound_address_and_connections_carry_bytes(transport):
    net = transport()
    async with trio.open_nursery() as nursery:
        address = await nursery.start(net.serve, "127.0.0.1:0", echo)
        assert parse_address(address)[1] != 0
        stream = await net.connect(address)
        await stream.send_all(b"hello")
        assert await stream.receive_some() == b"HELLO"
        await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_nothing_listening_is_unreachable_and_names_the_address():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(Unreachable, match=f"127.0.0.1:{port}"):
        await TcpTransport(connect_timeout=2).connect(f"127.0.0.1:{port}")


async def test_a_port_in_use_is_refused_naming_the_address():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            await TcpTransport().serve(f"127.0.0.1:{port}", echo)


@pytest.mark.parametrize("bad", ["", "host", "host:", ":80", "host:http", "host:70000", "h:-1"])
def test_malformed_addresses_are_refused(bad):
    with pytest.raises(AddressError, match="expected HOST:PORT"):
        parse_address(bad)


def test_ipv6_addresses_parse():
    assert parse_address("[::1]:7000") == ("::1", 7000)


async def test_a_killed_memory_address_breaks_its_streams_and_refuses_new_ones(autojump_clock):
    net = MemoryNetwork()
    async with trio.open_nursery() as nursery:
        address = await nursery.start(net.serve, "peer:0", echo)
        stream = await net.connect(address)
        await net.kill(address)
        with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError)):
            await stream.send_all(b"x")
            await stream.send_all(b"x")
        with pytest.raises(Unreachable, match="nothing listens"):
            await net.connect(address)
        nursery.cancel_scope.cancel()
