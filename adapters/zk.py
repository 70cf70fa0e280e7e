"""ZooKeeper for kctl: the only module that imports aiozk.

The rest of the code base sees `ZkSession`, plain values (`Stat`, bytes, lists of names) and the
exceptions defined here; it never sees aiozk objects, so the client can be patched or replaced
in this one file.

What aiozk 0.32.0 does that we design around (each one is shown by a test in
tests/adapters/test_zk.py, against the raw client):

1. No session-state listener. On expiry it silently opens a new session and does not recreate
   ephemeral nodes. `_Session` below runs its own repair loop, counts sessions (`generation`)
   and reports `expired` / `established` events; every request is bound to the session it
   started in and fails with `SessionExpired` instead of silently running in a new one.
2. When the server closes a connection cleanly (EOF), aiozk's read loop returns without telling
   anybody, so in-flight requests hang until the heartbeat times out (about the session timeout).
   `_Connection` reports EOF at once; the session fails the in-flight requests (reads are
   re-sent after the reconnect, writes raise `ConnectionLost`) and reconnects with a short
   backoff instead of aiozk's 2, 4, 8... s.
3. A failed transaction comes back as an empty result. We encode multi-ops ourselves and read
   the per-operation error codes, which name the first failing operation; `multi()` then
   re-reads the targets to report every problem, and tells a fenced controller apart.
4. "host:port/chroot" is not parsed (the port becomes "2181/chroot"): `parse_connect_string`
   splits it and the chroot is applied here, on every path we send and receive.

Also: aiozk has no `addAuth`; we send the digest AuthRequest on every new connection (ZooKeeper
keeps auth per connection, not per session), before any other request.

Watches are level-triggered (`Watch`): every firing re-reads the path with a new watch set by
that read and hands the current value to the callback. ZooKeeper keeps watches per connection,
so after any reconnect, same session or new, every watched path is simply re-read (aiozk's
SetWatches replay is switched off): a change made while we were away shows up in that read.

Speed, measured by benchmarks/zk_throughput.py: aiozk encodes and decodes through generic `Part`
objects, writes one socket send per request and reads each frame with two awaits. Here the hot
requests are encoded and decoded with precompiled structs, everything queued in one loop
iteration goes out in one write, the read loop dispatches every frame of a socket read, and
`get_many()` batches its reads into multiRead requests (ZooKeeper 3.6+), because the server
spends ~60 us of CPU per request and that, not Python, limited one-request-per-read.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import random
import re
import struct
import time
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from aiozk import exc as _zexc
from aiozk import protocol as _proto
from aiozk.connection import Connection as _AiozkConnection
from aiozk.session import Session as _AiozkSession
from aiozk.states import States as _States

log = logging.getLogger(__name__)

DEFAULT_PORT = 2181
CONTROLLER_EPOCH_PATH = "/controller_epoch"
DEFAULT_CHUNK_OPS = 200  # partition-state writes per multi-op; see benchmarks/zk_throughput.py
MAX_CHUNK_BYTES = 512 * 1024  # half of ZooKeeper's default request limit (jute.maxbuffer, 1 MiB)
READ_WINDOW = 4096  # pipelined reads in flight
MULTI_READ_OPS = 500  # reads per multiRead request in get_many; see benchmarks/zk_throughput.py
MAX_WRITE_ROUNDS = 20

# --------------------------------------------------------------------------------------------
# Errors


class ZkError(Exception):
    """Base of every error raised by this module."""

    def __init__(self, path: str | None = None, detail: str = ""):
        self.path = path
        self.detail = detail
        super().__init__(" ".join(part for part in (type(self).__name__, path or "", detail) if part))


class NoNode(ZkError):
    """The znode (or, for a create, its parent) does not exist."""


class NodeExists(ZkError):
    pass


class BadVersion(ZkError):
    """The znode's version is not the expected one."""


class NotEmpty(ZkError):
    pass


class NoAuth(ZkError):
    """The znode's ACL does not allow this session to do that."""


class ConnectionLost(ZkError):
    """The connection dropped while a write was in flight: it may or may not have been applied.
    Also raised when no server could be reached within the connect timeout."""


class SessionExpired(ZkError):
    """The session this call started in is gone (expired, or replaced by a new one)."""


class SessionClosed(ZkError):
    """`close()` was called on this ZkSession."""


class Fenced(ZkError):
    """The `/controller_epoch` version check failed: another controller took over.

    `applied` maps the paths written before the fence was noticed to their new versions
    (chunks of a batch that had already committed)."""

    def __init__(self, expected_version: int, current_version: int | None, applied: dict | None = None):
        self.expected_version = expected_version
        self.current_version = current_version
        self.applied = dict(applied or {})
        super().__init__(CONTROLLER_EPOCH_PATH,
                         f"expected version {expected_version}, found {current_version}")


class Problem(NamedTuple):
    """Why one operation of a failed multi-op could not apply. `stat` is the target's current
    stat (None when missing)."""

    reason: str
    stat: "Stat | None"


class TransactionFailed(ZkError):
    """A multi-op failed and nothing was applied.

    `first_failure` is (index, error) for the operation the server rejected; `problems` maps the
    index of every operation found to be in the way (by re-reading the targets) to a `Problem`."""

    def __init__(self, first_failure: tuple[int, ZkError], problems: dict[int, Problem]):
        self.first_failure = first_failure
        self.problems = problems
        index, error = first_failure
        super().__init__(error.path, f"operation {index} failed ({type(error).__name__}); problems: "
                         + ", ".join(f"{i}: {p.reason}" for i, p in sorted(problems.items())))


class _ServerError(Exception):
    """An error code in a reply header, before we know which path it concerns."""

    def __init__(self, code: int):
        self.code = code
        super().__init__(code)


_NONODE, _NODEEXISTS, _BADVERSION, _NOTEMPTY, _NOAUTH = -101, -110, -103, -111, -102
_ERROR_TYPES = {
    _NONODE: NoNode,
    _NODEEXISTS: NodeExists,
    _BADVERSION: BadVersion,
    _NOTEMPTY: NotEmpty,
    _NOAUTH: NoAuth,
    -112: SessionExpired,  # SESSIONEXPIRED
    -4: ConnectionLost,  # CONNECTIONLOSS
}


