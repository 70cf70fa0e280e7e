"""ZooKeeper for kctl, the connection and the session: aiozk 0.32.0's, patched.

`_Connection` and `_Session` subclass aiozk's and replace what we cannot use as it is;
`ZkSession` (adapters/zookeeper/session.py) runs on a `_Session`, and `force_expire` on a bare `_Connection`.

What aiozk 0.32.0 does that we design around (each one is shown by a test in
tests/adapters/zookeeper/test_session.py, against the raw client):

1. No session-state listener. On expiry it silently opens a new session and does not recreate
   ephemeral nodes. `_Session` below runs its own repair loop, counts sessions (`generation`)
   and reports `expired` / `established` events; every request is bound to the session it
   started in and fails with `SessionExpired` instead of silently running in a new one.
2. When the server closes a connection cleanly (EOF), aiozk's read loop returns without telling
   anybody, so in-flight requests hang until the heartbeat times out (about the session timeout).
   `_Connection` reports EOF at once; the session fails the in-flight requests (reads are
   re-sent after the reconnect, writes raise `ConnectionLost`) and reconnects with a short
   backoff instead of aiozk's 2, 4, 8... s.
3. A failed transaction comes back as an empty result. We encode multi-ops ourselves
   (adapters/zookeeper/wire.py) and read the per-operation error codes, which name the first failing
   operation; `ZkSession.multi()` then re-reads the targets to report every problem, and tells a
   fenced controller apart.
4. "host:port/chroot" is not parsed (the port becomes "2181/chroot"): `parse_connect_string`
   (adapters/zookeeper/session.py) splits it and `ZkSession` applies the chroot, on every path we send and
   receive.

5. When a server closes the handshake, aiozk forgets the last zxid it saw ("inconsistent zxid"),
   and its pings and connect answers overwrite it with whatever the server says. A server behind
   what the client has read (a follower not caught up, a member restored from an older data dir)
   refuses a ConnectRequest whose lastZxidSeen is ahead of it (ZooKeeperServer.
   processConnectRequest: CLIENT_ZXID_AHEAD), and that refusal is what keeps reads monotonic,
   as in Java's ClientCnxn. Here the last zxid is the highest seen in any reply header and only
   rises (`_ZxidMark`), across reconnects, refused handshakes and expiry; the server that
   refused is tried last (`_Session._server_order`).

Also: aiozk has no `addAuth`; we send the digest AuthRequest on every new connection (ZooKeeper
keeps auth per connection, not per session), before any other request. And aiozk's SetWatches
replay is switched off: after any reconnect every watched path is re-read instead
(adapters/zookeeper/watch.py).

Speed, measured by benchmarks/zk_throughput.py: aiozk encodes and decodes through generic `Part`
objects, writes one socket send per request and reads each frame with two awaits. Here the hot
requests are encoded and decoded with precompiled structs (adapters/zookeeper/wire.py), everything queued
in one loop iteration goes out in one write, the read loop dispatches every frame of a socket
read, and `ZkSession.get_many()` batches its reads into multiRead requests (ZooKeeper 3.6+),
because the server spends ~60 us of CPU per request and that, not Python, limited
one-request-per-read.
"""
from __future__ import annotations

import asyncio
import collections
import errno
import logging
import random
import re
import socket
import struct
import time
from typing import Callable, Sequence

from aiozk import exc as _zexc
from aiozk import protocol as _proto
from aiozk.connection import Connection as _AiozkConnection
from aiozk.session import Session as _AiozkSession
from aiozk.states import States as _States

from adapters.zookeeper.values import (
    ConnectionLost,
    SessionClosed,
    SessionEvent,
    SessionExpired,
    ZkError,
    _ServerError,
)
from adapters.zookeeper.wire import _CLOSE_OPCODE, _INT, _PARSERS, _REPLY_HEADER, _WATCH_XID, _Request

