"""`kctl node`: one cluster node, a broker that competes to be the controller (adapters/node.py).

Its settings come from `--config` (a Kafka server.properties, adapters/cli/node_properties.py),
then `--set`; each key is checked against `KNOWN_NODE_KEYS` before anything starts. SIGTERM or
Ctrl-C runs Kafka's controlled shutdown (unless `controlled.shutdown.enable=false`); a second
signal cuts it short.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from adapters.cli.common import (
    DEFAULT_ZOOKEEPER,
    INT32_MAX,
    check_connect_string,
    check_zk_auth,
    configure_logging,
    host_port,
)
from adapters.cli.errors import CommandFailure, UsageError
from adapters.cli.node_properties import PropertiesError, split_file_settings
from adapters.journal.writer import JournalError
from adapters.runtime import heap
from adapters.runtime.stalls import StallWatch
from adapters.node import BrokerIdInUse, ClusterNode, LogDirsFailed, NodeConfig
from adapters.zookeeper.session import Unreachable, ZkError


def add_node_command(sub) -> None:
    p = sub.add_parser("node", help="one cluster node: a broker that competes to be the controller")
    p.add_argument("--broker-id", type=int, default=None,
                   help="this node's broker id (Kafka's broker.id; or broker.id in --config)")
    # flags win over --config, which wins over $KCTL_ZOOKEEPER and the built-in default
    p.add_argument("--zookeeper", default=None,
                   help="ZooKeeper connect string host:port[,host:port...][/chroot] (default: zookeeper.connect in "
                        "--config, then $KCTL_ZOOKEEPER, then 127.0.0.1:2181)")
    p.add_argument("--listen", default=None,
                   help="control-channel address HOST:PORT (port 0: any free port; default: the PLAINTEXT listener "
                        "of --config, else 127.0.0.1:0)")
    p.add_argument("--rack", default=None, help="rack of this broker (Kafka's broker.rack), for rack-aware placement")
    p.add_argument("--journal-dir", default=None,
                   help="where this node's controller journal and its state-change.log go")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve Prometheus metrics (Kafka's names) on this port, on the --listen host (0: any free port)")
    p.add_argument("--log-dirs", default=None, metavar="D1,D2",
                   help="log directories (Kafka's log.dirs): each replica is a directory <dir>/<topic>-<partition>; "
                        "a dir that can no longer be written goes offline and is reported to the controller")
    p.add_argument("--config", default=None,
                   help="a Kafka server.properties: broker.id, broker.rack, listeners, zookeeper.connect and the "
                        "node keys are used, other Kafka keys are ignored with one warning line")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override one setting (repeatable)")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="stderr and state-change.log lines as text or as one JSON object each")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="the lowest level logged on stderr (default INFO)")
    p.set_defaults(func=cmd_node)


def _settings(config_file: str | None, sets: list[str] | None) -> dict:
    """Kafka-style properties: a file of key=value lines, then --set overrides."""
    settings: dict[str, str] = {}
    if config_file:
        try:
            with open(config_file, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError as exc:
            raise UsageError(f"cannot read --config {config_file}: {exc.strerror}")
        except UnicodeDecodeError as exc:
            raise UsageError(f"--config {config_file} is not UTF-8 text ({exc.reason} at byte {exc.start})")
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"{config_file}:{n}: expected key=value, got {line!r}")
            settings[key.strip()] = value.strip()
    for item in sets or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set expects key=value, got {item!r}")
        settings[key.strip()] = value.strip()
    return settings


KNOWN_NODE_KEYS = {
    "zookeeper.session.timeout.ms": int, "unclean.leader.election.enable": bool,
    "auto.leader.rebalance.enable": bool, "leader.imbalance.per.broker.percentage": int,
    "leader.imbalance.check.interval.seconds": int, "controlled.shutdown.max.retries": int,
    "controlled.shutdown.retry.backoff.ms": int, "replica.lag.time.max.ms": int,
    "delete.topic.enable": bool, "zookeeper.set.acl": bool, "journal.fsync": str,
    "replica.catch.up.delay.ms": int, "control.secret": str, "zookeeper.auth": str, "process.roles": str,
    "journal.retry.backoff.ms": int, "simulated.partition.bytes": int,
    "log.dirs": str, "controlled.shutdown.enable": bool, "controller.socket.timeout.ms": int, "zookeeper.connection.timeout.ms": int,
}


def _check_settings(settings: dict) -> None:
    for key, value in settings.items():
        kind = KNOWN_NODE_KEYS.get(key)
        if kind is None:
            raise UsageError(f"unknown configuration key {key!r} (known: {', '.join(sorted(KNOWN_NODE_KEYS))})")
        if kind is int:
            try:
                if not 0 <= int(value) <= INT32_MAX:
                    raise ValueError
            except ValueError:
                raise UsageError(f"{key} must be a non-negative 32-bit integer, got {value!r}")
        elif kind is bool and str(value).lower() not in ("true", "false"):
            raise UsageError(f"{key} must be true or false, got {value!r}")
    for key in ("controller.socket.timeout.ms", "zookeeper.connection.timeout.ms"):
        if key in settings and int(settings[key]) == 0:
            raise UsageError(f"{key} must be positive, got 0")
    roles = {r.strip() for r in settings.get("process.roles", "broker,controller").split(",")}
    if not roles or not roles <= {"broker", "controller"} or "broker" not in roles:
        raise UsageError(f"process.roles must be broker or broker,controller, got {settings['process.roles']!r}")
    if settings.get("journal.fsync", "batch") not in ("always", "batch", "never"):
        raise UsageError(f"journal.fsync must be always, batch or never, got {settings['journal.fsync']!r}")
    if "control.secret" in settings and not settings["control.secret"]:
        # an empty value would silently turn authentication off
        raise UsageError("control.secret must not be empty (leave it out to run without a secret)")
    if "zookeeper.auth" in settings:
        check_zk_auth(settings["zookeeper.auth"], "zookeeper.auth")


def cmd_node(args) -> int:
    _apply_properties_file(args)
    if args.broker_id is None:
        raise UsageError("--broker-id is required (or broker.id in the --config file)")
    if not 0 <= args.broker_id <= INT32_MAX:
        raise UsageError(f"--broker-id must be a non-negative 32-bit integer, got {args.broker_id}")
    if args.rack is not None and not args.rack.strip():
        raise UsageError("--rack must not be empty")
    if args.metrics_port is not None and not 0 <= args.metrics_port < 65536:
        raise UsageError(f"--metrics-port must be a port number 0-65535, got {args.metrics_port}")
    host, port = host_port(args.listen)
    check_connect_string(args.zookeeper)
    settings = {**args.file_settings, **_settings(None, args.set)}
    if args.log_dirs is not None:
        if not [d for d in args.log_dirs.split(",") if d.strip()]:
            raise UsageError("--log-dirs must name at least one directory")
        settings["log.dirs"] = args.log_dirs
    _check_settings(settings)
    zk_auth = settings.get("zookeeper.auth") or os.environ.get("KCTL_ZOOKEEPER_AUTH") or None
    if zk_auth is not None and "zookeeper.auth" not in settings:
        check_zk_auth(zk_auth, "$KCTL_ZOOKEEPER_AUTH")
    if settings.get("zookeeper.set.acl", "false").lower() == "true" and zk_auth is None:
        raise UsageError("zookeeper.set.acl=true needs credentials: set zookeeper.auth=USER:PASSWORD "
                         "(or $KCTL_ZOOKEEPER_AUTH)")
    secret = settings.get("control.secret") or os.environ.get("KCTL_CONTROL_SECRET")
    config = NodeConfig(broker_id=args.broker_id, zookeeper=args.zookeeper, host=host, port=port, rack=args.rack,
                        journal_dir=args.journal_dir, metrics_port=args.metrics_port, settings=settings,
                        secret=secret.encode() if secret else None,
                        zk_auth=zk_auth)
    configure_logging(args.log_format, args.log_level)
    # large transient arrays (a load's requests) go back to the system when freed, before the
    # state is built (adapters/runtime/heap.py)
    heap.configure()

    async def main() -> int:
        node = ClusterNode(config)
        # The session's heartbeats share this loop: a stretch that holds it for half the session
        # timeout is logged with where it was (adapters/runtime/stalls.py), before an expiry
        # would hide the cause.
        stalls = StallWatch(threshold=config.get("zookeeper.session.timeout.ms", 6000) / 2000)
        stalls.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        terminated: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda s=sig: (terminated.append(s), stop.set()))
        running = asyncio.ensure_future(node.run_until_stopped(stop))
        # A signal ends the node at any stage: while it still waits for ZooKeeper (a typo in
        # --zookeeper must not hold Ctrl-C for the connect timeout), the start is abandoned.
        signalled = asyncio.ensure_future(stop.wait())
        await asyncio.wait({running, signalled}, return_when=asyncio.FIRST_COMPLETED)
        if not running.done() and not node.started:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await _abandon(node)
            logging.getLogger("kctl.node").info("broker %d stopped by %s before it had started",
                                                args.broker_id, signal.Signals(terminated[0]).name)
            return 0
        signalled.cancel()
        try:
            await running
        except BrokerIdInUse as exc:
            await _release(node)
            raise UsageError(str(exc))
        except LogDirsFailed as exc:
            raise CommandFailure(str(exc)) from None
        except JournalError as exc:
            await _release(node)
            raise CommandFailure(f"cannot use the journal in {args.journal_dir}: {exc}") from None
        except Unreachable as exc:  # its text is the whole reason
            await _release(node)
            raise CommandFailure(str(exc)) from None
        except ZkError as exc:
            await _release(node)
            raise CommandFailure(f"ZooKeeper at {args.zookeeper}: {exc}") from None
        except OSError as exc:  # e.g. the --listen port is taken, the journal dir cannot be created
            await _release(node)
            raise CommandFailure(f"{exc.strerror or exc}: {exc.filename or args.listen}") from None
        if terminated and config.get("controlled.shutdown.enable", True):
            # Kafka's controlled shutdown may wait (retries x backoff) for a leader that cannot
            # move; a second signal cuts it short, as a second Ctrl-C would be meant to.
            again = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, again.set)
            shutdown = asyncio.ensure_future(node.controlled_shutdown())
            interrupted = asyncio.ensure_future(again.wait())
            await asyncio.wait({shutdown, interrupted}, return_when=asyncio.FIRST_COMPLETED)
            if not shutdown.done():
                logging.getLogger("kctl.node").warning("second signal: stopping without waiting for the "
                                                       "controlled shutdown")
                shutdown.cancel()
                await asyncio.gather(shutdown, return_exceptions=True)
            interrupted.cancel()
        await node.close()
        stalls.stop()
        return 0

    return asyncio.run(main())


async def _abandon(node) -> None:
    """A node stopped while starting: close whatever it had started."""
    if getattr(node, "server", None) is not None:
        try:
            await node.close()
            return
        except Exception:  # noqa: BLE001 - exiting anyway; the session goes below
            pass
    await _release(node)


def _apply_properties_file(args) -> None:
    """`--config FILE` as a Kafka server.properties (adapters/cli/node_properties.py): its identity
    keys fill the flags not given, its node keys become settings, every other key is named in
    one warning line."""
    raw = _settings(args.config, None) if args.config else {}
    try:
        identity, args.file_settings, ignored = split_file_settings(raw, set(KNOWN_NODE_KEYS))
    except PropertiesError as exc:
        raise UsageError(f"--config {args.config}: {exc}") from None
    if ignored:
        print(f"warning: --config {args.config}: ignoring {len(ignored)} key(s) kctl does not use: "
              + ", ".join(sorted(ignored)), file=sys.stderr)
    for name, value in identity.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.listen is None:
        args.listen = "127.0.0.1:0"
    if args.zookeeper is None:
        args.zookeeper = os.environ.get("KCTL_ZOOKEEPER", DEFAULT_ZOOKEEPER)


async def _release(node) -> None:
    """A node that failed to start: end its ZooKeeper session now (its registration, if any, goes
    at once instead of after the session timeout)."""
    if node.zk is not None:
        try:
            await node.zk.close()
        except Exception:  # noqa: BLE001 - exiting anyway, with the start failure as the message
            pass