def _error(code: int, path: str | None) -> ZkError:
    kind = _ERROR_TYPES.get(code)
    if kind is not None:
        return kind(path)
    return ZkError(path, f"ZooKeeper error code {code}")


# --------------------------------------------------------------------------------------------
# Values


class Stat(NamedTuple):
    """A znode's stat, field for field as on the wire (ZooKeeper's names)."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int


class Create(NamedTuple):
    path: str
    data: bytes | None = b""
    ephemeral: bool = False
    sequential: bool = False


class SetData(NamedTuple):
    path: str
    data: bytes
    version: int = -1


class Delete(NamedTuple):
    path: str
    version: int = -1


class Check(NamedTuple):
    path: str
    version: int


Op = Create | SetData | Delete | Check


class SessionEvent(NamedTuple):
    """`expired`: the server declared `old_session_id` dead (ephemerals gone, watches gone).
    `established`: `new_session_id` replaced `old_session_id` (None for the first session)."""

    kind: str
    old_session_id: int | None
    new_session_id: int | None


# --------------------------------------------------------------------------------------------
# Connect strings


_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[^:\[\]/,]+)(?::(\d+))?$")


def parse_connect_string(connect_string: str) -> tuple[str, str | None]:
    """Split "h:p[,h:p...][/chroot]" into ("h:p,...", "/chroot" or None)."""
    text = connect_string.strip()
    hosts, slash, rest = text.partition("/")
    entries = [entry.strip() for entry in hosts.split(",")]
    if not hosts or not all(entries):
        raise ValueError(f"invalid ZooKeeper connect string {connect_string!r}: no host")
    for entry in entries:
        match = _HOST_PORT.match(entry)
        if not match or (match.group(2) is not None and not 0 < int(match.group(2)) < 65536):
            raise ValueError(f"invalid ZooKeeper connect string {connect_string!r}: bad host {entry!r}")
    chroot = None
    if slash:
        rest = rest.rstrip("/")
        if rest:
            segments = rest.split("/")
            if any(seg in ("", ".", "..") for seg in segments):
                raise ValueError(f"invalid chroot in ZooKeeper connect string {connect_string!r}")
            chroot = "/" + rest
    return ",".join(entries), chroot


def _host_ports(hosts: str) -> list[tuple[str, int]]:
    out = []
    for entry in hosts.split(","):
        match = _HOST_PORT.match(entry.strip())
        host = match.group(1).strip("[]")
        out.append((host, int(match.group(2) or DEFAULT_PORT)))
    return out


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _join(parent: str, child: str) -> str:
    return f"/{child}" if parent == "/" else f"{parent}/{child}"


# --------------------------------------------------------------------------------------------
# Wire codec for the requests we send in bulk (aiozk's generic Part machinery is slow)

_INT = struct.Struct("!i")
_REQ_HEADER = struct.Struct("!ii")  # xid, opcode
_REPLY_HEADER = struct.Struct("!iqi")  # xid, zxid, err
_MULTI_HEADER = struct.Struct("!i?i")  # type, done, err
_STAT = struct.Struct("!qqqqiiiqiiq")

_CREATE, _DELETE, _EXISTS, _GET_DATA, _SET_DATA, _GET_CHILDREN2, _CHECK, _MULTI, _CREATE2 = (
    1, 2, 3, 4, 5, 12, 13, 14, 15)
_MULTI_READ = 22  # ZooKeeper 3.6+: many getData in one request, each with its own result
_EPHEMERAL, _SEQUENTIAL = 1, 2
_WATCH_XID = -1
_CLOSE_OPCODE = -11

_PERM_READ, _PERM_ALL = 1, 31


def _ustr(text: str) -> bytes:
    raw = text.encode()
    return _INT.pack(len(raw)) + raw


def _buffer(data: bytes | None) -> bytes:
    if data is None:
        return _INT.pack(-1)
    if isinstance(data, str):
        data = data.encode()
    return _INT.pack(len(data)) + data


def _acl_vector(entries: Sequence[tuple[int, str, str]]) -> bytes:
    return _INT.pack(len(entries)) + b"".join(
        _INT.pack(perms) + _ustr(scheme) + _ustr(ident) for perms, scheme, ident in entries)


ACL_OPEN = ((_PERM_ALL, "world", "anyone"),)
# Kafka with zookeeper.set.acl=true: CREATOR_ALL_ACL ++ READ_ACL_UNSAFE
ACL_CREATOR_ALL_WORLD_READ = ((_PERM_ALL, "auth", ""), (_PERM_READ, "world", "anyone"))


class _Request:
    """A pre-encoded request, shaped the way aiozk's Connection.send expects."""

    __slots__ = ("opcode", "body", "writes_data", "path")
    special_xid = None

    def __init__(self, opcode: int, body: bytes, writes_data: bool, path: str | None):
        self.opcode = opcode
        self.body = body
        self.writes_data = writes_data
        self.path = path

    def serialize(self, xid: int) -> bytes:
        return _REQ_HEADER.pack(xid, self.opcode) + self.body

    def __str__(self) -> str:
        return f"op{self.opcode}({self.path})"


def _op_body(opcode: int, op: Op, full_path: str, acl: bytes) -> bytes:
    if opcode == _CREATE2:
        flags = (_EPHEMERAL if op.ephemeral else 0) | (_SEQUENTIAL if op.sequential else 0)
        return _ustr(full_path) + _buffer(op.data) + acl + _INT.pack(flags)
    if opcode == _SET_DATA:
        return _ustr(full_path) + _buffer(op.data) + _INT.pack(op.version)
    return _ustr(full_path) + _INT.pack(op.version)  # delete, check


_OPCODES = {Create: _CREATE2, SetData: _SET_DATA, Delete: _DELETE, Check: _CHECK}


def _parse_stat(buf: bytes, offset: int) -> Stat:
    return Stat._make(_STAT.unpack_from(buf, offset))


def _parse_string(buf: bytes, offset: int) -> tuple[str | None, int]:
    (size,) = _INT.unpack_from(buf, offset)
    offset += 4
    if size < 0:
        return None, offset
    return str(buf[offset:offset + size], "utf-8"), offset + size


def _parse_get_data(buf: bytes, offset: int):
    (size,) = _INT.unpack_from(buf, offset)
    offset += 4
    if size < 0:
        return b"", _parse_stat(buf, offset)
    return bytes(buf[offset:offset + size]), _parse_stat(buf, offset + size)


