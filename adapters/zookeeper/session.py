"""ZooKeeper for kctl: `ZkSession`, through which the whole code base talks to ZooKeeper.

The rest of the code base sees `ZkSession`, plain values (`Stat`, bytes, lists of names) and the
exceptions it raises, all imported from this module; it never sees aiozk objects, so the client
can be patched or replaced in the adapters/zk*.py modules below alone. Only zk.py,
zkconnection.py and zkwatch.py import aiozk.

- adapters/zookeeper/values.py: the exceptions, `Stat`, the multi-op values (`Create`, `SetData`,
  `Delete`, `Check`), `SessionEvent`, the ACLs;
- adapters/zookeeper/wire.py: the wire codec of the requests we encode and decode ourselves;
- adapters/zookeeper/connection.py: aiozk's connection and session, patched, with what aiozk 0.32.0 does
  that we design around (session expiry, EOF, failed transactions, chroots, auth) and how the
  client is made fast;
- adapters/zookeeper/watch.py: level-triggered watches;
- here: `ZkSession` (paths under the chroot, writes whose answer was lost, multi-ops and the
  diagnosis of their failures, fencing by /controller_epoch, the partition-state hot path),
  `parse_connect_string` and `force_expire`.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import re
import struct
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from aiozk import exc as _zexc
from aiozk import protocol as _proto
from aiozk.states import States as _States

from adapters.zookeeper.connection import READ_WINDOW, _Connection, _retire, _Session
from adapters.zookeeper.values import (
    ACL_CREATOR_ALL_WORLD_READ,
    ACL_OPEN,
    CONTROLLER_EPOCH_PATH,
    BadVersion,
    Check,
    ConnectionLost,
    Create,
    Delete,
    Fenced,
    NoAuth,
    NodeExists,
    NoNode,
    NotEmpty,
    Op,
    Problem,
    SessionClosed,
    SessionEvent,
    SessionExpired,
    SetData,
    Stat,
    TransactionFailed,
    Unreachable,
    ZkError,
    _BADVERSION,
    _NOAUTH,
    _NODEEXISTS,
    _NONODE,
    _NOTEMPTY,
    _ServerError,
    _error,
)
from adapters.zookeeper.watch import Subscription, Watch
from adapters.zookeeper.wire import (
    _CHECK,
    _CLOSE_OPCODE,
    _CREATE2,
    _DELETE,
    _EXISTS,
    _GET_CHILDREN2,
    _GET_DATA,
    _INT,
    _MULTI,
    _MULTI_HEADER,
    _MULTI_READ,
    _OPCODES,
    _REQ_HEADER,
    _SET_DATA,
    _OpError,
    _StateVersions,
    _Request,
    _acl_vector,
    _buffer,
    _op_body,
    _parse_state_writes,
    _ustr,
)

__all__ = [
    # this module's own
    "ZkSession",
    "StateWrites",
    "parse_connect_string",
    "force_expire",
    "DEFAULT_PORT",
    "DEFAULT_CHUNK_OPS",
    "MAX_CHUNK_BYTES",
    "MULTI_READ_OPS",
    # adapters/zookeeper/values.py's, re-exported: the rest of the code base imports every
    # ZooKeeper value and exception from here (some are not used in this module itself)
    "ACL_CREATOR_ALL_WORLD_READ",
    "ACL_OPEN",
    "CONTROLLER_EPOCH_PATH",
    "BadVersion",
    "Check",
    "ConnectionLost",
    "Create",
    "Delete",
    "Fenced",
    "NoAuth",
    "NodeExists",
    "NoNode",
    "NotEmpty",
    "Op",
    "Problem",
    "SessionClosed",
    "SessionEvent",
    "SessionExpired",
    "SetData",
    "Stat",
    "TransactionFailed",
    "Unreachable",
    "ZkError",
]

log = logging.getLogger(__name__)

DEFAULT_PORT = 2181
DEFAULT_CHUNK_OPS = 200  # partition-state writes per multi-op; see benchmarks/zk_throughput.py
MAX_CHUNK_BYTES = 512 * 1024  # half of ZooKeeper's default request limit (jute.maxbuffer, 1 MiB)
MULTI_READ_OPS = 500  # reads per multiRead request in get_many; see benchmarks/zk_throughput.py
MAX_WRITE_ROUNDS = 20

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
        _check_host_port(connect_string, entry)
    chroot = None
    if slash:
        rest = rest.rstrip("/")
        if rest:
            segments = rest.split("/")
            if any(seg in ("", ".", "..") for seg in segments):
                raise ValueError(f"invalid chroot in ZooKeeper connect string {connect_string!r}")
            chroot = "/" + rest
    return ",".join(entries), chroot


def _check_host_port(connect_string: str, entry: str) -> None:
    """One "host[:port]" of a connect string; the error names the part that is wrong."""
    match = _HOST_PORT.match(entry)
    if match is None:
        host, sep, port = entry.rpartition(":")
        host_only = _HOST_PORT.match(host) if sep and host else None
        if host_only is None or host_only.group(2) is not None:
            raise ValueError(f"invalid ZooKeeper connect string {connect_string!r}: bad host {entry!r}")
    else:
        port = match.group(2)
        if port is None or 0 < int(port) < 65536:
            return
    raise ValueError(f"invalid ZooKeeper connect string {connect_string!r}: bad port {port!r} in {entry!r} "
                     "(a number 1-65535)")


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
        # a cycle (this object -> `_session` -> these bound methods -> this object) while the
        # session is open; close() breaks it (see there)
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
        """Wait for the first session: at most `timeout` while servers stay silent, not at all
        once every server refused or does not resolve (Unreachable says which). Cancelled, or
        failed, it closes the session it began, so nothing is left running."""
        session = self._session
        loop = asyncio.get_running_loop()
        session.unreachable = unreachable = loop.create_future()
        starting = asyncio.ensure_future(session.start())
        try:
            await asyncio.wait({starting, unreachable}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # e.g. `kctl node` stopped by a signal while connecting
            await self._abandon_start(starting)
            raise
        if starting.done() and not starting.cancelled() and starting.exception() is None:
            return
        await self._abandon_start(starting)
        if starting.done() and not starting.cancelled() and starting.exception() is not None:
            raise starting.exception()
        if unreachable.done():
            reasons = unreachable.result()
            if len(reasons) == 1:
                raise Unreachable(f"cannot connect to ZooKeeper at {reasons[0][0]}: {reasons[0][1]}")
            raise Unreachable("cannot connect to ZooKeeper: " + "; ".join(f"{where}: {why}" for where, why in reasons))
        raise Unreachable(f"no ZooKeeper answered at {self.connect_string} within {timeout:.0f}s")

    async def _abandon_start(self, starting: asyncio.Future) -> None:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await self._session.close()

    async def close(self) -> None:
        for watch in list(self._watches):
            watch.cancel()
        await self._session.close()
        # Let go of this object: the closed `_session` stays in a cycle of aiozk's (its cancelled
        # repair task's traceback), and this object with its watches would hang off it until
        # the cyclic collector ran. Not weak methods (adapters/runtime/weak.py): the session
        # object outlives this one anyway, and their wrappers would hang off that cycle
        # instead, more objects than the two bound methods (benchmarks/node_garbage.py: 24
        # more per dropped node, against 2-4 fewer this way)
        self._session.listener = self._session.connected_hook = None

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

    @property
    def connection(self):
        """The client's view of its connection (adapters/zookeeper/connection.py's ConnectionView): the
        server it is on, reconnections, time without a connection."""
        return self._session.view

    @property
    def last_zxid(self) -> int:
        """The highest zxid seen in any answer; a server behind it refuses this client."""
        return self._session.last_zxid

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

    # -- reading back after a lost answer ----------------------------------------------------

    async def sync(self) -> None:
        """ZooKeeper's sync: the server this client is on catches up with the leader before
        answering, so the reads that follow see every write the quorum committed before it."""
        await self._call(_proto.SyncRequest(path=self._abs("/")), "/", write=False)

    async def sync_after_loss(self) -> None:
        """Before reading back a write whose answer was lost with the connection: on an ensemble
        the reconnect may land on a follower that has not applied that write yet (our last zxid
        does not cover it: its answer never came), and the read-back would wrongly say it did
        not land. A sync closes that window; if it fails the read-back still runs (and the
        session's own errors surface there)."""
        try:
            await self.sync()
        except ZkError as error:
            log.info("sync before a read-back failed: %r", error)

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
        _check_size(request, op.path)
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
                await self.sync_after_loss()
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
        """Create `path` and its missing ancestors (no data), tolerating concurrent creators.
        The whole path is looked up first: it almost always exists, and one round trip then
        does instead of one per level (a new controller ensures five paths two levels deep
        before it arms its watches, on the way to its first decision)."""
        if await self.exists(path) is not None:
            return
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

    async def delete_as_controller(self, path: str, epoch_zk_version: int) -> bool:
        """Delete a notification the controller consumed, in a multi-op whose first op checks
        `/controller_epoch` (Kafka's deleteIsrChangeNotifications and
        deleteLogDirEventNotifications): a controller that was replaced deletes nothing that its
        successor has not read. False if the znode was already gone; raises Fenced."""
        try:
            await self.multi([Delete(path)], epoch_zk_version=epoch_zk_version)
        except TransactionFailed as exc:
            if isinstance(exc.first_failure[1], NoNode):
                return False
            raise
        return True

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

    async def get_many(self, paths: Iterable[str], window: int = READ_WINDOW,
                       batch: int = MULTI_READ_OPS) -> dict[str, tuple[bytes, Stat] | None]:
        """Read many znodes at once (all requests pipelined): {path: (data, stat) or None}.
        `batch=1` sends one getData per znode, `window` of them in flight (Kafka 2.4's reads)."""
        return await self._read_many(_GET_DATA, list(paths), window, batch)

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
        request = self._multi_request(wire_ops)
        _check_size(request, ops[0].path)
        try:
            results = await self._call(request, None, write=True)
        except ConnectionLost:
            await self.sync_after_loss()  # the caller's read-back must see the multi if it committed
            raise
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
        encode: Callable[[Any], bytes] | None = None,
    ) -> tuple[dict[str, int], dict[str, tuple[bytes, int] | None]]:
        """Write many znodes conditionally, as epoch-checked multi-ops sent concurrently: the
        path-keyed form of `write_states`, for callers holding (path, data, version) tuples.

        `writes` are (path, data, expected_version); expected_version -1 means create (missing
        parents are created too, fenced the same way). Returns (versions, conflicts):
        `versions` maps every written path to its new version; `conflicts` maps each path whose
        version was not the expected one (or that exists, for a create) to its current
        (data, version), or None if it is missing. A chunk that failed because of a conflict is
        retried without the conflicting paths. Raises Fenced (with `applied`) if the
        /controller_epoch check fails. `epoch_zk_version=None` writes unfenced (tools, benchmarks).
        `on_landed(versions)`, if given, is told of each chunk of the first round as soon as it
        commits.

        With `encode`, each write's second member is a value that `encode` turns into the
        znode's data as its chunk is built, and each chunk is sent before the next is encoded
        (see `write_states`).
        """
        writes = list(writes)
        paths = [w[0] for w in writes]
        landed = None
        if on_landed is not None:
            def by_path(start: int, versions: list[int]) -> None:
                on_landed(dict(zip(paths[start:start + len(versions)], versions)))
            landed = by_path
        outcome = await self.write_states(
            epoch_zk_version, paths, [w[1] for w in writes], [w[2] for w in writes],
            encode=None if encode is None else (lambda values: [encode(v) for v in values]),
            chunk_ops=chunk_ops, max_chunk_bytes=max_chunk_bytes, on_landed=landed)
        versions = {paths[i]: v for i, v in enumerate(outcome.versions) if v is not None}
        return versions, {paths[i]: now for i, now in outcome.conflicts.items()}

    async def write_states(
        self,
        epoch_zk_version: int | None,
        paths: Sequence[str],
        values: Sequence[Any],
        expected: Sequence[int],
        *,
        encode: Callable[[Sequence[Any]], list[bytes]] | None = None,
        chunk_ops: int = DEFAULT_CHUNK_OPS,
        max_chunk_bytes: int = MAX_CHUNK_BYTES,
        on_landed: Callable[[int, list[int]], None] | None = None,
    ) -> "StateWrites":
        """Write many znodes conditionally, as epoch-checked multi-ops sent concurrently; the
        writes are columns (write i: `paths[i]`, `values[i]`, `expected[i]`) and the outcome is
        by index. The ZooKeeper writer's hot path: a 100,000-partition failover writes 100,000
        states, and a dict per path, a tuple per write and a `Stat` per answer were most of the
        client's time (benchmarks/zk_throughput.py, the ZkWriter row).

        expected -1 means create (missing parents are created too, fenced the same way). Returns
        `StateWrites(versions, conflicts)`: `versions[i]` is write i's new znode version, None
        where it did not land; `conflicts` maps the index of each write whose znode was not at
        the expected version (or exists, for a create) to its current (data, version), or None
        if it is missing. A chunk that failed because of a conflict is retried without the
        conflicting writes; one whose answer was lost is read back. Raises Fenced (with
        `applied`, by path) if the /controller_epoch check fails. `epoch_zk_version=None` writes
        unfenced (tools, benchmarks).

        With `encode` (a list of values -> their data), values are encoded a chunk's worth at a
        time as the chunks are built, and each chunk is sent before the next is encoded:
        ZooKeeper starts on the first chunk while the controller still encodes the rest.
        `on_landed(start, versions)`, if given, is told of each chunk of the first round as soon
        as it commits: writes start, start + 1, ... landed at `versions`.
        """
        n = len(paths)
        if len(values) != n or len(expected) != n:
            raise ValueError(f"{n} paths, {len(values)} values and {len(expected)} expected versions")
        if len(set(paths)) != n:
            seen: set[str] = set()
            for path in paths:
                if path in seen:
                    raise ValueError(f"{path} written twice in one batch")
                seen.add(path)
        versions: list[int | None] = [None] * n
        conflicts: dict[int, tuple[bytes, int] | None] = {}
        data: list = [None] * n if encode is not None else list(values)  # bytes once encoded
        todo: Sequence[int] = range(n)  # a range in the first round: its chunks are ranges too
        fenced_check = epoch_zk_version is not None
        for _ in range(MAX_WRITE_ROUNDS):
            if not todo:
                return StateWrites(versions, conflicts)
            creates = [paths[i] for i in todo if expected[i] == -1]
            if creates:
                await self._ensure_parents_fenced(epoch_zk_version, creates,
                                                  lambda: _applied(paths, versions))
            notify, on_landed = on_landed, None  # the first round only: retries are few
            chunks, tasks = [], []
            try:
                for members, body in self._state_chunks(epoch_zk_version, paths, data, expected, todo,
                                                        values, encode, chunk_ops, max_chunk_bytes):
                    chunks.append(members)
                    tasks.append(asyncio.ensure_future(
                        self._send_states(body, members, paths, fenced_check, notify)))
                    if encode is not None:
                        await asyncio.sleep(0)  # the chunk goes out before the next is encoded
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            encode = None  # `data` holds the bytes from now on: a retry sends them again
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            suspects: list[tuple[Sequence[int], bool]] = []  # (members, outcome unknown)
            fenced = False
            for members, outcome in zip(chunks, outcomes):
                if type(outcome) is list:
                    if type(members) is range:
                        versions[members.start:members.stop] = outcome
                    else:
                        for i, version in zip(members, outcome):
                            versions[i] = version
                elif isinstance(outcome, _Fence):
                    fenced = True
                elif isinstance(outcome, ConnectionLost):
                    suspects.append((members, True))
                elif isinstance(outcome, _ChunkFailed):
                    if outcome.code not in (_BADVERSION, _NONODE, _NODEEXISTS):
                        raise TransactionFailed((outcome.index, _error(outcome.code, outcome.path)), {})
                    suspects.append((members, False))
                elif isinstance(outcome, BaseException):
                    raise outcome
            if fenced:
                raise await self._fenced(epoch_zk_version, _applied(paths, versions))
            todo = []
            if not suspects:
                continue
            if any(unknown for _, unknown in suspects):
                await self.sync_after_loss()
            current = await self.get_many([paths[i] for members, _ in suspects for i in members])
            for members, unknown in suspects:
                if unknown and all(_landed(data[i], expected[i], current[paths[i]]) for i in members):
                    for i in members:  # the chunk had committed before the connection dropped
                        versions[i] = current[paths[i]][1].version
                    continue
                for i in members:
                    now = current[paths[i]]
                    if expected[i] == -1 and now is None or now is not None and now[1].version == expected[i]:
                        todo.append(i)  # not in the way: retry
                    else:
                        conflicts[i] = None if now is None else (now[0], now[1].version)
        raise ZkError(detail=f"partition state writes still failing after {MAX_WRITE_ROUNDS} rounds")

    def _state_chunks(self, epoch_zk_version: int | None, paths: Sequence[str], data: list,
                      expected: Sequence[int], todo: Sequence[int], values: Sequence[Any],
                      encode: Callable | None, chunk_ops: int, max_bytes: int):
        """(members, multi-op body) for the writes `todo` (indices; `members` is a slice of it),
        at most `chunk_ops` operations and `max_bytes` of them a body. With `encode`, the values
        are encoded `chunk_ops` at a time as they are reached, into `data`.

        A block of operations is built by list comprehensions over the block's columns (no Op
        value, no `_op_body` call, no index lookups per write): the same bytes (the tests read
        them back through the server) at a third of the cost."""
        head = b"" if epoch_zk_version is None else (
            _MULTI_HEADER.pack(_CHECK, False, -1) + _ustr(self._abs(CONTROLLER_EPOCH_PATH))
            + _INT.pack(epoch_zk_version))
        done = _MULTI_HEADER.pack(-1, True, -1)
        set_data = _MULTI_HEADER.pack(_SET_DATA, False, -1)
        create = _MULTI_HEADER.pack(_CREATE2, False, -1)
        create_tail = self._acl_bytes + _INT.pack(0)
        pack = _INT.pack
        join = b"".join
        for block in range(0, len(todo), chunk_ops):
            members = todo[block:block + chunk_ops]
            if type(members) is range:  # the first round: slices of the columns
                start, stop = members.start, members.stop
                block_paths, block_expected = paths[start:stop], expected[start:stop]
                if encode is not None:
                    data[start:stop] = encode(values[start:stop])
                block_data = data[start:stop]
            else:
                block_paths, block_expected = [paths[i] for i in members], [expected[i] for i in members]
                if encode is not None:
                    for i, encoded in zip(members, encode([values[i] for i in members])):
                        data[i] = encoded
                block_data = [data[i] for i in members]
            ops = [join((set_data, pack(len(f)), f, pack(len(d)), d, pack(e))) if e != -1 and type(d) is bytes
                   else join((set_data, pack(len(f)), f, _buffer(d), pack(e))) if e != -1
                   else join((create, pack(len(f)), f, _buffer(d), create_tail))
                   for f, d, e in zip(self._full_paths(block_paths), block_data, block_expected)]
            if sum(map(len, ops)) <= max_bytes:
                yield members, join((head, *ops, done))
                continue
            first, size = 0, 0  # large data: cut the block by bytes
            for pos, op in enumerate(ops):
                if pos > first and size + len(op) > max_bytes:
                    yield members[first:pos], join((head, *ops[first:pos], done))
                    first, size = pos, 0
                size += len(op)
            yield members[first:], join((head, *ops[first:], done))

    def _full_paths(self, paths: Sequence[str]) -> list[bytes]:
        """`_abs(path).encode()` of each path, checked in bulk: with no newline in any of them,
        each starts after a newline of the joined text, so counting "\\n/" counts the paths that
        start with "/", and "//" or "/\\n" anywhere is a path `_abs` refuses. Anything else
        (a newline in a path, the root, an invalid path) goes through `_abs` one by one."""
        joined = "\n".join(paths) + "\n"
        if (joined.count("\n") == len(paths) and ("\n" + joined).count("\n/") == len(paths)
                and "//" not in joined and "/\n" not in joined):
            chroot = self._chroot
            return [(chroot + path).encode() for path in paths]
        return [self._abs(path).encode() for path in paths]

    async def _send_states(self, body: bytes, members: Sequence[int], paths: Sequence[str],
                           fenced_check: bool, notify: Callable | None):
        """One chunk's multi-op: the new versions of its writes in order, or what went wrong
        (`_Fence`, `_ChunkFailed`, `ConnectionLost`)."""
        try:
            results = await self._call(_Request(_MULTI, body, True, None, _parse_state_writes),
                                       None, write=True)
        except ConnectionLost as lost:
            return lost
        if type(results) is _StateVersions:  # every setData landed: read in bulk
            versions = results.versions
        else:  # creates in the chunk, or a failed transaction: the general reply
            offset = 1 if fenced_check else 0
            for i, result in enumerate(results):
                if isinstance(result, _OpError) and result.code not in (0, -2):
                    if i < offset:
                        return _Fence()
                    return _ChunkFailed(i - offset, result.code, paths[members[i - offset]])
            versions = [r.version if isinstance(r, Stat) else r[1].version for r in results[offset:]]
        if len(versions) != len(members):  # the versions are assigned by position
            raise ZkError(detail=f"a multi-op of {len(members)} writes was answered with {len(versions)} results")
        if notify is not None:
            notify(members[0], versions)
        return versions

    async def _ensure_parents_fenced(self, epoch_zk_version: int | None, paths: list[str],
                                     applied: Callable[[], dict]) -> None:
        """Create the missing ancestors of `paths` (no data, like Kafka), level by level, in
        epoch-checked multi-ops. `applied()` is what a Fenced raised here reports as applied."""
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
                        outcome.applied = applied()
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


