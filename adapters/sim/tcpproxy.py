"""A TCP proxy on loopback that can delay traffic or cut it: network faults for real.

The chaos soak (adapters/sim/chaos/) puts one `TcpProxy` between each `kctl node` and ZooKeeper, so
a node's connection can be slowed down or partitioned away while every other node keeps its own:

    proxy = TcpProxy("127.0.0.1", zk_port)
    await proxy.start()                 # proxy.port: what the node connects to
    proxy.set_delay(0.2)                # every byte arrives 200 ms late, both ways, in order
    proxy.cut()                         # open connections are reset, new ones are reset at once
    proxy.heal()                        # no delay, connections accepted again
    await proxy.close()

Delay is latency, not a bandwidth limit: each chunk read from one side is written to the other
`delay` seconds after it arrived, in arrival order, so a request and its answer are each late by
the delay (a round trip by twice the delay). A cut aborts both sockets of every connection (the
kernel sends RST: the client learns at once, as when a firewall rejects) and, while cut, every
new connection is accepted and aborted at once; the listening port stays ours throughout, so
nobody else can take it while the partition lasts.

`blackhole()` is the other kind of partition: connections stay open but nothing is forwarded
(held, not dropped, because TCP does not lose bytes; they are delivered in order on `heal()`),
so the client only learns from its own timeouts, as when packets are silently dropped.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

log = logging.getLogger("kctl.tcpproxy")

_READ_SIZE = 65536


class _Pipe:
    """One direction of one proxied connection: read chunks, write each `delay` s later."""

    def __init__(self, proxy: "TcpProxy", reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.proxy = proxy
        self.reader = reader
        self.writer = writer
        self.queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

    async def pump_in(self) -> None:
        try:
            while True:
                data = await self.reader.read(_READ_SIZE)
                if not data:
                    break
                self.proxy.bytes_forwarded += len(data)
                self.queue.put_nowait((time.monotonic() + self.proxy.delay, data))
        except (ConnectionError, OSError):
            pass
        finally:
            self.queue.put_nowait(None)

    async def pump_out(self) -> None:
        try:
            while True:
                item = await self.queue.get()
                if item is None:
                    break
                due, data = item  # the delay in force when the chunk arrived
                while True:
                    wait = due - time.monotonic()
                    if self.proxy.holding:
                        await self.proxy.released.wait()
                        continue
                    if wait <= 0:
                        break
                    await asyncio.sleep(wait)
                self.writer.write(data)
                await self.writer.drain()
            if self.writer.can_write_eof():
                self.writer.write_eof()
        except (ConnectionError, OSError):
            pass


class _Link:
    """Both directions of one client connection."""

    def __init__(self, proxy: "TcpProxy", client: tuple, upstream: tuple):
        self.proxy = proxy
        self.client_reader, self.client_writer = client
        self.up_reader, self.up_writer = upstream
        self.tasks: list[asyncio.Task] = []

    def start(self) -> None:
        to_server = _Pipe(self.proxy, self.client_reader, self.up_writer)
        to_client = _Pipe(self.proxy, self.up_reader, self.client_writer)
        for coro in (to_server.pump_in(), to_server.pump_out(), to_client.pump_in(), to_client.pump_out()):
            self.tasks.append(asyncio.create_task(coro))

    async def finished(self) -> None:
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.close()

    def abort(self) -> None:
        """Reset both sockets (RST), as a firewall that starts rejecting would."""
        for writer in (self.client_writer, self.up_writer):
            transport = writer.transport
            if transport is not None and not transport.is_closing():
                transport.abort()
        for task in self.tasks:
            task.cancel()

    def close(self) -> None:
        for writer in (self.client_writer, self.up_writer):
            if not writer.transport.is_closing():
                writer.close()


class TcpProxy:
    """Forward `listen_host:listen_port` (0: any free port) to `target_host:target_port`."""

    def __init__(self, target_host: str, target_port: int, *, listen_host: str = "127.0.0.1", listen_port: int = 0,
                 name: str | None = None):
        self.target = (target_host, target_port)
        self.listen = (listen_host, listen_port)
        self.name = name or f"proxy->{target_host}:{target_port}"
        self.delay = 0.0
        self.is_cut = False
        self.holding = False
        self.released = asyncio.Event()
        self.released.set()
        self.links: set[_Link] = set()
        self.counts: Counter[str] = Counter()  # accepted, refused (while cut), reset, upstream_failed
        self.bytes_forwarded = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def host(self) -> str:
        return self.listen[0]

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the proxy is not started")
        return self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> "TcpProxy":
        self._server = await asyncio.start_server(self._accept, self.listen[0], self.listen[1])
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self.links):
            link.abort()
        self.released.set()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> "TcpProxy":
        return await self.start()

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # -- faults ------------------------------------------------------------------------------

    def set_delay(self, seconds: float) -> None:
        """Add `seconds` of latency in each direction (0: none)."""
        if seconds < 0:
            raise ValueError(f"delay must be >= 0, got {seconds}")
        self.delay = float(seconds)

    def cut(self) -> None:
        """Reset every open connection and every new one until `heal()`."""
        self.is_cut = True
        for link in list(self.links):
            link.abort()
            self.counts["reset"] += 1
        self.links.clear()

    def blackhole(self) -> None:
        """Keep connections open but forward nothing until `heal()`."""
        self.holding = True
        self.released.clear()

    def heal(self) -> None:
        """No delay, no cut, no black hole."""
        self.delay = 0.0
        self.is_cut = False
        self.holding = False
        self.released.set()

    @property
    def connections(self) -> int:
        return len(self.links)

    # -- serving -----------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.is_cut:
            self.counts["refused"] += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError as exc:
            self.counts["upstream_failed"] += 1
            log.debug("%s: cannot reach %s:%d: %s", self.name, *self.target, exc)
            writer.transport.abort()
            return
        if self.is_cut:  # cut while we were connecting
            self.counts["refused"] += 1
            up_writer.transport.abort()
            writer.transport.abort()
            return
        self.counts["accepted"] += 1
        link = _Link(self, (reader, writer), (up_reader, up_writer))
        self.links.add(link)
        link.start()
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await link.finished()
        finally:
            self.links.discard(link)
            if task is not None:
                self._tasks.discard(task)
