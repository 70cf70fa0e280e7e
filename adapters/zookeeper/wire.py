"""ZooKeeper for kctl, the wire codec: the requests we encode and the replies we decode ourselves.

aiozk encodes and decodes through generic `Part` objects, which is slow. The requests we send in
bulk (reads, writes, multi-ops, multiRead) are encoded here with precompiled structs into
`_Request`s, shaped the way aiozk's Connection.send expects, and their replies are decoded by the
`_PARSERS`, to which the read loop of adapters/zookeeper/connection.py dispatches each frame. A multi-op
reply carries a result or an error code (`_OpError`) per operation: that is how a failed
transaction names its first failing operation, where aiozk returns just an empty result.
"""
from __future__ import annotations

import struct
from typing import NamedTuple, Sequence

from adapters.zookeeper.values import Check, Create, Delete, Op, SetData, Stat

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


class _Request:
    """A pre-encoded request, shaped the way aiozk's Connection.send expects. `parser`, if
    given, decodes its reply instead of the opcode's entry in `_PARSERS`."""

    __slots__ = ("opcode", "body", "writes_data", "path", "parser")
    special_xid = None

    def __init__(self, opcode: int, body: bytes, writes_data: bool, path: str | None, parser=None):
        self.opcode = opcode
        self.body = body
        self.writes_data = writes_data
        self.path = path
        self.parser = parser

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


class _StateVersions(NamedTuple):
    """A multi-op of setData operations (behind an optional check) that all landed: their new
    znode versions, in order."""

    versions: list


_SET_DATA_RESULT = struct.Struct("!i?i32xi")  # a multi's setData result up to the stat's version
_SET_DATA_RESULT_SIZE = _MULTI_HEADER.size + _STAT.size


def _parse_state_writes(buf: bytes, offset: int):
    """The reply to `ZkSession.write_states`' multi-ops: `_StateVersions` when every operation
    was a setData that landed (a 100,000-partition failover's 500 replies, 200 results each),
    read with one unpack per result and no `Stat`; any other reply (creates, a failed
    transaction) as `_parse_multi` reads it."""
    start = offset
    kind, done, _ = _MULTI_HEADER.unpack_from(buf, offset)
    if kind == _CHECK and not done:  # the epoch check, which passed
        offset += _MULTI_HEADER.size
    versions = []
    append = versions.append
    unpack = _SET_DATA_RESULT.unpack_from
    last = len(buf) - _SET_DATA_RESULT.size
    while offset <= last:
        kind, done, _, version = unpack(buf, offset)
        if kind != _SET_DATA or done:
            break
        append(version)
        offset += _SET_DATA_RESULT_SIZE
    kind, done, _ = _MULTI_HEADER.unpack_from(buf, offset)
    if done and versions:
        return _StateVersions(versions)
    return _parse_multi(buf, start)


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
