"""What the `kctl` commands share: the `--zookeeper` and `--zk-auth` flags, the checks of what
they hold, logging set-up, and `run_with_zookeeper`, which connects a tool, runs its work and
turns failures into exit codes (every admin command and `kctl configs` go through it)."""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Awaitable, Callable

from adapters import admin
from adapters.cli.errors import UsageError, bad, one_line
from adapters.observability.logformat import configure
from adapters.znodes import dynconfig
from adapters.zookeeper.session import (
    NoAuth,
    TransactionFailed,
    Unreachable,
    ZkError,
    ZkSession,
    parse_connect_string,
)

DEFAULT_ZOOKEEPER = "127.0.0.1:2181"
INT32_MAX = 2**31 - 1
ZK_CONNECT_TIMEOUT_S = 15.0


def zookeeper_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zookeeper", default=os.environ.get("KCTL_ZOOKEEPER", DEFAULT_ZOOKEEPER),
                        help="ZooKeeper connect string host:port[,host:port...][/chroot] "
                             "(default: $KCTL_ZOOKEEPER, then 127.0.0.1:2181)")


def zk_auth_flag(parser) -> None:
    parser.add_argument("--zk-auth", metavar="USER:PASSWORD", default=os.environ.get("KCTL_ZOOKEEPER_AUTH") or None,
                        help="ZooKeeper digest credentials of the cluster (default: $KCTL_ZOOKEEPER_AUTH); the "
                             "znodes written get Kafka's secure ACL (all for this user, read for everyone)")


def host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise UsageError(f"--listen must be HOST:PORT, got {text!r}")
    return host, int(port)


def check_zk_auth(value: str, what: str) -> str:
    """Digest credentials `user:password` (what ZooKeeper's digest scheme takes)."""
    user, sep, _ = value.partition(":")
    if not sep or not user:
        raise UsageError(f"{what} must be USER:PASSWORD (ZooKeeper digest credentials)")
    return value


def check_connect_string(connect: str) -> None:
    try:
        parse_connect_string(connect)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def configure_logging(fmt: str = "text", level: str = "INFO") -> None:
    """Every line to stderr as text or one JSON object (adapters/observability/logformat.py); the node's
    state-change log file follows the same format."""
    configure(fmt, level)


def run_with_zookeeper(args, work: Callable[[ZkSession], Awaitable[int]]) -> int:
    """Connect (with `--zk-auth`), run `work`, close; turn admin failures into exit codes."""
    connect = args.zookeeper
    try:
        parse_connect_string(connect)
    except ValueError as exc:
        raise bad(str(exc)) from None
    auth = getattr(args, "zk_auth", None)
    if auth is not None:
        user, sep, _ = auth.partition(":")
        if not sep or not user:
            raise bad("--zk-auth must be USER:PASSWORD (ZooKeeper digest credentials)")

    async def main() -> int:
        try:
            zk = await ZkSession.connect(connect, timeout=ZK_CONNECT_TIMEOUT_S,
                                         auth=("digest", auth) if auth else None, acl_mode=auth is not None)
        except Unreachable as exc:  # its text names the server and the reason
            raise admin.ToolFailure(str(exc)) from None
        except (ZkError, OSError) as exc:
            raise admin.ToolFailure(f"cannot connect to ZooKeeper at {connect}: {exc}") from None
        try:
            return await work(zk)
        finally:
            await zk.close()

    try:
        return asyncio.run(main())
    except admin.AdminError as exc:
        raise bad(str(exc)) from None
    except (admin.ToolFailure, dynconfig.ConfigWriteConflict) as exc:
        fail(str(exc))
        return 1
    except (NoAuth, TransactionFailed) as exc:
        refused = exc if isinstance(exc, NoAuth) else exc.first_failure[1]
        if not isinstance(refused, NoAuth):
            fail(f"ZooKeeper: {exc}")
            return 1
        hint = ("these credentials may not write there" if auth else
                "pass the cluster's credentials with --zk-auth USER:PASSWORD or $KCTL_ZOOKEEPER_AUTH")
        raise bad(f"ZooKeeper refused the write ({refused}): the cluster's znodes are protected by ACLs; "
                   f"{hint}; nothing was written") from None
    except ZkError as exc:
        fail(f"ZooKeeper: {exc}")
        return 1


def fail(message: str) -> None:
    print(f"error: {one_line(message)}", file=sys.stderr)