class StateWrites(NamedTuple):
    """The outcome of `ZkSession.write_states`, by write index."""

    versions: list  # the new znode version of each write, None where it did not land
    conflicts: dict  # index -> the znode's current (data, version), or None if it is missing


def _applied(paths: Sequence[str], versions: list) -> dict[str, int]:
    """What a Fenced reports as applied: the writes that landed before it, by path."""
    return {paths[i]: v for i, v in enumerate(versions) if v is not None}


def _landed(data: bytes | None, expected: int, now) -> bool:
    """After a lost connection: does the znode hold what this write would have produced?"""
    return now is not None and now[0] == (data or b"") and now[1].version == expected + 1


def _op_size(path: str, data: bytes | None) -> int:
    return 9 + 4 + len(path) * 2 + 4 + (len(data) if data else 0) + 40


def _chunks(items, max_ops: int, max_bytes: int):
    """(path, (data, version)) items in chunks as `write_states` cuts them (by operations; the
    byte limit, estimated here, only matters for large data): benchmarks/floors.py's frames."""
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


JUTE_MAXBUFFER = 0xFFFFF
"""ZooKeeper's default limit on one request (`jute.maxbuffer`, 1 MiB - 1). A larger request makes
the server close the connection without an answer, which a client that re-sends lost writes
would do forever; it is refused here instead."""


def _check_size(request, path: str | None) -> None:
    size = len(request.body) + 8
    if size > JUTE_MAXBUFFER:
        raise ZkError(path, f"a request of {size:,} bytes is larger than ZooKeeper accepts "
                            f"(jute.maxbuffer, {JUTE_MAXBUFFER:,} bytes)")
