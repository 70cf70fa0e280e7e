"""One cluster node: a broker that competes to be the controller (the composition root).

What runs inside one `kctl node` process, in one task group:

- the ZooKeeper session, registering `/brokers/ids/<id>` and watching `/controller`;
- the election: one multi-op creates the ephemeral `/controller` and moves `/controller_epoch`
  from the version it read (KAFKA-6082); on winning, the controller watches start and their
  snapshot becomes `ControllerElected`;
- the controller loop (adapters/controller/loop.py) with its executor, ZooKeeper writer, broker senders and
  timers, and its journal;
- the control server: broker requests from the controller, and controller requests
  (ControlledShutdown, ElectLeaders) from brokers and tools;
- the broker itself (adapters/broker/broker.py) with its replica manager.

Session loss is Kafka's expiry: resign, re-register, compete again. aiozk re-creates a session
silently, so `ZkSession.on_session_change` is what tells us.

A journal that cannot be written (full disk, file size limit, I/O error) ends the term: the
loop resigns without acting on what is not durable, the node deletes its `/controller` so that
another node takes over, and it does not compete again until a probe write in the journal
directory succeeds (every `journal.retry.backoff.ms`); the broker keeps serving throughout.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import attrs

from controller_core import events as E
from controller_core.state import ControllerConfig

from adapters.control import requests as Q
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.control.transport import ControlClient, ControlServer
from adapters.observability.decisionlog import DecisionLog
from adapters.controller.executor import Executor, Replies, Timers
from adapters.journal.writer import Journal
from adapters.controller.loop import ControllerLoop
from adapters.observability.metrics import NodeMetrics
from adapters.controller.senders import Senders
from adapters.observability.statelog import StateChangeFile
from adapters.controller.watches import ControllerWatches
from adapters.zookeeper.session import (
    Create,
    NodeExists,
    NoNode,
    SetData,
    TransactionFailed,
    ZkError,
    ZkSession,
)
from adapters.controller.zkpattern import pattern
from adapters.runtime.weak import weak_method
from adapters.controller.zkwriter import ZkWriter
from adapters.broker.broker import Broker
from adapters.broker.config_watch import DynamicConfigs
from adapters.broker.log_dirs import LogDirReplicaManager, LogDirs
from adapters.broker.replica_manager import SimulatedReplicaManager
from adapters.controller.log_dir_events import LogDirEventWatch
from adapters.controller.log_dir_events import notify
from adapters.kafka.apis import BrokerServices, KafkaApis
from adapters.kafka.listener import serve
from adapters.znodes import dynconfig as D

log = logging.getLogger("kctl.node")

STOPPING = "the node is stopping"
"""The reason of the `ControllerResigned` a controller journals when its node stops cleanly."""
RESIGN_WAIT_S = 5.0
"""How long a clean stop waits for the controller loop to decide that resignation."""


def now_ms() -> int:
    return int(time.time() * 1000)


@attrs.frozen(kw_only=True)
class NodeConfig:
    """A node's settings; `settings` holds the Kafka-named keys (`kctl node --set k=v`)."""

    broker_id: int
    zookeeper: str = "127.0.0.1:2181"
    host: str = "127.0.0.1"
    port: int = 0
    rack: str | None = None
    journal_dir: str | None = None
    metrics_port: int | None = None
    settings: dict = attrs.field(factory=dict)
    secret: bytes | None = None
    zk_auth: str | None = None  # "user:password" digest credentials
    zk_pattern: str = "batched"  # the benchmark's other modes: "sequential", "kafka-2.4" (adapters/controller/zkpattern.py)

    def get(self, key: str, default: Any) -> Any:
        value = self.settings.get(key, default)
        if isinstance(default, bool):
            return str(value).strip().lower() == "true" if isinstance(value, str) else bool(value)
        if isinstance(default, int):
            return int(value)
        return value

    @property
    def controller_eligible(self) -> bool:
        """`process.roles` (KRaft's key): "broker" never competes for the controller."""
        roles = {r.strip() for r in str(self.settings.get("process.roles", "broker,controller")).split(",")}
        return "controller" in roles

    def controller_config(self) -> ControllerConfig:
        return ControllerConfig(
            broker_id=self.broker_id,
            unclean_leader_election_enable=self.get("unclean.leader.election.enable", False),
            auto_leader_rebalance_enable=self.get("auto.leader.rebalance.enable", True),
            leader_imbalance_per_broker_percentage=self.get("leader.imbalance.per.broker.percentage", 10),
            leader_imbalance_check_interval_seconds=self.get("leader.imbalance.check.interval.seconds", 300),
            delete_topic_enable=self.get("delete.topic.enable", True),
        )