def _parse_children2(buf: bytes, offset: int):
    (count,) = _INT.unpack_from(buf, offset)
    offset += 4
    names = []
    for _ in range(max(count, 0)):
        name, offset = _parse_string(buf, offset)
        names.append(name)
    return names, _parse_stat(buf, offset)


def _parse_create2(buf: bytes, offset: int):
    path, offset = _parse_string(buf, offset)
    return path, _parse_stat(buf, offset)


class _OpError(NamedTuple):
    code: int  # 0: rolled back (was fine), -2: not executed (after the failing one)


def _parse_multi(buf: bytes, offset: int) -> list:
    results = []
    while True:
        kind, done, err = _MULTI_HEADER.unpack_from(buf, offset)
        offset += _MULTI_HEADER.size
        if done:
            return results
        if kind == -1:
            (code,) = _INT.unpack_from(buf, offset)
            offset += 4
            results.append(_OpError(code))
        elif kind == _CREATE2:
            path, offset = _parse_string(buf, offset)
            results.append((path, _parse_stat(buf, offset)))
            offset += _STAT.size
        elif kind == _CREATE:
            path, offset = _parse_string(buf, offset)
            results.append((path, None))
        elif kind == _SET_DATA:
            results.append(_parse_stat(buf, offset))
            offset += _STAT.size
        elif kind == _GET_DATA:  # in a multiRead
            (size,) = _INT.unpack_from(buf, offset)
            offset += 4
            data = bytes(buf[offset:offset + size]) if size > 0 else b""
            offset += max(size, 0)
            results.append((data, _parse_stat(buf, offset)))
            offset += _STAT.size
        else:  # delete, check: no body
            results.append(None)


def _parse_empty(buf: bytes, offset: int):
    return None


_PARSERS = {
    _EXISTS: _parse_stat,
    _GET_DATA: _parse_get_data,
    _SET_DATA: _parse_stat,
    _GET_CHILDREN2: _parse_children2,
    _CREATE2: _parse_create2,
    _DELETE: _parse_empty,
    _CHECK: _parse_empty,
    _MULTI: _parse_multi,
    _MULTI_READ: _parse_multi,
}


def _consume(future: asyncio.Future) -> None:
    """Done-callback for futures nobody awaits: mark their exception as retrieved."""
    if not future.cancelled():
        future.exception()


# --------------------------------------------------------------------------------------------
# aiozk patches: connection and session


class _Connection(_AiozkConnection):
    """aiozk's connection, reporting EOF at once and reading whole frames without wait_for."""

    def __init__(self, host, port, watch_handler, on_lost=None):
        super().__init__(host, port, watch_handler=watch_handler, read_timeout=None)
        self._on_lost = on_lost
        self.last_rx = time.monotonic()
        self._outbox: list[bytes] = []
        self._flush_scheduled = False

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
        body = start + _REPLY_HEADER.size
        if xid == _WATCH_XID:
            self.watch_handler(_proto.WatchEvent.deserialize(bytes(buf[body:end])))
            return
        opcode = self.opcode_xref.pop(xid, None)
        if err:
            response = _ServerError(err)
        else:
            parser = _PARSERS.get(opcode)
            if parser is not None:
                response = parser(buf, body)
            else:
                response_class = _proto.response_xref.get(opcode)
                response = response_class.deserialize(bytes(buf[body:end])) if response_class else None
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
        if xid == _WATCH_XID:
            return xid, zxid, _proto.WatchEvent.deserialize(frame[_REPLY_HEADER.size:])
        opcode = self.opcode_xref.pop(xid, None)
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

    # -- connections -----------------------------------------------------------------------

    async def make_connection(self, host, port):
        conn = _Connection(host, port, watch_handler=self.event_dispatch, on_lost=self._connection_lost)
        try:
            await asyncio.wait_for(conn.connect(), max(self.timeout, 1.0))
        except Exception as error:  # refused, timed out, server not serving yet
            log.debug("cannot connect to %s:%s: %r", host, port, error)
            if conn.writer is not None:
                conn.writer.close()
            return None
        return conn

    async def find_server(self, allow_read_only):
        delay = 0.02
        while True:
            for host, port in random.sample(self.hosts, len(self.hosts)):
                conn = await self.make_connection(host, port)
                if conn is None:
                    continue
                if conn.start_read_only and not allow_read_only:
                    conn.writer.close()
                    continue
                self.conn = conn
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _connection_lost(self, conn: _Connection) -> None:
        log.info("connection to %s:%s closed by the server", conn.host, conn.port)
        self._lose(conn)

    def _lose(self, conn: _Connection | None) -> None:
        _retire(conn)
        if conn is self.conn and not self.closing and self.state in (_States.CONNECTED, _States.READ_ONLY):
            self.state.transition_to(_States.SUSPENDED)

    # -- establishing sessions -------------------------------------------------------------

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
            _retire(self.conn)
            await self.find_server(allow_read_only=False)
            previous = self.session_id
            try:
                await asyncio.wait_for(self.establish_session(), self.timeout)
                self.conn.start_read_loop()
                if self.auth is not None:
                    scheme, credential = self.auth
                    await asyncio.wait_for(
                        self.conn.send(_proto.AuthRequest(type=0, scheme=scheme, auth=credential)), self.timeout)
            except _SessionRejected:
                _retire(self.conn)
                log.warning("ZooKeeper session 0x%x has expired", previous or 0)
                self.session_id, self.password = None, b"\x00"
                if self.state != _States.LOST:
                    self.state.transition_to(_States.LOST)
                self._emit(SessionEvent("expired", previous, None))
                continue
            except (asyncio.TimeoutError, ConnectionError, OSError, _zexc.ZKError, _ServerError) as error:
                log.info("cannot (re)establish the session on %s:%s: %r", self.conn.host, self.conn.port, error)
                _retire(self.conn)
                self.last_zxid = 0  # a server with a fresh database refuses clients that saw later zxids
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 0.5)
                continue
            backoff = 0.02
            new_session = self.session_id != previous
            if new_session:
                self.generation += 1
            self.state.transition_to(_States.CONNECTED)
            self.set_heartbeat()
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
            if zxid and zxid > (self.last_zxid or 0):
                self.last_zxid = zxid
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
            max_zxid = 0

            async def collect() -> None:
                nonlocal max_zxid
                index, future = inflight.popleft()
                try:
                    zxid, response = await future
                except _ServerError as error:
                    results[index] = error
                except _zexc.ConnectError:
                    retry.append(index)
                else:
                    results[index] = response
                    if zxid and zxid > max_zxid:
                        max_zxid = zxid

            for index in todo:
                if len(inflight) >= window:
                    await collect()
                inflight.append((index, conn.send(requests[index], xid=self._next_xid())))
            while inflight:
                await collect()
            if max_zxid > (self.last_zxid or 0):
                self.last_zxid = max_zxid
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