_SPECIAL_OPCODES = {_proto.PING_XID: _proto.PingRequest.opcode}
"""Requests of a special xid share it: with two pings in flight (a loop that stalled past a
heartbeat), the first reply takes the xid's opcode and the second must still read as a ping."""

log = logging.getLogger("adapters.zookeeper.session")  # the ZooKeeper client logs under one name: adapters/zookeeper/session.py's

READ_WINDOW = 4096  # pipelined reads in flight


def _consume(future: asyncio.Future) -> None:
    """Done-callback for futures nobody awaits: mark their exception as retrieved."""
    if not future.cancelled():
        future.exception()


# --------------------------------------------------------------------------------------------
# aiozk patches: connection and session


class _ZxidMark:
    """The highest zxid the client has seen in any reply, shared by all its connections.

    Java's ClientCnxn keeps `lastZxid` for the life of the handle and sends it in every
    ConnectRequest; ZooKeeperServer.processConnectRequest closes the connection of a client whose
    last zxid is ahead of its own database (CLIENT_ZXID_AHEAD), so a client never reads from a
    server behind what it has already seen. The mark only rises: reconnects, refused handshakes
    and session expiry leave it where it is."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class _Connection(_AiozkConnection):
    """aiozk's connection, reporting EOF at once and reading whole frames without wait_for."""

    def __init__(self, host, port, watch_handler, on_lost=None, zxid_mark: _ZxidMark | None = None):
        super().__init__(host, port, watch_handler=watch_handler, read_timeout=None)
        self._on_lost = on_lost
        self.zxid_mark = zxid_mark if zxid_mark is not None else _ZxidMark()
        self.last_rx = time.monotonic()
        self._outbox: list[bytes] = []
        self._flush_scheduled = False
        self._parsers: dict[int, Callable] = {}  # xid -> the reply parser its request named

    def send(self, request, xid=None):
        """aiozk's send, except that the frames queued in one loop iteration go out in a single
        socket write (one syscall per request was the bottleneck of pipelined reads)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if self.closing:
            future.set_exception(_zexc.ConnectError(self.host, self.port))
            return future
        if request.special_xid:
            xid = request.special_xid
        payload = request.serialize(xid)
        self.opcode_xref[xid] = request.opcode
        parser = getattr(request, "parser", None)
        if parser is not None:
            self._parsers[xid] = parser
        if xid in _proto.SPECIAL_XIDS:
            self.pending_specials[xid].append(future)
        else:
            self.pending[xid] = future
        self._outbox.append(_INT.pack(len(payload)) + payload)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._outbox or self.closing:
            self._outbox.clear()
            return
        data = b"".join(self._outbox)
        self._outbox.clear()
        try:
            self.writer.write(data)
        except Exception as error:
            log.info("write to %s:%s failed: %r", self.host, self.port, error)
            if self._on_lost is not None:
                self._on_lost(self)

    async def read_loop(self):
        """Replaces aiozk's loop, which returns quietly on EOF (behaviour 2) and reads each
        frame with two awaits: read what the socket has, dispatch every complete frame in it."""
        buf = bytearray()
        reader = self.reader
        try:
            while True:
                chunk = await reader.read(1 << 18)
                if not chunk:
                    break  # EOF: the server closed the connection
                self.last_rx = time.monotonic()
                buf += chunk
                offset, end = 0, len(buf)
                while end - offset >= 4:
                    (size,) = _INT.unpack_from(buf, offset)
                    if end - offset - 4 < size:
                        break
                    self._dispatch(buf, offset + 4, offset + 4 + size)
                    offset += 4 + size
                del buf[:offset]
        except asyncio.CancelledError:
            return
        except (ConnectionError, OSError) as error:
            log.info("connection to %s:%s failed: %r", self.host, self.port, error)
        if not self.closing and self._on_lost is not None:
            self._on_lost(self)

    def _dispatch(self, buf: bytearray, start: int, end: int) -> None:
        xid, zxid, err = _REPLY_HEADER.unpack_from(buf, start)
        mark = self.zxid_mark
        if zxid > mark.value:  # every reply header counts, errors and pings too (as in Java)
            mark.value = zxid
        body = start + _REPLY_HEADER.size
        if xid == _WATCH_XID:
            self.watch_handler(_proto.WatchEvent.deserialize(bytes(buf[body:end])))
            return
        opcode = self.opcode_xref.pop(xid, None) or _SPECIAL_OPCODES.get(xid)
        parser = self._parsers.pop(xid, None) if self._parsers else None
        if err:
            response = _ServerError(err)
        else:
            if parser is None:
                parser = _PARSERS.get(opcode)
            if parser is not None:
                response = parser(buf, body)
            else:
                response_class = _proto.response_xref.get(opcode)
                if response_class is None:
                    response = None
                else:
                    try:
                        response = response_class.deserialize(bytes(buf[body:end]))
                    except struct.error as exc:  # one bad reply must not end the read loop
                        log.error("unreadable ZooKeeper reply to opcode %s (xid %d, %d bytes): %s",
                                  opcode, xid, end - body, exc)
                        response = ZkError(f"unreadable reply to opcode {opcode}: {exc}")
        if xid in _proto.SPECIAL_XIDS:
            waiting = self.pending_specials.get(xid)
            future = waiting.pop(0) if waiting else None
        else:
            future = self.pending.pop(xid, None)
        if future is None or future.done():
            return
        if isinstance(response, Exception):
            future.set_exception(response)
        else:
            future.set_result((zxid, response))

    async def send_connect(self, request):
        payload = request.serialize()
        self.writer.write(_INT.pack(len(payload)) + payload)
        try:
            return await self.read_response(initial_connect=True)
        except ConnectionAbortedError:
            return None

    async def read_response(self, initial_connect=False):
        try:
            (size,) = _INT.unpack(await self.reader.readexactly(4))
            frame = await self.reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            raise ConnectionAbortedError from None
        self.last_rx = time.monotonic()
        if initial_connect:
            return None, None, _proto.ConnectResponse.deserialize(frame)
        xid, zxid, err = _REPLY_HEADER.unpack_from(frame)
        if zxid > self.zxid_mark.value:
            self.zxid_mark.value = zxid
        if xid == _WATCH_XID:
            return xid, zxid, _proto.WatchEvent.deserialize(frame[_REPLY_HEADER.size:])
        opcode = self.opcode_xref.pop(xid, None) or _SPECIAL_OPCODES.get(xid)
        if err:
            return xid, zxid, _ServerError(err)
        parser = _PARSERS.get(opcode)
        if parser is not None:
            return xid, zxid, parser(frame, _REPLY_HEADER.size)
        response_class = _proto.response_xref.get(opcode)
        if response_class is None:
            return xid, zxid, None
        return xid, zxid, response_class.deserialize(frame[_REPLY_HEADER.size:])


def _retire(conn: _Connection | None) -> None:
    """Close a connection for good and fail its pending requests with ConnectError now."""
    if conn is None:
        return
    conn.closing = True
    for future in conn.drain_all_pending():
        if not future.done():
            future.set_exception(_zexc.ConnectError(conn.host, conn.port))
            future.add_done_callback(_consume)
    task = conn.read_loop_task
    if task is not None and not task.done() and task is not asyncio.current_task():
        task.cancel()
    if conn.writer is not None:
        conn.writer.close()


_DEFINITE_ERRNOS = {errno.ECONNREFUSED: "connection refused", errno.EHOSTUNREACH: "no route to host",
                    errno.ENETUNREACH: "network unreachable"}


def definite_failure(host: str, error: BaseException) -> str | None:
    """Why connecting to `host` failed, if waiting cannot help: the name does not resolve, or
    every address refused (or has no route). None for anything else (silence, a timeout, a
    server that closed the connection while starting)."""
    if isinstance(error, socket.gaierror):
        return f"host {host!r} does not resolve ({error.strerror})"
    if isinstance(error, OSError) and error.errno in _DEFINITE_ERRNOS:
        return _DEFINITE_ERRNOS[error.errno]
    if isinstance(error, OSError) and error.errno is None and str(error).startswith("Multiple exceptions"):
        # asyncio's happy-eyeballs loop over a name's addresses (e.g. ::1 and 127.0.0.1)
        codes = {int(code) for code in re.findall(r"\[Errno (-?\d+)\]", str(error))}
        reasons = {_DEFINITE_ERRNOS.get(code) for code in codes}
        if codes and None not in reasons:
            return ", ".join(sorted(reasons))
    return None


class ConnectionView:
    """What the client knows of its own connection, for metrics and logs (adapters/observability/metrics.py
    reads it): the server it is on, how often it reconnected, how long it was without one.

    Updated by `_Session.repair_loop` only; `down_since` is set while there is no connection."""

    def __init__(self) -> None:
        self.server: str | None = None  # "host:port" of the current connection
        self.connections = 0  # connections established, the first included
        self.disconnects = 0  # connections lost (closed, reset, silent past 2/3 of the timeout)
        self.expiries = 0  # sessions the server declared expired when we came back
        self.handshake_failures = 0  # servers that closed the handshake (behind our zxid, not serving)
        self.down_since: float | None = None  # monotonic, while disconnected
        self.disconnected_s = 0.0  # total time without a connection, since the first one
        self.last_outage_s = 0.0

    @property
    def reconnections(self) -> int:
        return max(0, self.connections - 1)

    def disconnected(self, now: float) -> None:
        if self.down_since is None and self.connections:
            self.down_since = now
            self.server = None
            self.disconnects += 1

    def connected(self, host: str, port: int, now: float, session_id: int | None) -> None:
        self.connections += 1
        self.server = f"{host}:{port}"
        if self.down_since is not None:
            self.last_outage_s = now - self.down_since
            self.disconnected_s += self.last_outage_s
            self.down_since = None
            log.info("ZooKeeper connection to %s (session 0x%x): reconnection %d after %.3f s without a "
                     "connection", self.server, session_id or 0, self.reconnections, self.last_outage_s)
        else:
            log.info("ZooKeeper connection to %s (session 0x%x)", self.server, session_id or 0)

    def seconds_without_connection(self, now: float) -> float:
        """Total time without a connection, the current outage included."""
        current = now - self.down_since if self.down_since is not None else 0.0
        return self.disconnected_s + current


class _SessionRejected(Exception):
    """The server answered our reconnect with session id 0: the session is dead."""


class _Session(_AiozkSession):
    """aiozk's session with its own repair loop: session identity, events, auth, fast failover.

    `generation` counts the sessions established so far; a request bound to a generation fails
    with SessionExpired rather than run in a later session."""

    def __init__(self, hosts: str, timeout_s: float, auth: tuple[str, bytes] | None = None):
        super().__init__(hosts, timeout_s, None, False, None)
        self.requested_timeout = timeout_s
        self.auth = auth
        self.generation = 0
        self.last_session_id: int | None = None  # the last session established, even once expired
        self.closed = False
        self.listener: Callable[[SessionEvent], None] | None = None
        self.connected_hook: Callable[[bool], None] | None = None
        # Before the first session: resolved with the reasons once every server has failed in a
        # way waiting cannot mend (ZkSession.connect then gives up at once instead of waiting
        # out its timeout). Never set again once a session was established: a server that
        # restarts refuses connections for a while, and then the session waits for it.
        self.unreachable: asyncio.Future | None = None
        self._round_failures: dict[tuple, str | None] = {}  # this round's connect failures, definite or not
        self.refused_at: dict[tuple[str, int], float] = {}  # server -> when its handshake last failed
        self.view = ConnectionView()

    # -- the last zxid seen: only ever rises (see _ZxidMark) ---------------------------------

    @property
    def last_zxid(self) -> int:
        return self._zxid_mark().value

    @last_zxid.setter
    def last_zxid(self, zxid: int | None) -> None:
        # aiozk's __init__ assigns None; anything lower than the mark is ignored, never a reset
        mark = self._zxid_mark()
        if zxid and zxid > mark.value:
            mark.value = zxid

    def _zxid_mark(self) -> _ZxidMark:
        mark = self.__dict__.get("zxid_mark")
        if mark is None:
            mark = self.__dict__["zxid_mark"] = _ZxidMark()
        return mark

    # -- connections -----------------------------------------------------------------------

    async def make_connection(self, host, port):
        conn = _Connection(host, port, watch_handler=self.event_dispatch, on_lost=self._connection_lost,
                           zxid_mark=self._zxid_mark())
        try:
            await asyncio.wait_for(conn.connect(), self.connect_timeout())
        except Exception as error:  # refused, timed out, server not serving yet
            log.debug("cannot connect to %s:%s: %r", host, port, error)
            if conn.writer is not None:
                conn.writer.close()
            self._round_failures[(host, port)] = definite_failure(host, error)
            return None
        return conn

    async def find_server(self, allow_read_only):
        delay = 0.02
        while True:
            self._round_failures = {}
            for host, port in self._server_order():
                conn = await self.make_connection(host, port)
                if conn is None:
                    continue
                if conn.start_read_only and not allow_read_only:
                    conn.writer.close()
                    continue
                self.conn = conn
                return
            self._report_unreachable()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _report_unreachable(self) -> None:
        """After a round in which no server took the connection: if this session never started
        and every server failed for a definite reason, say so (see `unreachable`)."""
        future = self.unreachable
        if future is None or future.done() or self.generation or self.last_session_id is not None:
            return
        reasons = [self._round_failures.get((host, port)) for host, port in self.hosts]
        if reasons and all(reasons):
            future.set_result([(f"{host}:{port}", reason) for (host, port), reason in zip(self.hosts, reasons)])

    def _server_order(self) -> list[tuple[str, int]]:
        """The servers in random order, those whose handshake failed last at the end (Java's
        client likewise moves on to the next server of its list after a refusal)."""
        shuffled = random.sample(self.hosts, len(self.hosts))
        return sorted(shuffled, key=lambda server: self.refused_at.get(tuple(server), 0.0))

    def _connection_lost(self, conn: _Connection) -> None:
        log.info("connection to %s:%s closed by the server", conn.host, conn.port)
        self._lose(conn)

    def _lose(self, conn: _Connection | None) -> None:
        _retire(conn)
        if conn is self.conn and not self.closing and self.state in (_States.CONNECTED, _States.READ_ONLY):
            self.state.transition_to(_States.SUSPENDED)

    # -- establishing sessions -------------------------------------------------------------

    def connect_timeout(self) -> float:
        """How long one connection may take to open: Java's ClientCnxn gives each server of
        the list its share of the session timeout for the TCP connect, so that a silent one
        leaves time for the next. aiozk's connect also asks the server `srvr` (its version, and
        whether it is read-only) and waits for the answer: half that share here, so that a
        server that takes the connection and says nothing leaves time for a retry."""
        return max(self.timeout / (2 * max(len(self.hosts), 1)), 1.0)

    def handshake_timeout(self) -> float:
        """How long a ConnectRequest may wait for its answer: 2/3 of the session timeout, Java's
        read timeout. Waiting the whole timeout, as before, let one silent server (a JVM
        starting or stopping on a loaded machine holds the connection in its accept backlog)
        outlast the session the handshake was to save; this leaves a third of it for a retry."""
        return max(self.timeout * 2 / 3, 1.0)

    async def establish_session(self):
        request = _proto.ConnectRequest(
            protocol_version=0,
            last_seen_zxid=self.last_zxid or 0,
            timeout=int(self.requested_timeout * 1000),
            session_id=self.session_id or 0,
            password=self.password,
            read_only=False,
        )
        answer = await self.conn.send_connect(request)
        if answer is None:
            raise ConnectionError("the server closed the connection during the handshake")
        _, _, response = answer
        if response.session_id == 0:
            raise _SessionRejected()
        self.session_id = response.session_id
        self.password = response.password
        self.timeout = response.timeout / 1000

    async def repair_loop(self):
        backoff = 0.02
        while not self.closing:
            await self.state.wait_for(_States.SUSPENDED, _States.LOST)
            if self.closing:
                break
            self.view.disconnected(time.monotonic())
            _retire(self.conn)
            await self.find_server(allow_read_only=False)
            previous = self.session_id
            try:
                await asyncio.wait_for(self.establish_session(), self.handshake_timeout())
                self.conn.start_read_loop()
                if self.auth is not None:
                    scheme, credential = self.auth
                    await asyncio.wait_for(
                        self.conn.send(_proto.AuthRequest(type=0, scheme=scheme, auth=credential)), self.timeout)
            except _SessionRejected:
                _retire(self.conn)
                log.warning("ZooKeeper session 0x%x has expired", previous or 0)
                self.session_id, self.password = None, b"\x00"
                self.view.expiries += 1
                if self.state != _States.LOST:
                    self.state.transition_to(_States.LOST)
                self._emit(SessionEvent("expired", previous, None))
                continue
            except (asyncio.TimeoutError, ConnectionError, OSError, _zexc.ZKError, _ServerError) as error:
                # A server behind our last zxid closes the connection here (CLIENT_ZXID_AHEAD), as
                # does one not serving yet. The zxid is kept: another server, or this one once it
                # has caught up, will take us.
                log.info("cannot (re)establish the session on %s:%s (our last zxid 0x%x; a server "
                         "behind it refuses us): %r", self.conn.host, self.conn.port, self.last_zxid, error)
                self.refused_at[(self.conn.host, self.conn.port)] = time.monotonic()
                self.view.handshake_failures += 1
                _retire(self.conn)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 0.5)
                continue
            backoff = 0.02
            self.refused_at.pop((self.conn.host, self.conn.port), None)
            new_session = self.session_id != previous
            if new_session:
                self.generation += 1
            self.state.transition_to(_States.CONNECTED)
            self.set_heartbeat()
            self.view.connected(self.conn.host, self.conn.port, time.monotonic(), self.session_id)
            if new_session:
                log.info("ZooKeeper session 0x%x established (timeout %.1fs)", self.session_id, self.timeout)
                old, self.last_session_id = self.last_session_id, self.session_id
                self._emit(SessionEvent("established", old, self.session_id))
            if self.connected_hook is not None:
                self.connected_hook(new_session)

    def _emit(self, event: SessionEvent) -> None:
        if self.listener is not None:
            self.listener(event)

    async def set_existing_watches(self):
        """Not used: ZkSession re-reads every watched path after a (re)connect instead."""

    def event_dispatch(self, event):
        if event.type:
            callbacks = self.watch_callbacks.get((event.type, event.path))
            if callbacks:
                loop = asyncio.get_running_loop()
                for callback in list(callbacks):
                    loop.call_soon(callback, event.path)
            return
        if event.state in (_proto.WatchEvent.DISCONNECTED, _proto.WatchEvent.SESSION_EXPIRED,
                           _proto.WatchEvent.AUTH_FAILED):
            log.warning("ZooKeeper state event %s", event.state)
            self._lose(self.conn)

    # -- heartbeat: Java's rule, the connection is dead after 2/3 of the timeout in silence --

    def set_heartbeat(self, delay: float | None = None):
        if self.heartbeat_handle:
            self.heartbeat_handle.cancel()
        if self.closing or self.closed:
            return
        loop = asyncio.get_running_loop()
        self.heartbeat_handle = loop.call_later(self.timeout / 6 if delay is None else delay,
                                                self.create_heartbeat)

    async def heartbeat(self):
        if self.closing or self.closed or self.state != _States.CONNECTED:
            return
        conn = self.conn
        limit = self.timeout * 2 / 3
        if time.monotonic() - conn.last_rx > limit:
            # Our own loop may have been starved (a busy process, a loaded machine) with the
            # answers sitting in the socket: ping, let the read loop run, then judge.
            conn.send(_proto.PingRequest()).add_done_callback(_consume)
            await asyncio.sleep(min(1.0, self.timeout / 6))
            silence = time.monotonic() - conn.last_rx
            if conn is self.conn and not conn.closing and silence > limit:
                log.warning("no answer from %s:%s for %.1fs: reconnecting", conn.host, conn.port, silence)
                self._lose(conn)
                return
        elif time.monotonic() - conn.last_rx > self.timeout / 3 * 0.9:
            conn.send(_proto.PingRequest()).add_done_callback(_consume)
        self.set_heartbeat()

    # -- requests --------------------------------------------------------------------------

    async def ensure_safe_state(self, writing=False):
        while self.state != _States.CONNECTED:
            if self.closing or self.closed:
                raise SessionClosed()
            await self.state.wait_for(_States.CONNECTED)

    def _next_xid(self) -> int:
        self.xid = self.xid + 1 if self.xid < 0x7FFFFFFF else 1
        return self.xid

    def _check_generation(self, generation: int | None) -> None:
        if generation is not None and generation != self.generation:
            raise SessionExpired(detail="the session this request belonged to is gone")

    async def send(self, request, generation: int | None = None, retry_in_flight: bool = True):
        """Send one request. Waits while disconnected; re-sends after a reconnect unless
        `retry_in_flight` is False and it was already on the wire (then ConnectionLost)."""
        while True:
            if self.state != _States.CONNECTED:
                await self.ensure_safe_state()
            self._check_generation(generation)
            conn = self.conn
            if conn.closing:
                await asyncio.sleep(0.005)
                continue
            try:
                zxid, response = await conn.send(request, xid=self._next_xid())
            except _zexc.ConnectError:
                self._lose(conn)
                if not retry_in_flight:
                    raise ConnectionLost(getattr(request, "path", None),
                                         "connection lost with the request in flight: outcome unknown") from None
                continue
            return response

    async def send_many(self, requests: Sequence[_Request], generation: int | None,
                        window: int = READ_WINDOW) -> list:
        """Pipeline idempotent requests (reads): results in order, a _ServerError per failed
        request; whatever a dropped connection swallowed is re-sent after the reconnect."""
        results: list = [None] * len(requests)
        todo = list(range(len(requests)))
        while todo:
            if self.state != _States.CONNECTED:
                await self.ensure_safe_state()
            self._check_generation(generation)
            conn = self.conn
            retry: list[int] = []
            inflight: collections.deque = collections.deque()

            async def collect() -> None:
                index, future = inflight.popleft()
                try:
                    _, response = await future
                except _ServerError as error:
                    results[index] = error
                except _zexc.ConnectError:
                    retry.append(index)
                else:
                    results[index] = response

            for index in todo:
                if len(inflight) >= window:
                    await collect()
                inflight.append((index, conn.send(requests[index], xid=self._next_xid())))
            while inflight:
                await collect()
            if retry:
                self._lose(conn)
            todo = sorted(retry)
        return results

    # -- closing ---------------------------------------------------------------------------

    async def close(self):
        if self.closed:
            return
        self.closing = True
        if self.repair_loop_task is not None:
            self.repair_loop_task.cancel()
        conn = self.conn
        if self.state == _States.CONNECTED and conn is not None and not conn.closing:
            future = conn.send(_Request(_CLOSE_OPCODE, b"", True, None), xid=self._next_xid())
            try:
                await asyncio.wait_for(future, min(self.timeout, 2.0))
            except Exception:  # the server may be gone: nothing to do about it
                pass
        _retire(conn)
        if self.heartbeat_handle is not None:
            self.heartbeat_handle.cancel()
            self.heartbeat_handle = None
        self.closed = True
        if self.state != _States.LOST:
            self.state.transition_to(_States.LOST)
        for futures in self.state.futures.values():
            for future in futures:
                if not future.done():
                    future.set_exception(SessionClosed())
            futures.clear()