class BrokerIdInUse(Exception):
    pass


class LogDirsFailed(Exception):
    """Every log dir of this broker is offline (the node exits non-zero)."""


class ClusterNode:
    def __init__(self, config: NodeConfig, *, replica_manager=None, instruments=None):
        """`instruments` (benchmarks) may define on_event(event, timing), on_ack(broker, api,
        elapsed_ms, tag) and on_written(write_id, count, seconds)."""
        self.config = config
        self.instruments = instruments
        self.broker_id = config.broker_id
        self.replica_manager = replica_manager
        self.zk: ZkSession | None = None
        self.loop: ControllerLoop | None = None
        self.active = False
        self.started = False  # start() completed
        self.term = 0
        self._electing = False
        self._stopping = False
        self.registered = asyncio.Event()
        self.broker_epoch = -1
        self.port = config.port
        self._group: asyncio.TaskGroup | None = None  # every task of the node runs in it
        self._supervisor: asyncio.Task | None = None
        self._crash_event = asyncio.Event()
        self.crashed: BaseException | None = None
        self.metrics: NodeMetrics | None = None  # with --metrics-port (adapters/observability/metrics.py)
        self.state_changes: StateChangeFile | None = None  # <journal-dir>/state-change.log

    # -- startup --------------------------------------------------------------------------------

    async def start(self) -> None:
        ready = asyncio.get_running_loop().create_future()
        self._supervisor = asyncio.create_task(self._supervise(ready), name=f"node-{self.broker_id}")
        await ready
        try:
            await self._start()
        except BaseException:
            # a node that failed to start leaves no task behind (its caller releases the session)
            self._supervisor.cancel()
            await asyncio.gather(self._supervisor, return_exceptions=True)
            raise

    async def _start(self) -> None:
        cfg = self.config
        if cfg.metrics_port is not None:  # first: a taken port fails before anything is registered
            self.metrics = NodeMetrics(self)
            self.metrics.serve(cfg.host, cfg.metrics_port)
        if cfg.journal_dir:
            self.state_changes = StateChangeFile.in_directory(cfg.journal_dir, self.broker_id)
        session_ms = cfg.get("zookeeper.session.timeout.ms", 6000)
        acl = cfg.get("zookeeper.set.acl", False)
        auth = ("digest", cfg.zk_auth) if cfg.zk_auth else None
        self.zk = await ZkSession.connect(cfg.zookeeper, session_timeout_ms=session_ms, auth=auth, acl_mode=acl,
                                          timeout=cfg.get("zookeeper.connection.timeout.ms", 30000) / 1000)
        for path in zkpaths.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
        cluster_id = await self._ensure_cluster_id()
        journal = None
        if cfg.journal_dir:
            journal = Journal.open(Path(cfg.journal_dir), self.broker_id, fsync=cfg.get("journal.fsync", "batch"),
                                   cluster_id=cluster_id)
        # Every callback handed to a component this node owns holds the node weakly
        # (`weak_method`, adapters/runtime/weak.py): a bound method would close a cycle
        # node -> component -> node, and a closed node with its state would then wait for the
        # cyclic collector instead of being freed when dropped (issue 16).
        put = weak_method(self._put)
        self.replies = Replies()
        self.timers = Timers(put, now_ms)
        probe = self.instruments
        zk_pattern = pattern(cfg.zk_pattern)
        self.writer = ZkWriter(self.zk, put, clock=now_ms, pattern=zk_pattern,
                               on_written=getattr(probe, "on_written", None))
        self.senders = Senders(self.broker_id, put, secret=cfg.secret, clock=now_ms,
                               on_ack=getattr(probe, "on_ack", None),
                               request_timeout_s=cfg.get("controller.socket.timeout.ms", 30000) / 1000)
        zk = self.zk
        self.watches = ControllerWatches(self.zk, put, now_ms, own_writes=self.writer.own_writes,
                                         read_many=lambda paths: zk_pattern.read_many(zk, paths),
                                         epoch_zk_version=weak_method(self._epoch_zk_version, dead=-1))
        self.executor = Executor(zk=self.writer, senders=self.senders, replies=self.replies, timers=self.timers,
                                 watches=self.watches, resign=weak_method(self._resign_soon), clock=now_ms,
                                 controller_id=self.broker_id, event_seq=weak_method(self._event_seq))
        self.loop = ControllerLoop(cfg.controller_config(), self.executor, journal, clock=now_ms)
        self.loop.observer = getattr(probe, "on_event", None)
        writer = self.writer  # not `self.writer` in the lambda: the closure would hold the node
        self.loop.observers.append(DecisionLog(self.broker_id, fenced=lambda: writer.fenced))
        if self.metrics is not None:
            self.loop.observers.append(self.metrics.stats)
        self.loop.on_journal_failure = weak_method(self._on_journal_failure)
        if self.state_changes is not None:
            loop = self.loop
            self.state_changes.hold_while(lambda: loop.bursting)
        self.broker = self._make_broker()
        self.kafka = self._make_kafka_apis()
        self._open_log_dirs()
        self.server = ControlServer(cfg.host, cfg.port, weak_method(self._handle, dead=ReferenceError),
                                    secret=cfg.secret, foreign=weak_method(self._serve_kafka_client, dead=ReferenceError))
        await self.server.start()
        self.port = self.server.port
        self._spawn(self.loop.run(), "controller-loop")
        if hasattr(self.broker, "run"):
            self._spawn(self.broker.run(), "broker")
        await self._follow_dynamic_configs()

        self.log_dir_events = LogDirEventWatch(self.zk, put, now_ms, weak_method(self._is_active, dead=False),
                                               weak_method(self._epoch_zk_version, dead=-1))
        await self.log_dir_events.start()
        if self.log_dirs is not None:
            self._spawn(self.log_dirs.watch(), "log-dirs")
        self.zk.on_session_change(weak_method(self._on_session_change))
        await self._register()
        self._controller_watch = await self.zk.watch_data(zkpaths.CONTROLLER, weak_method(self._on_controller))
        self.started = True

    def _open_log_dirs(self) -> None:
        """`log.dirs` (`--log-dirs`): replicas become directories, and a failed dir is reported
        (adapters/broker/log_dirs.py). Without it the broker keeps no files."""

        self.log_dirs = None
        dirs = [d.strip() for d in str(self.config.settings.get("log.dirs", "")).split(",") if d.strip()]
        if not dirs or not hasattr(self.broker, "replica_manager"):
            return
        self.log_dirs = LogDirs(dirs, on_failure=weak_method(self._log_dir_failed),
                                on_all_failed=weak_method(self._all_log_dirs_failed))
        self.log_dirs.open()
        self.broker.replica_manager = LogDirReplicaManager(self.broker.replica_manager, self.log_dirs)

    def _log_dir_failed(self, directory: str, replicas) -> None:
        self.broker.replica_manager.stop_failed(replicas)

        async def report() -> None:
            while not self._stopping:
                try:
                    await notify(self.zk, self.broker_id)
                    return
                except ZkError as exc:
                    log.warning("cannot write the log dir event yet: %s", exc)
                    await asyncio.sleep(0.5)
        self._spawn(report(), "log-dir-event")

    def _all_log_dirs_failed(self) -> None:
        """Kafka halts a broker whose every log dir is offline."""
        log.critical("broker %d: every log dir is offline; shutting down", self.broker_id)
        self.crashed = LogDirsFailed(f"every log dir of broker {self.broker_id} is offline: "
                                     + ", ".join(self.log_dirs.offline))
        self._crash_event.set()

    async def _follow_dynamic_configs(self) -> None:
        """Kafka's config manager: throttles for the simulated replica manager, the dynamic
        `unclean.leader.election.enable` (this broker's own, else the cluster default) for the
        controller (adapters/broker/config_watch.py)."""

        self._unclean_default: bool | None = None
        self.dynamic_configs = DynamicConfigs(self.zk, weak_method(self._on_config_change))
        rm = getattr(self.broker, "replica_manager", None)
        rm = getattr(rm, "inner", rm)  # under the log dirs' wrapper
        if isinstance(rm, SimulatedReplicaManager):
            rm.throttle = self.dynamic_configs.throttle_rate
            rm.partition_bytes = self.config.get("simulated.partition.bytes", rm.partition_bytes)
        await self.dynamic_configs.start()

    def _on_config_change(self, entity_type: str, name: str) -> None:
        rm = getattr(self.broker, "replica_manager", None)
        if hasattr(rm, "throttles_changed"):
            rm.throttles_changed()
            if hasattr(self.broker, "wake"):
                self.broker.wake()
        if entity_type != D.BROKERS or name not in (D.DEFAULT_ENTITY, str(self.broker_id)):
            return
        # Kafka's dynamic broker config: this broker's own `/config/brokers/<id>` wins over the
        # cluster default `<default>`, which wins over the static setting (the core's part)
        unclean = None
        for entity in (str(self.broker_id), D.DEFAULT_ENTITY):
            raw = self.dynamic_configs.get(D.BROKERS, entity).get(D.UNCLEAN_KEY)
            value = None if raw is None else raw.strip().lower()
            if value not in (None, "true", "false"):
                log.error("ignoring %s=%r in /config/brokers/%s: expected true or false", D.UNCLEAN_KEY, raw, entity)
                continue
            if value is not None:
                unclean = value == "true"
                source = f"/config/brokers/{entity}"
                break
        if unclean != self._unclean_default:
            self._unclean_default = unclean
            if unclean is None:
                log.info("dynamic %s is now unset: the static setting applies", D.UNCLEAN_KEY)
            else:
                log.info("dynamic %s is now %s (from %s)", D.UNCLEAN_KEY, str(unclean).lower(), source)
            self._put(E.BrokerDefaultConfigChanged(at=now_ms(), unclean_leader_election_enable=unclean))

    def _make_broker(self):
        return Broker(self.broker_id, self.zk, replica_manager=self.replica_manager,
                      replica_lag_time_max_ms=self.config.get("replica.lag.time.max.ms", 10000),
                      catch_up_delay_ms=self.config.get("replica.catch.up.delay.ms", 300),
                      fallback=weak_method(self._handle_controller_request, dead=ReferenceError))

    def _make_kafka_apis(self):
        """Kafka's wire protocol for stock clients on the same port (`adapters.kafka`)."""

        return KafkaApis(BrokerServices(
            broker_id=self.broker_id, broker=self.broker, zk=weak_method(self._current_zk),
            is_controller=weak_method(self._is_active, dead=False),
            controller_request=weak_method(self._handle_controller_request, dead=ReferenceError),
            static_config=dict(self.config.settings)))

    def _current_zk(self) -> ZkSession | None:
        return self.zk

    def _is_active(self) -> bool:
        return self.active

    async def _serve_kafka_client(self, reader, writer, first: bytes, peer: str) -> None:
        await serve(self.kafka, reader, writer, first, peer)

    async def _supervise(self, ready: asyncio.Future) -> None:
        """The node's one task group: the controller loop, the broker, elections, resignations,
        journal recovery and every other task the node starts run in it (`_spawn`). A task that
        fails cancels its siblings and takes the node down loudly (`crashed`, then `close()`),
        instead of being logged and forgotten; `close()` ends the group by cancelling this task."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                ready.set_result(None)
                await asyncio.Event().wait()  # the group lives until close() cancels it
        except asyncio.CancelledError as cancelled:
            # close(): the group has cancelled and awaited every task. The traceback goes: on
            # CPython 3.11 the error is in a cycle with the frame of TaskGroup.__aexit__ (its
            # local holds the error, the error's traceback the frame), and through that
            # traceback the cycle held this frame, so `self`, so the whole closed node
            cancelled.__traceback__ = None
        except BaseExceptionGroup as failed:
            if self._stopping:
                return
            if self.crashed is None:
                self.crashed = failed.exceptions[0]
            self._crash_event.set()
            # a node whose loop died must not keep its session (and maybe /controller): the
            # embedding service may not be waiting on run_until_stopped, so stop it here too
            asyncio.get_running_loop().create_task(self.close())
        finally:
            self._group = None

    def _spawn(self, coro, name: str) -> asyncio.Task | None:
        """Run `coro` in the node's task group (None once the node is stopping)."""
        if self._group is None:
            coro.close()
            return None

        async def named():
            try:
                return await coro
            except Exception as exc:
                if not self._stopping and self.crashed is None:
                    log.critical("%s crashed: %r", name, exc, exc_info=exc)
                    self.crashed = exc
                raise

        return self._group.create_task(named(), name=name)

    async def run_until_stopped(self, stop: asyncio.Event) -> None:
        """Start, then run until `stop` is set or a component crashes (then raise)."""
        await self.start()
        done, _ = await asyncio.wait([asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._crash_event.wait())],
                                     return_when=asyncio.FIRST_COMPLETED)
        if self.crashed is not None:
            await self.close()
            raise self.crashed

    def _event_seq(self) -> int | None:
        """The journal seq of the event being decided (labels the state-change log)."""
        loop = self.loop
        return loop.last_seq if loop is not None and loop.journal is not None else None

    def _epoch_zk_version(self) -> int:
        """The controller's fencing token (-1 while this node is not the controller)."""
        state = self.loop.state if self.loop is not None else None
        return state.epoch_zk_version if state is not None and state.active else -1

    def _put(self, event) -> None:
        if self.loop is not None:
            self.loop.put(event)

    async def _ensure_cluster_id(self) -> str | None:
        """Create `/cluster/id` if no node did yet; return the cluster id (recorded in the
        journal, None if the znode holds something unreadable)."""
        await self.zk.ensure_path(zkpaths.CLUSTER)
        try:
            await self.zk.create(zkpaths.CLUSTER_ID, zkdata.encode_cluster_id(zkdata.new_cluster_id(os.urandom(16))))
        except NodeExists:
            pass
        data, _ = await self.zk.get(zkpaths.CLUSTER_ID)
        try:
            return zkdata.decode_cluster_id(data)
        except ValueError:
            log.warning("/cluster/id holds no readable cluster id; the journal will not record one")
            return None

    # -- broker registration ---------------------------------------------------------------------

    def _session_file(self) -> Path | None:
        return Path(self.config.journal_dir) / "zk-session.json" if self.config.journal_dir else None

    async def _register(self) -> None:
        """Register `/brokers/ids/<id>`; a stale registration left by this node's own previous
        session (remembered in its journal dir, or earlier in this process) is replaced, any
        other owner is an error."""
        cfg = self.config
        path = zkpaths.broker(self.broker_id)
        data = zkdata.encode_broker(self.broker_id, cfg.host, self.port, cfg.rack, now_ms())
        previous = set(getattr(self, "_previous_sessions", set()))
        session_file = self._session_file()
        if session_file is not None and session_file.exists():
            try:
                previous.add(int(json.loads(session_file.read_text())["session_id"]))
            except (ValueError, KeyError, OSError):
                pass
        while True:
            try:
                await self.zk.create(path, data, ephemeral=True)
                break
            except NodeExists:
                stat = await self.zk.exists(path)
                if stat is None:
                    continue
                if stat.ephemeral_owner == self.zk.session_id:
                    break
                if stat.ephemeral_owner in previous:
                    log.info("replacing the registration left by this node's previous session 0x%x", stat.ephemeral_owner)
                    try:
                        await self.zk.delete(path, stat.version)
                    except (NoNode, ZkError):
                        pass
                    continue
                raise BrokerIdInUse(f"broker id {self.broker_id} is already registered by another live "
                                    f"session (0x{stat.ephemeral_owner:x})")
        _, stat = await self.zk.get(path)
        self.broker_epoch = stat.czxid
        if hasattr(self.broker, "set_broker_epoch"):
            self.broker.set_broker_epoch(stat.czxid)
        if session_file is not None:
            try:
                session_file.parent.mkdir(parents=True, exist_ok=True)
                # the password too, so that fault tools can expire this session from outside
                # (adapters.zookeeper.session.force_expire, the chaos soak); readable by this user only, and
                # replaced whole so that a reader never sees half a file
                tmp = session_file.with_suffix(".tmp")
                tmp.unlink(missing_ok=True)
                tmp.touch(mode=0o600)
                tmp.write_text(json.dumps({"session_id": self.zk.session_id,
                                           "password": base64.b64encode(self.zk.password).decode()}))
                os.replace(tmp, session_file)
            except OSError as exc:  # e.g. the journal's disk is full: only a restart's convenience is lost
                log.warning("cannot remember the ZooKeeper session in %s: %s", session_file, exc)
        self._previous_sessions = previous | {self.zk.session_id}
        self.registered.set()
        log.info("registered broker %d at %s:%d (broker epoch %d)", self.broker_id, cfg.host, self.port, stat.czxid)

    # -- the election ---------------------------------------------------------------------------

    def _on_controller(self, value) -> None:
        if value is None:
            if not self._stopping:
                self._spawn(self._compete(), "election")
            return
        data, stat = value
        try:
            holder = zkdata.decode_controller(data)
        except zkdata.ZnodeFormatError:
            holder = -1
        if self.active and (holder != self.broker_id or stat.ephemeral_owner != self.zk.session_id):
            self._lose("another node holds /controller")

    async def _compete(self) -> None:
        if self.active or self._electing or self._stopping or not self.config.controller_eligible:
            return
        if self.loop.journal_failure is not None:
            return  # an unusable journal: the recovery task competes once it is writable again
        self._electing = True
        try:
            await self.registered.wait()
            while not self._stopping:
                if await self.zk.exists(zkpaths.CONTROLLER) is not None:
                    return  # someone else won; the /controller watch tells us when it goes
                epoch, version = await self._read_epoch()
                try:
                    await self.zk.multi([
                        Create(zkpaths.CONTROLLER, zkdata.encode_controller(self.broker_id, now_ms()), ephemeral=True),
                        SetData(zkpaths.CONTROLLER_EPOCH, zkdata.encode_controller_epoch(epoch + 1), version),
                    ])
                except TransactionFailed:
                    continue  # lost the race, or the epoch moved: look again
                await self._become_controller(epoch + 1, version + 1)
                return
        finally:
            self._electing = False

    async def _read_epoch(self) -> tuple[int, int]:
        while True:
            try:
                data, stat = await self.zk.get(zkpaths.CONTROLLER_EPOCH)
                return zkdata.decode_controller_epoch(data), stat.version
            except NoNode:
                try:
                    await self.zk.create(zkpaths.CONTROLLER_EPOCH, zkdata.encode_controller_epoch(0))
                except NodeExists:
                    pass

    async def _become_controller(self, epoch: int, epoch_zk_version: int) -> None:
        log.info("broker %d is the controller, epoch %d (fencing version %d)", self.broker_id, epoch, epoch_zk_version)
        self.active = True
        self.term += 1
        term = self.term
        self.writer.reset()
        if not self.loop.roll_journal():  # a new term starts a segment whose head snapshot is the new state
            return  # the journal is unusable: the loop's failure handler has resigned

        def elected(snapshot) -> None:
            if self.active and self.term == term:
                self._put(E.ControllerElected(at=now_ms(), epoch=epoch, epoch_zk_version=epoch_zk_version,
                                              snapshot=snapshot))
        if getattr(self, "log_dir_events", None) is not None:
            self.log_dir_events.became_controller()
        try:
            await self.watches.start(elected)
        except ZkError as exc:
            log.error("failover read failed: %s", exc)
            self._lose(f"failover read failed: {exc}")

    def _lose(self, reason: str) -> None:
        if not self.active:
            return
        log.warning("broker %d is no longer the controller: %s", self.broker_id, reason)
        self.active = False
        self.watches.stop()
        self._put(E.ControllerResigned(at=now_ms(), reason=reason))

    def _resign_soon(self, reason: str) -> None:
        """The core's Resign (after fencing): stop, and delete `/controller` if it is still ours
        so that a fresh election runs."""
        self.active = False
        self.watches.stop()
        self._spawn(self._delete_own_controller_node(), "resign")

    async def _delete_own_controller_node(self) -> None:
        try:
            data, stat = await self.zk.get(zkpaths.CONTROLLER)
            if zkdata.decode_controller(data) == self.broker_id and stat.ephemeral_owner == self.zk.session_id:
                await self.zk.delete(zkpaths.CONTROLLER, stat.version)
        except (NoNode, ZkError, zkdata.ZnodeFormatError):
            pass

    def _on_journal_failure(self, exc) -> None:
        """The loop could not write its journal (it has logged the error and resigned)."""
        if self._stopping:
            return
        if self.active:
            self._resign_soon(f"journal unusable: {exc}")
        self._spawn(self._recover_journal(), "journal-recovery")

    async def _recover_journal(self) -> None:
        backoff = self.config.get("journal.retry.backoff.ms", 5000) / 1000
        while not self._stopping:
            await asyncio.sleep(backoff)
            if self.loop.reopen_journal():
                log.info("broker %d competes for the controller again", self.broker_id)
                await self._compete()
                return

    def _on_session_change(self, event) -> None:
        log.warning("ZooKeeper session change: %s (0x%x -> 0x%x)", event.kind,
                    event.old_session_id or 0, event.new_session_id or 0)
        self._lose("ZooKeeper session expired")
        if not self._stopping and event.new_session_id is not None:
            self.registered.clear()
            self._spawn(self._reregister_and_compete(), "re-register")

    async def _reregister_and_compete(self) -> None:
        await self._register()
        await self._compete()

    # -- the control server ---------------------------------------------------------------------

    async def _handle(self, frame) -> dict:
        return await self.broker.handle(frame)

    async def _handle_controller_request(self, frame) -> dict:
        """Requests for the controller: ControlledShutdown and ElectLeaders."""
        if not self.active:
            return {"error": "NOT_CONTROLLER", "message": f"broker {self.broker_id} is not the controller"}
        body = frame.body
        try:
            if frame.api == Q.CONTROLLED_SHUTDOWN:
                request_id, future = self.replies.open()
                self._put(E.ControlledShutdownRequested(at=now_ms(), request_id=request_id,
                                                        broker_id=Q._int(body, "broker_id"),
                                                        broker_epoch=Q._int(body, "broker_epoch")))
                reply = await asyncio.wait_for(future, 60)
                return {"error": reply.error, "partitions_remaining": Q.tp_list(reply.partitions_remaining)}
            if frame.api == Q.ELECT_LEADERS:
                election_type = str(body.get("election_type", "")).lower()
                partitions = body.get("partitions")
                tps = None if partitions is None else Q.decode_partitions(partitions)
                request_id, future = self.replies.open()
                self._put(E.LeaderElectionRequested(at=now_ms(), request_id=request_id, election_type=election_type,
                                                    partitions=tps))
                reply = await asyncio.wait_for(future, 60)
                return {"error": None, "results": [[tp.topic, tp.partition, err] for tp, err in reply.results]}
        except Q.RequestFormatError as exc:
            return {"error": "INVALID_REQUEST", "message": str(exc)}
        except asyncio.TimeoutError:
            return {"error": "REQUEST_TIMED_OUT", "message": "the controller did not answer in time"}
        return {"error": "UNSUPPORTED", "message": f"unknown api {frame.api}"}

    # -- shutdown -------------------------------------------------------------------------------

    async def controlled_shutdown(self) -> bool:
        """Kafka's controlled shutdown: ask the controller to move leadership away. True once
        nothing is led here any more.

        Counted as Kafka 2.4's KafkaServer.controlledShutdown counts: at most
        `controlled.shutdown.max.retries` attempts in all (0: none), `retry.backoff.ms` apart.
        Kafka also sleeps after the last failed attempt; that wait helps nothing, so it is left
        out. A leader with no other live replica in its ISR cannot move: then every attempt
        fails and the node waits (retries - 1) x backoff before it stops anyway."""
        retries = self.config.get("controlled.shutdown.max.retries", 3)
        backoff = self.config.get("controlled.shutdown.retry.backoff.ms", 5000) / 1000
        for attempt in range(retries):
            try:
                remaining = await self._ask_controller_to_shut_down()
                if remaining is not None and not remaining:
                    log.info("controlled shutdown of broker %d succeeded", self.broker_id)
                    return True
                log.info("controlled shutdown attempt %d: %s partition(s) still led here", attempt + 1,
                         "?" if remaining is None else len(remaining))
            except Exception as exc:  # noqa: BLE001 - any failure is one failed attempt
                log.warning("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
            if attempt + 1 < retries:
                await asyncio.sleep(backoff)
        log.warning("controlled shutdown of broker %d did not complete; shutting down anyway", self.broker_id)
        return False

    async def _ask_controller_to_shut_down(self):
        data, _ = await self.zk.get(zkpaths.CONTROLLER)
        controller = zkdata.decode_controller(data)
        bdata, bstat = await self.zk.get(zkpaths.broker(controller))
        info = zkdata.decode_broker(controller, bdata, bstat.czxid)
        client = ControlClient(info.host, info.port, secret=self.config.secret)
        try:
            answer = await client.request(Q.CONTROLLED_SHUTDOWN, {"broker_id": self.broker_id,
                                                                  "broker_epoch": self.broker_epoch}, timeout=30)
        finally:
            await client.close()
        if answer.get("error"):
            raise RuntimeError(f"{answer['error']}: {answer.get('message', '')}")
        return Q.decode_partitions(answer.get("partitions_remaining", []))

    async def crash(self) -> None:
        """Stop everything at once, as a killed process would, but leave the ZooKeeper session
        to be expired from outside (benchmarks: `force_expire` marks t0)."""
        self.loop.killed = True  # a killed process writes no more journal records
        await self._teardown(clean=False)

    async def close(self) -> None:
        await self._teardown(clean=True)
        await self.zk.close()

    async def _teardown(self, clean: bool) -> None:
        """Stop every component. `clean` also writes the pending journal effects; either way the
        journal is closed (a dead process's file lock goes with it)."""
        self._stopping = True
        if self.active:
            self.active = False
            self.watches.stop()
            if clean and self.loop is not None and self.loop.journal is not None:
                # the term's end goes into the journal, decided like any resignation: the replay
                # reads it there instead of inferring it from the next controller's epoch
                self._put(E.ControllerResigned(at=now_ms(), reason=STOPPING))
                try:
                    await asyncio.wait_for(self.loop.wait_idle(), RESIGN_WAIT_S)
                except asyncio.TimeoutError:
                    log.warning("the controller's last events were not processed within %.0f s of the stop; "
                                "its journal ends without the term's end", RESIGN_WAIT_S)
        supervisor = self._supervisor
        if supervisor is not None and supervisor is not asyncio.current_task():
            supervisor.cancel()
            await asyncio.gather(supervisor, return_exceptions=True)
        if getattr(self, "dynamic_configs", None) is not None:
            self.dynamic_configs.stop()
        if getattr(self, "log_dir_events", None) is not None:
            self.log_dir_events.stop()
        self.senders.stop_all()
        self.timers.cancel_all()
        self.writer.close()
        await self.server.close()
        if hasattr(self.broker, "close"):
            result = self.broker.close()
            if asyncio.iscoroutine(result):
                await result
        self.loop.close_journal(flush=clean)
        # the metrics endpoint and the state-change writer are threads: stop them off the loop
        await asyncio.to_thread(self._close_observability)

    def _close_observability(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        if self.state_changes is not None:
            self.state_changes.close()
