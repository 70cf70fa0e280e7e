"""The chaos soak's TCP proxy on loopback: it forwards, delays, cuts and black-holes for real."""
from __future__ import annotations

import asyncio
import time

import pytest

from adapters.sim.tcpproxy import TcpProxy
from adapters.zookeeper.session import ZkSession


@pytest.fixture
async def echo():
    """An echo server on loopback: (host, port)."""
    async def serve(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[:2]
    server.close()
    await server.wait_closed()


@pytest.fixture
async def proxy(echo):
    async with TcpProxy(*echo) as p:
        yield p


async def round_trip(reader, writer, payload: bytes, timeout: float = 5.0) -> tuple[bytes, float]:
    started = time.monotonic()
    writer.write(payload)
    await writer.drain()
    got = await asyncio.wait_for(reader.readexactly(len(payload)), timeout)
    return got, time.monotonic() - started


async def test_forwards_both_ways_in_order(proxy):
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    payload = bytes(range(256)) * 4096  # 1 MiB, several reads each way
    got, _ = await round_trip(reader, writer, payload)
    assert got == payload
    assert proxy.connections == 1 and proxy.counts["accepted"] == 1
    writer.close()


async def test_delay_adds_latency_each_way_and_keeps_order(proxy):
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    _, fast = await round_trip(reader, writer, b"ping")
    proxy.set_delay(0.25)
    writer.write(b"a")
    writer.write(b"b")  # queued behind "a", delivered after it
    await writer.drain()
    started = time.monotonic()
    got = await asyncio.wait_for(reader.readexactly(2), 5)
    slow = time.monotonic() - started
    assert got == b"ab"
    assert slow >= 0.5 - 0.02  # 0.25 s to the server and 0.25 s back
    assert fast < 0.25
    proxy.heal()
    _, healed = await round_trip(reader, writer, b"pong")
    assert healed < 0.25
    writer.close()


async def test_cut_resets_open_connections_and_refuses_new_ones_until_healed(proxy):
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    await round_trip(reader, writer, b"before")
    proxy.cut()
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        got = await asyncio.wait_for(reader.read(10), 5)
        if not got:
            raise asyncio.IncompleteReadError(b"", 1)
    # a new connection is accepted by the kernel, then reset: the client sees EOF or a reset
    r2, w2 = await asyncio.open_connection(proxy.host, proxy.port)
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        w2.write(b"x")
        await w2.drain()
        await asyncio.wait_for(r2.readexactly(1), 5)
    assert proxy.counts["reset"] == 1 and proxy.counts["refused"] >= 1
    proxy.heal()
    r3, w3 = await asyncio.open_connection(proxy.host, proxy.port)
    got, _ = await round_trip(r3, w3, b"after")
    assert got == b"after"
    w3.close()


async def test_blackhole_holds_traffic_without_closing_then_delivers_it(proxy):
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    proxy.blackhole()
    writer.write(b"held")
    await writer.drain()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(reader.readexactly(4), 0.5)
    assert proxy.connections == 1
    proxy.heal()
    assert await asyncio.wait_for(reader.readexactly(4), 5) == b"held"
    writer.close()


async def test_a_zookeeper_session_cut_off_past_its_timeout_expires(zk_server):
    """The proxy between a client and the real ZooKeeper: a cut longer than the session timeout
    makes the server expire the session, and the client learns it when the link comes back."""
    async with TcpProxy(zk_server.host, zk_server.port) as proxy:
        zk = await ZkSession.connect(f"{proxy.address}/proxy-test", session_timeout_ms=2000)
        try:
            first = zk.session_id
            await zk.create("/alive", b"", ephemeral=True)
            proxy.cut()
            await asyncio.sleep(3.5)  # past the 2 s timeout: the server drops the session
            proxy.heal()
            event = await asyncio.wait_for(zk.wait_session_change(first), 20)
            assert event.kind == "expired"
            deadline = time.monotonic() + 20
            while zk.session_id in (first, None) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # the client opens a new session
            assert zk.session_id not in (first, None)
            assert await zk.exists("/alive") is None  # its ephemeral went with the old session
        finally:
            await zk.close()