# --------------------------------------------------------------------------------------------
# Watches


class Watch:
    """A level-triggered watch: each time ZooKeeper fires (or the session reconnects), the path
    is re-read with a new watch set by that same read, and `callback(current value)` is called.
    A change during a read either shows in the read or fires the new watch: never lost.

    Callbacks run on the event loop and must not block (enqueue and return)."""

    _DATA_EVENTS = (_proto.WatchEvent.CREATED, _proto.WatchEvent.DELETED, _proto.WatchEvent.DATA_CHANGED)
    _CHILD_EVENTS = (_proto.WatchEvent.CREATED, _proto.WatchEvent.DELETED, _proto.WatchEvent.CHILDREN_CHANGED)

    def __init__(self, zk: "ZkSession", path: str, kind: str, callback: Callable[[Any], None]):
        self.path = path
        self.kind = kind
        self._zk = zk
        self._full_path = zk._abs(path)
        self._callback = callback
        self._events = self._DATA_EVENTS if kind == "data" else self._CHILD_EVENTS
        self._dirty = True
        self._wakeup: asyncio.Future | None = None
        self._first: asyncio.Future = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task | None = None
        self.cancelled = False
        self.deliveries = 0

    async def _start(self) -> "Watch":
        for event_type in self._events:
            self._zk._session.add_watch_callback(event_type, self._full_path, self._trigger)
        self._task = asyncio.create_task(self._run(), name=f"zk-watch-{self.kind}:{self.path}")
        await asyncio.shield(self._first)
        return self

    def _trigger(self, _path: str | None = None) -> None:
        self._dirty = True
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.cancelled:
            while not self._dirty:
                self._wakeup = loop.create_future()
                await self._wakeup
            self._dirty = False
            try:
                value = await (self._read_data() if self.kind == "data" else self._read_children())
            except (SessionClosed, asyncio.CancelledError):
                return
            except (ConnectionLost, SessionExpired):
                self._dirty = True
                continue
            except ZkError as error:
                log.warning("watch on %s: %r; retrying in 1s", self.path, error)
                self._dirty = True
                await asyncio.sleep(1.0)
                continue
            if self.cancelled:
                return
            self.deliveries += 1
            try:
                self._callback(value)
            except Exception:
                log.exception("watch callback for %s failed", self.path)
            if not self._first.done():
                self._first.set_result(None)

    async def _read_data(self):
        zk = self._zk
        while True:
            try:
                return await zk._read(_GET_DATA, self.path, watch=True)
            except NoNode:
                pass
            try:
                await zk._read(_EXISTS, self.path, watch=True)
            except NoNode:
                return None  # the exists watch fires on creation

    async def _read_children(self):
        zk = self._zk
        while True:
            try:
                names, _ = await zk._read(_GET_CHILDREN2, self.path, watch=True)
                return sorted(names)
            except NoNode:
                pass
            try:
                await zk._read(_EXISTS, self.path, watch=True)
            except NoNode:
                return None

    def cancel(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        for event_type in self._events:
            callbacks = self._zk._session.watch_callbacks.get((event_type, self._full_path))
            if callbacks and self._trigger in callbacks:
                self._zk._session.remove_watch_callback(event_type, self._full_path, self._trigger)
        self._zk._watches.discard(self)
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if not self._first.done():
            self._first.cancel()


class Subscription:
    """Returned by `on_session_change`; `cancel()` stops the callbacks."""

    def __init__(self, registry: list, callback):
        self._registry = registry
        self.callback = callback

    def cancel(self) -> None:
        if self in self._registry:
            self._registry.remove(self)


# --------------------------------------------------------------------------------------------
# The session


class ZkSession:
    """One ZooKeeper session with Kafka-like semantics; paths are relative to the chroot.

    Every call is bound to the session it started in: if that session expires before the call
    completes, it raises SessionExpired. Reads survive reconnects of the same session; a write
    on the wire when the connection drops raises ConnectionLost (outcome unknown)."""

    def __init__(self, session: _Session, chroot: str | None, acl: Sequence[tuple[int, str, str]],
                 connect_string: str):
        self._session = session
        self._chroot = chroot or ""
        self.acl = tuple(acl)
        self._acl_bytes = _acl_vector(self.acl)
        self.connect_string = connect_string
        self._watches: set[Watch] = set()
        self._listeners: list[Subscription] = []
        self._waiters: list[tuple[int | None, asyncio.Future]] = []
        self.events: list[SessionEvent] = []
        session.listener = self._on_session_event
        session.connected_hook = self._on_connected

    # -- connecting ------------------------------------------------------------------------

    @classmethod
    async def connect(cls, connect_string: str, session_timeout_ms: int = 6000,
                      auth: tuple[str, str] | None = None, acl_mode: bool = False,
                      timeout: float = 30.0) -> "ZkSession":
        """Connect; create the chroot (through a chroot-less session) if it is missing.

        `auth=("digest", "user:password")` authenticates every connection of the session;
        with `acl_mode=True` every node this session creates gets Kafka's secure ACL: all rights
        for the creator (the digest principal) and read for the world."""
        hosts, chroot = parse_connect_string(connect_string)
        auth_pair = None
        if auth is not None:
            scheme, credential = auth
            auth_pair = (scheme, credential.encode() if isinstance(credential, str) else credential)
        if acl_mode and auth_pair is None:
            raise ValueError("acl_mode needs auth=('digest', 'user:password'): the creator ACL names it")
        acl = ACL_CREATOR_ALL_WORLD_READ if acl_mode else ACL_OPEN
        timeout_s = session_timeout_ms / 1000
        if chroot:
            bootstrap = cls(_Session(hosts, timeout_s, auth_pair), None, acl, hosts)
            await bootstrap._start(timeout)
            try:
                await bootstrap.ensure_path(chroot)
            finally:
                await bootstrap.close()
        zk = cls(_Session(hosts, timeout_s, auth_pair), chroot, acl, connect_string)
        await zk._start(timeout)
        return zk

    async def _start(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._session.start(), timeout)
        except asyncio.TimeoutError:
            await self._session.close()
            raise ConnectionLost(detail=f"no ZooKeeper answered at {self.connect_string} within {timeout:.0f}s") from None

    async def close(self) -> None:
        for watch in list(self._watches):
            watch.cancel()
        await self._session.close()

    async def __aenter__(self) -> "ZkSession":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # -- identity and session events -------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        return self._session.session_id

    @property
    def password(self) -> bytes:
        return self._session.password

    @property
    def generation(self) -> int:
        """How many sessions this object has had: it changes exactly when the session does."""
        return self._session.generation

    @property
    def session_timeout_ms(self) -> int:
        """The timeout the server granted."""
        return int(self._session.timeout * 1000)

    @property
    def connected(self) -> bool:
        return self._session.state == _States.CONNECTED

    @property
    def chroot(self) -> str | None:
        return self._chroot or None

    def on_session_change(self, callback: Callable[[SessionEvent], None]) -> Subscription:
        """Call `callback(SessionEvent)` (soon, on the loop) when the session expires and when a
        new one replaces it. The callback must only enqueue."""
        subscription = Subscription(self._listeners, callback)
        self._listeners.append(subscription)
        return subscription

    async def wait_session_change(self, session_id: int | None = None) -> SessionEvent:
        """Wait until `session_id` (default: the current session) is no longer this object's
        live session; returns the event that said so."""
        session_id = self.session_id if session_id is None else session_id
        for event in self.events:
            if event.old_session_id == session_id:
                return event
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((session_id, future))
        try:
            return await future
        finally:
            self._waiters = [(sid, f) for sid, f in self._waiters if f is not future]

    def _on_session_event(self, event: SessionEvent) -> None:
        if event.kind == "established" and event.old_session_id is None:
            return  # the first session is not a change
        self.events.append(event)
        del self.events[:-100]
        loop = asyncio.get_running_loop()
        for subscription in list(self._listeners):
            loop.call_soon(subscription.callback, event)
        for session_id, future in self._waiters:
            if not future.done() and event.old_session_id == session_id:
                future.set_result(event)

    def _on_connected(self, new_session: bool) -> None:
        # Watches are per connection on the server: after any reconnect, re-read (and so re-arm)
        # every watched path. Level-triggered consumers see the current value again.
        for watch in list(self._watches):
            watch._trigger()

    # -- paths -----------------------------------------------------------------------------

    def _abs(self, path: str) -> str:
        if not path.startswith("/") or (len(path) > 1 and path.endswith("/")) or "//" in path:
            raise ValueError(f"invalid znode path {path!r}")
        if not self._chroot:
            return path
        return self._chroot if path == "/" else self._chroot + path

    def _rel(self, full_path: str) -> str:
        if self._chroot and full_path.startswith(self._chroot):
            return full_path[len(self._chroot):] or "/"
        return full_path

    # -- single operations -----------------------------------------------------------------

    async def _call(self, request: _Request, path: str | None, write: bool, bound: bool = True):
        session = self._session
        try:
            return await session.send(request, session.generation if bound else None,
                                      retry_in_flight=not write)
        except _ServerError as error:
            raise _error(error.code, path) from None

    async def _write(self, op: Op):
        """Send one create/set/delete. If the connection drops with it in flight, wait for the
        reconnect, read the target back and decide: it landed (return as if answered), it did
        not (send it again), or someone else's write is in the way (BadVersion / NodeExists).
        Only a sequential create stays undecidable: ConnectionLost."""
        opcode = _OPCODES[type(op)]
        request = _Request(opcode, _op_body(opcode, op, self._abs(op.path), self._acl_bytes), True, op.path)
        session = self._session
        generation = session.generation
        while True:
            try:
                return await session.send(request, generation, retry_in_flight=False)
            except _ServerError as error:
                raise _error(error.code, op.path) from None
            except ConnectionLost:
                if isinstance(op, Create) and op.sequential:
                    raise
                log.info("answer to a write on %s lost with the connection: reading it back", op.path)
            try:
                data, stat = await self._read(_GET_DATA, op.path, bound=True)
            except NoNode:
                data = stat = None
            if isinstance(op, SetData):
                if stat is None:
                    raise NoNode(op.path)
                if data == (op.data or b"") and (op.version == -1 or stat.version == op.version + 1):
                    return stat  # it landed
                if op.version not in (-1, stat.version):
                    raise BadVersion(op.path)
            elif isinstance(op, Create):
                if stat is not None:
                    mine = not op.ephemeral or stat.ephemeral_owner == session.session_id
                    if mine and data == (op.data or b"") and stat.version == 0:
                        return self._abs(op.path), stat  # it landed
                    raise NodeExists(op.path)
            elif isinstance(op, Delete):
                if stat is None:
                    return None  # gone: ours or someone else's delete, the same end state
                if op.version not in (-1, stat.version):
                    raise BadVersion(op.path)
            # it did not land: send it again

    async def _read(self, opcode: int, path: str, watch: bool = False, bound: bool = False):
        body = _ustr(self._abs(path)) + (b"\x01" if watch else b"\x00")
        return await self._call(_Request(opcode, body, False, path), path, write=False, bound=bound)

    async def get(self, path: str, watch: bool = False) -> tuple[bytes, Stat]:
        return await self._read(_GET_DATA, path, watch, bound=True)

    async def exists(self, path: str, watch: bool = False) -> Stat | None:
        try:
            return await self._read(_EXISTS, path, watch, bound=True)
        except NoNode:
            return None

    async def get_children(self, path: str, watch: bool = False) -> list[str]:
        names, _ = await self._read(_GET_CHILDREN2, path, watch, bound=True)
        return names

    async def create(self, path: str, data: bytes | None = b"", ephemeral: bool = False,
                     sequential: bool = False, make_parents: bool = False) -> str:
        """Create a znode; returns its path (with the sequence number for sequential ones)."""
        if make_parents and _parent(path) != "/" and await self.exists(_parent(path)) is None:
            await self.ensure_path(_parent(path))
        created, _ = await self._write(Create(path, data, ephemeral, sequential))
        return self._rel(created)

    async def ensure_path(self, path: str) -> None:
        """Create `path` and its missing ancestors (no data), tolerating concurrent creators."""
        parts = [seg for seg in path.split("/") if seg]
        current = ""
        for seg in parts:
            current += "/" + seg
            if await self.exists(current) is not None:
                continue
            try:
                await self.create(current, None)
            except NodeExists:
                pass

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        return await self._write(SetData(path, data, version))

    async def delete(self, path: str, version: int = -1) -> None:
        await self._write(Delete(path, version))

    async def delete_recursive(self, path: str) -> None:
        """Delete `path` and everything under it; a missing path is not an error."""
        for _ in range(10):
            try:
                children = await self.get_children(path)
            except NoNode:
                return
            await asyncio.gather(*(self.delete_recursive(_join(path, child)) for child in children
                                   if not (path == "/" and child == "zookeeper" and not self._chroot)))
            if path == "/" and not self._chroot:
                return
            try:
                await self.delete(path)
                return
            except NoNode:
                return
            except NotEmpty:
                continue  # a child appeared meanwhile
        raise NotEmpty(path, "children keep appearing")

    async def get_acl(self, path: str) -> list[tuple[int, str, str]]:
        """The znode's ACL as (perms, scheme, id) tuples."""
        session = self._session
        try:
            response = await session.send(_proto.GetACLRequest(path=self._abs(path)), session.generation)
        except _ServerError as error:
            raise _error(error.code, path) from None
        return [(entry.perms, entry.id.scheme, entry.id.id) for entry in response.acl]

    # -- pipelined reads -------------------------------------------------------------------

    async def get_many(self, paths: Iterable[str], window: int = READ_WINDOW) -> dict[str, tuple[bytes, Stat] | None]:
        """Read many znodes at once (all requests pipelined): {path: (data, stat) or None}."""
        return await self._read_many(_GET_DATA, list(paths), window)

    async def exists_many(self, paths: Iterable[str], window: int = READ_WINDOW) -> dict[str, Stat | None]:
        return await self._read_many(_EXISTS, list(paths), window)

    async def _read_many(self, opcode: int, paths: list[str], window: int,
                         batch: int = MULTI_READ_OPS) -> dict:
        session = self._session
        conn = session.conn
        if batch > 1 and conn is not None and (conn.version_info or (0,)) >= (3, 6, 0):
            return await self._multi_read(opcode, paths, window, batch)
        requests = [_Request(opcode, _ustr(self._abs(path)) + b"\x00", False, path) for path in paths]
        results = await session.send_many(requests, session.generation, window)
        out = {}
        for path, result in zip(paths, results):
            if isinstance(result, _ServerError):
                if result.code != _NONODE:
                    raise _error(result.code, path)
                result = None
            out[path] = result
        return out

    async def _multi_read(self, opcode: int, paths: list[str], window: int, batch: int) -> dict:
        """Reads batched into multiRead requests: the server answers one request per batch
        instead of one per znode, which is where its time went (~60 us of CPU per read)."""
        header = _MULTI_HEADER.pack(_GET_DATA, False, -1)
        footer = _MULTI_HEADER.pack(-1, True, -1)
        batches = [paths[i:i + batch] for i in range(0, len(paths), batch)]
        requests = [
            _Request(_MULTI_READ, b"".join([header + _ustr(self._abs(p)) + b"\x00" for p in part]) + footer,
                     False, part[0])
            for part in batches
        ]
        session = self._session
        results = await session.send_many(requests, session.generation, max(1, window // batch))
        out = {}
        for part, result in zip(batches, results):
            if isinstance(result, _ServerError):
                raise _error(result.code, part[0])
            for path, item in zip(part, result):
                if isinstance(item, _OpError):
                    if item.code != _NONODE:
                        raise _error(item.code, path)
                    item = None
                elif opcode == _EXISTS:
                    item = item[1]
                out[path] = item
        return out

    # -- multi-ops and fencing -------------------------------------------------------------

    def _multi_request(self, ops: Sequence[Op]) -> _Request:
        parts = []
        for op in ops:
            opcode = _OPCODES[type(op)]
            parts.append(_MULTI_HEADER.pack(opcode, False, -1))
            parts.append(_op_body(opcode, op, self._abs(op.path), self._acl_bytes))
        parts.append(_MULTI_HEADER.pack(-1, True, -1))
        return _Request(_MULTI, b"".join(parts), True, None)

    async def _fenced(self, expected: int, applied: dict | None = None) -> Fenced:
        try:
            current = (await self.exists(CONTROLLER_EPOCH_PATH))
        except ZkError:
            current = None
        return Fenced(expected, current.version if current is not None else None, applied)

    async def multi(self, ops: Sequence[Op], epoch_zk_version: int | None = None) -> list:
        """Apply `ops` atomically. With `epoch_zk_version`, the first operation checks that
        /controller_epoch still has that version (Kafka's fencing); if not, raises Fenced.

        Results, one per op: Create -> created path, SetData -> new Stat, Delete/Check -> None.
        On any other failure raises TransactionFailed (nothing was applied)."""
        ops = list(ops)
        if not ops:
            return []
        offset = 0 if epoch_zk_version is None else 1
        wire_ops = ops if epoch_zk_version is None else [Check(CONTROLLER_EPOCH_PATH, epoch_zk_version), *ops]
        results = await self._call(self._multi_request(wire_ops), None, write=True)
        failed = next(((i, r.code) for i, r in enumerate(results)
                       if isinstance(r, _OpError) and r.code not in (0, -2)), None)
        if failed is None:
            out = []
            for op, result in zip(ops, results[offset:]):
                if isinstance(op, Create):
                    out.append(self._rel(result[0]))
                elif isinstance(op, SetData):
                    out.append(result)
                else:
                    out.append(None)
            return out
        index, code = failed
        if index < offset:
            raise await self._fenced(epoch_zk_version)
        index -= offset
        problems = await self._diagnose(ops, index, code)
        raise TransactionFailed((index, _error(code, ops[index].path)), problems)

    async def _diagnose(self, ops: Sequence[Op], failed_index: int, code: int) -> dict[int, Problem]:
        """Re-read the targets of a failed multi-op and say which operations are in the way.

        The operations are replayed, in order, over a shadow of the current state (existence,
        version, number of children), each one applying its intended effect even when it
        fails, so that later operations are judged against what the multi meant to do."""
        targets = {op.path for op in ops} | {_parent(op.path) for op in ops}
        stats = await self.exists_many(sorted(targets))
        shadow = {path: None if stat is None else [stat.version, stat.num_children]
                  for path, stat in stats.items()}
        shadow["/"] = shadow.get("/") or [0, 0]

        def adopt_child(parent: str, delta: int) -> None:
            if shadow.get(parent) is not None:
                shadow[parent][1] += delta

        problems: dict[int, Problem] = {}
        for i, op in enumerate(ops):
            now = shadow.get(op.path)
            parent = _parent(op.path)
            reason = None
            if isinstance(op, Create):
                if shadow.get(parent) is None:
                    reason = "parent missing"
                elif now is not None and not op.sequential:
                    reason = "exists"
                if not op.sequential:
                    shadow[op.path] = [0, 0]
                adopt_child(parent, 1)
            elif now is None:
                reason = "missing"
                if isinstance(op, SetData):
                    shadow[op.path] = [max(op.version, 0) + 1, 0]
            elif op.version != -1 and now[0] != op.version:
                reason = f"version is {now[0]}, expected {op.version}"
            elif isinstance(op, Delete) and now[1]:
                reason = "not empty"
            if isinstance(op, SetData) and now is not None:
                now[0] = (op.version if op.version != -1 else now[0]) + 1
            elif isinstance(op, Delete):
                shadow[op.path] = None
                adopt_child(parent, -1)
            if i == failed_index:
                reason = _REASONS.get(code, f"error {code}") if reason is None else reason
            if reason:
                problems[i] = Problem(reason, stats.get(op.path))
        return problems

    # -- the hot path: partition states ----------------------------------------------------

    async def write_partition_states(
        self,
        epoch_zk_version: int | None,
        writes: Iterable[tuple[str, bytes, int]],
        chunk_ops: int = DEFAULT_CHUNK_OPS,
        max_chunk_bytes: int = MAX_CHUNK_BYTES,
        on_landed: Callable[[dict[str, int]], None] | None = None,
    ) -> tuple[dict[str, int], dict[str, tuple[bytes, int] | None]]:
        """Write many znodes conditionally, as epoch-checked multi-ops sent concurrently.

        `writes` are (path, data, expected_version); expected_version -1 means create (missing
        parents are created too, fenced the same way). Returns (versions, conflicts):
        `versions` maps every written path to its new version; `conflicts` maps each path whose
        version was not the expected one (or that exists, for a create) to its current
        (data, version), or None if it is missing. A chunk that failed because of a conflict is
        retried without the conflicting paths. Raises Fenced (with `applied`) if the
        /controller_epoch check fails. `epoch_zk_version=None` writes unfenced (tools, benchmarks).
        `on_landed(versions)`, if given, is told of each chunk of the first round as soon as it
        commits (the writer reports a large write's progress with it).
        """
        pending: dict[str, tuple[bytes, int]] = {}
        for path, data, expected in writes:
            if path in pending:
                raise ValueError(f"{path} written twice in one batch")
            pending[path] = (data, expected)
        versions: dict[str, int] = {}
        conflicts: dict[str, tuple[bytes, int] | None] = {}
        for _ in range(MAX_WRITE_ROUNDS):
            if not pending:
                return versions, conflicts
            creates = [path for path, (_, expected) in pending.items() if expected == -1]
            if creates:
                await self._ensure_parents_fenced(epoch_zk_version, creates, versions)
            chunks = list(_chunks(list(pending.items()), chunk_ops, max_chunk_bytes))
            if on_landed is not None:
                notify, on_landed = on_landed, None  # the first round only: retries are few

                async def write(chunk):
                    outcome = await self._write_chunk(epoch_zk_version, chunk)
                    if isinstance(outcome, dict):
                        notify(outcome)
                    return outcome
            else:
                write = functools.partial(self._write_chunk, epoch_zk_version)
            outcomes = await asyncio.gather(*(write(chunk) for chunk in chunks), return_exceptions=True)
            suspects: list[tuple[list, bool]] = []  # (chunk, outcome unknown)
            fenced = None
            for chunk, outcome in zip(chunks, outcomes):
                if isinstance(outcome, dict):
                    versions.update(outcome)
                elif isinstance(outcome, _Fence):
                    fenced = True
                elif isinstance(outcome, ConnectionLost):
                    suspects.append((chunk, True))
                elif isinstance(outcome, _ChunkFailed):
                    if outcome.code not in (_BADVERSION, _NONODE, _NODEEXISTS):
                        raise TransactionFailed((outcome.index, _error(outcome.code, outcome.path)), {})
                    suspects.append((chunk, False))
                elif isinstance(outcome, BaseException):
                    raise outcome
            if fenced:
                raise await self._fenced(epoch_zk_version, versions)
            pending = {}
            if not suspects:
                continue
            current = await self.get_many([path for chunk, _ in suspects for path, _ in chunk])
            for chunk, unknown in suspects:
                if unknown and all(_landed(item, current[item[0]]) for item in chunk):
                    versions.update((path, current[path][1].version) for path, _ in chunk)
                    continue  # the chunk had committed before the connection dropped
                for path, (data, expected) in chunk:
                    now = current[path]
                    if expected == -1 and now is None or now is not None and now[1].version == expected:
                        pending[path] = (data, expected)  # not in the way: retry
                    else:
                        conflicts[path] = None if now is None else (now[0], now[1].version)
        raise ZkError(detail=f"partition state writes still failing after {MAX_WRITE_ROUNDS} rounds")

    async def _write_chunk(self, epoch_zk_version: int | None, chunk: list):
        ops = []
        if epoch_zk_version is not None:
            ops.append(_MULTI_HEADER.pack(_CHECK, False, -1))
            ops.append(_ustr(self._abs(CONTROLLER_EPOCH_PATH)) + _INT.pack(epoch_zk_version))
        acl = self._acl_bytes
        for path, (data, expected) in chunk:
            full = _ustr(self._abs(path))
            if expected == -1:
                ops.append(_MULTI_HEADER.pack(_CREATE2, False, -1))
                ops.append(full + _buffer(data) + acl + _INT.pack(0))
            else:
                ops.append(_MULTI_HEADER.pack(_SET_DATA, False, -1))
                ops.append(full + _buffer(data) + _INT.pack(expected))
        ops.append(_MULTI_HEADER.pack(-1, True, -1))
        try:
            results = await self._call(_Request(_MULTI, b"".join(ops), True, None), None, write=True)
        except ConnectionLost as lost:
            return lost
        offset = 0 if epoch_zk_version is None else 1
        for i, result in enumerate(results):
            if isinstance(result, _OpError) and result.code not in (0, -2):
                if i < offset:
                    return _Fence()
                return _ChunkFailed(i - offset, result.code, chunk[i - offset][0])
        out = {}
        for (path, _), result in zip(chunk, results[offset:]):
            out[path] = result.version if isinstance(result, Stat) else result[1].version
        return out

    async def _ensure_parents_fenced(self, epoch_zk_version: int | None, paths: list[str],
                                     versions: dict) -> None:
        """Create the missing ancestors of `paths` (no data, like Kafka), level by level, in
        epoch-checked multi-ops."""
        for _ in range(MAX_WRITE_ROUNDS):
            missing: set[str] = set()
            checked: set[str] = set()
            frontier = {_parent(path) for path in paths} - {"/"}
            while frontier:
                stats = await self.exists_many(sorted(frontier))
                checked |= frontier
                gone = {path for path, stat in stats.items() if stat is None}
                missing |= gone
                frontier = {_parent(path) for path in gone} - {"/"} - checked
            if not missing:
                return
            by_depth: dict[int, list[str]] = collections.defaultdict(list)
            for path in missing:
                by_depth[path.count("/")].append(path)
            retry = False
            for depth in sorted(by_depth):
                level = sorted(by_depth[depth])
                ops = [Create(path, None) for path in level]
                chunks = [ops[i:i + DEFAULT_CHUNK_OPS] for i in range(0, len(ops), DEFAULT_CHUNK_OPS)]
                outcomes = await asyncio.gather(*(self.multi(chunk, epoch_zk_version) for chunk in chunks),
                                                return_exceptions=True)
                for outcome in outcomes:
                    if isinstance(outcome, Fenced):
                        outcome.applied = dict(versions)
                        raise outcome
                    if isinstance(outcome, (TransactionFailed, ConnectionLost)):
                        retry = True  # someone else created some of them: look again
                    elif isinstance(outcome, BaseException):
                        raise outcome
                if retry:
                    break
            if not retry:
                return
        raise ZkError(detail="could not create the parents of the partition states")

    # -- watches ---------------------------------------------------------------------------

    async def watch_data(self, path: str, callback: Callable[[tuple[bytes, Stat] | None], None]) -> Watch:
        """Level-triggered data watch; `callback((data, stat))`, or `callback(None)` while the
        znode does not exist. Returns once the watch is armed and the first value delivered."""
        return await self._watch(path, "data", callback)

    async def watch_children(self, path: str, callback: Callable[[list[str] | None], None]) -> Watch:
        """Level-triggered children watch; `callback(sorted names)`, or `callback(None)` while
        the parent does not exist. Returns once armed and the first value delivered."""
        return await self._watch(path, "children", callback)

    async def _watch(self, path: str, kind: str, callback) -> Watch:
        watch = Watch(self, path, kind, callback)
        self._watches.add(watch)
        try:
            return await watch._start()
        except BaseException:
            watch.cancel()
            raise


_REASONS = {
    _NONODE: "missing (or parent missing)",
    _NODEEXISTS: "exists",
    _BADVERSION: "version mismatch",
    _NOTEMPTY: "not empty",
    _NOAUTH: "not allowed by ACL",
}


class _Fence:
    pass


class _ChunkFailed(NamedTuple):
    index: int
    code: int
    path: str


def _landed(item: tuple[str, tuple[bytes, int]], now) -> bool:
    """After a lost connection: does the znode hold what this write would have produced?"""
    _, (data, expected) = item
    return now is not None and now[0] == (data or b"") and now[1].version == expected + 1


def _op_size(path: str, data: bytes | None) -> int:
    return 9 + 4 + len(path) * 2 + 4 + (len(data) if data else 0) + 40


def _chunks(items: list, max_ops: int, max_bytes: int):
    chunk, size = [], 0
    for item in items:
        path, (data, _) = item
        item_size = _op_size(path, data)
        if chunk and (len(chunk) >= max_ops or size + item_size > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += item_size
    if chunk:
        yield chunk


# --------------------------------------------------------------------------------------------
# Forcing another session to expire (tests, benchmarks, fault drills)


async def force_expire(connect_string: str, session_id: int, password: bytes, timeout: float = 15.0) -> None:
    """Expire someone else's session the way ZooKeeper's own tests do: attach a second handle
    with the same session id and password and close it. Returns once the server says the
    session is dead (a reconnect with those credentials is refused)."""
    hosts, _ = parse_connect_string(connect_string)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for host, port in _host_ports(hosts):
            conn = _Connection(host, port, watch_handler=lambda event: None)
            try:
                await asyncio.wait_for(conn.connect(), 5)
                # connect and close go out back to back, so the owner cannot re-attach between them
                attach = _proto.ConnectRequest(protocol_version=0, last_seen_zxid=0, timeout=60000,
                                               session_id=session_id, password=password, read_only=False)
                frame = attach.serialize()
                close = _REQ_HEADER.pack(1, _CLOSE_OPCODE)
                conn.writer.write(_INT.pack(len(frame)) + frame + _INT.pack(len(close)) + close)
                _, _, response = await asyncio.wait_for(conn.read_response(initial_connect=True), 5)
                if response.session_id == 0:
                    return  # refused: the session is dead on the server
                conn.opcode_xref[1] = _CLOSE_OPCODE
                await asyncio.wait_for(conn.read_response(), 5)
            except (OSError, ConnectionError, asyncio.TimeoutError, _zexc.ZKError, struct.error) as error:
                log.debug("force_expire via %s:%s: %r", host, port, error)
            finally:
                _retire(conn)
        await asyncio.sleep(0.02)
    raise ZkError(detail=f"could not expire session 0x{session_id:x} within {timeout:.0f}s")
