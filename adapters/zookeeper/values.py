"""ZooKeeper for kctl, the plain values: everything of ZooKeeper that the rest of the code base sees
besides `ZkSession` itself.

The exceptions `ZkSession` raises (`ZkError` and its kinds; `TransactionFailed` with a `Problem`
per operation in the way; `Fenced`), the server's error codes and the exception each maps to,
`Stat`, the multi-op values (`Create`, `SetData`, `Delete`, `Check`), `SessionEvent`, and the
ACLs a session gives the nodes it creates. Plain values only: no I/O, no aiozk. adapters/zookeeper/session.py
re-exports all of it; import it from there.
"""
from __future__ import annotations

from typing import NamedTuple

CONTROLLER_EPOCH_PATH = "/controller_epoch"

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


class Unreachable(ConnectionLost):
    """No ZooKeeper server could be reached at connect time. Its text is the reason alone (a
    host that does not resolve, a refused connection, or silence until the connect timeout),
    fit to be shown to a user as it is."""

    def __init__(self, detail: str):
        super().__init__(None, detail)
        self.args = (detail,)

    def __str__(self) -> str:
        return self.detail


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
# ACLs

_PERM_READ, _PERM_ALL = 1, 31

ACL_OPEN = ((_PERM_ALL, "world", "anyone"),)
# Kafka with zookeeper.set.acl=true: CREATOR_ALL_ACL ++ READ_ACL_UNSAFE
ACL_CREATOR_ALL_WORLD_READ = ((_PERM_ALL, "auth", ""), (_PERM_READ, "world", "anyone"))
