"""The broker side of a node: control requests in, replica transitions and ISR writes out.

`Broker.handle` is the `ControlServer` handler of a node. It answers the controller's
LeaderAndIsr, UpdateMetadata and StopReplica requests the way a Kafka 2.4 broker does, and
answers Metadata (read-only: its metadata cache, for tools), and passes any other api
(ControlledShutdown, ElectLeaders: the controller side's business) to the `fallback` handler the
node gives it.

Fencing, as in Kafka 2.4 (`KafkaApis` and `ReplicaManager`):

- A request whose broker epoch is older than this broker's registration (`set_broker_epoch`,
  the czxid of `/brokers/ids/<id>`) is answered STALE_BROKER_EPOCH and changes nothing. A
  broker epoch of -1 (unknown) is accepted, and so is a newer one: the controller may see a
  re-registration before the node has told the broker its new epoch (Kafka's
  `isBrokerEpochStale` is `request < current`).
- A request from a lower controller epoch than the highest seen is answered
  STALE_CONTROLLER_EPOCH and changes nothing. Every accepted request raises the epoch seen.
- A LeaderAndIsr entry is applied only if its leader epoch is strictly greater than the one
  this broker has for the partition (-1 when it has none); otherwise that partition gets
  STALE_CONTROLLER_EPOCH, Kafka 2.4's per-partition code for a stale or replayed leader epoch.
  An entry that does not list this broker among its replicas gets UNKNOWN_TOPIC_OR_PARTITION.
  StopReplica(delete=true) forgets the partition's leader epoch, as Kafka removes the partition.

Answers: LeaderAndIsr and StopReplica `{"partition_errors": [[topic, partition, error], ...]}`
listing only the failed partitions; UpdateMetadata `{}`. A rejected request answers
`{"error": code, "message": text}` plus, for LeaderAndIsr and StopReplica, every partition of
the request with that code, so no controller can take it for a success. A malformed body
answers INVALID_REQUEST; an api nobody handles answers UNSUPPORTED.

The metadata cache follows Kafka 2.4's `MetadataCache.updateMetadata`: the live brokers are
replaced, the partition states are merged (the controller sends only what changed), and a
partition sent with leader -2 (its topic is being deleted) leaves the cache. One difference:
the first UpdateMetadata under a new broker epoch (a new registration, which the controller
answers with every partition) replaces the partitions, so a broker that was away while a topic
was deleted does not keep serving it.

ISR writes: `run()` is the broker's background task. It asks the replica manager what ISR
changes are due and writes each one to `/brokers/topics/<t>/partitions/<p>/state` with the
expected znode version and the leader, leader epoch and controller epoch of the LeaderAndIsr
(epoch-unfenced multi-ops, batched). Partitions written together are announced by one
sequential `/isr_change_notification/isr_change_` znode. A version conflict is never retried
as such: the broker re-reads the znode and tells the replica manager, which stops leading the
partition when the leader epoch moved on (see `adapters.broker.replica_manager`).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import operator
import time
from collections import Counter
from contextlib import nullcontext
from typing import Any, Awaitable, Callable

from controller_core.values import LEADER_DURING_DELETE, BrokerInfo, LeaderIsr, PartitionView, TopicPartition

from adapters.control import requests as Q
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.broker.replica_manager import (
    DEFAULT_CATCH_UP_DELAY_MS,
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    Clock,
    IsrProposal,
    KafkaStorageError,
    ReplicaManager,
    SimulatedReplicaManager,
    monotonic_ms,
)
from adapters.control.framing import Frame
from adapters.runtime import gcpause, heap
from adapters.runtime.gcpause import gc_paused
from adapters.zookeeper.session import ZkError, ZkSession

log = logging.getLogger("kctl.broker")

STALE_CONTROLLER_EPOCH = "STALE_CONTROLLER_EPOCH"
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
INVALID_REQUEST = "INVALID_REQUEST"
UNSUPPORTED = "UNSUPPORTED"
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"
KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"

NOTIFICATION_MAX_PARTITIONS = 10_000
"""Partitions per ISR change notification znode (keeps each well under ZooKeeper's 1 MiB limit)."""
RETRY_BACKOFF_MS = 500
"""Wait before retrying a notification that ZooKeeper did not take."""

Fallback = Callable[[Frame], Awaitable[dict]]


class Broker:
    """The broker half of a `kctl node`.

    `zk` is the node's session (used only for ISR writes). `clock()` returns milliseconds; it
    is shared with the default `SimulatedReplicaManager`, which is built from
    `replica_lag_time_max_ms` and `catch_up_delay_ms` when no `replica_manager` is given.
    Run `run()` as a task next to the ControlServer serving `handle`; `close()` ends it.
    """

    def __init__(
        self,
        broker_id: int,
        zk: ZkSession,
        *,
        replica_manager: ReplicaManager | None = None,
        replica_lag_time_max_ms: float = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        catch_up_delay_ms: float = DEFAULT_CATCH_UP_DELAY_MS,
        clock: Clock = monotonic_ms,
        fallback: Fallback | None = None,
    ):
        self.broker_id = broker_id
        self.zk = zk
        self.clock = clock
        self.fallback = fallback
        if replica_manager is None:
            replica_manager = SimulatedReplicaManager(
                broker_id, replica_lag_time_max_ms=replica_lag_time_max_ms,
                catch_up_delay_ms=catch_up_delay_ms, clock=clock)
        self.replica_manager: ReplicaManager = replica_manager
        self._controller_epoch = -1
        self._broker_epoch: int | None = None
        self._leader_epochs: dict[TopicPartition, int] = {}
        self._meta_partitions: dict[TopicPartition, PartitionView] = {}
        # replicas the UpdateMetadata requests list as offline although their broker is live (a
        # failed log dir; Kafka's UpdateMetadata offline_replicas), for the Metadata answer
        self._meta_offline: dict[TopicPartition, frozenset[int]] = {}
        self._meta_brokers: dict[int, BrokerInfo] = {}
        self._metadata_lock = asyncio.Lock()
        self._metadata_broker_epoch: int | None = None  # the registration the partitions were told under
        self.metadata_controller_id = -1  # the sender of the last accepted UpdateMetadata (Kafka's cache keeps it)
        self.metadata_generation = 0  # +1 per accepted UpdateMetadata: lets readers of the cache reuse their work
        self._pending_notifications: dict[TopicPartition, None] = {}
        self._notify_retry_at = 0.0
        self._wakeup = asyncio.Event()
        self._closed = False
        self._frozen_size = 0  # replicas + cached partitions at the last freeze (`_freeze_when_grown`)
        self._freeze_at: asyncio.TimerHandle | None = None
        self._last_large = 0.0  # when the last large request was applied (monotonic s)
        self._requests: Counter[str] = Counter()
        self._rejections: Counter[str] = Counter()
        self._partition_errors: Counter[str] = Counter()
        self._isr: Counter[str] = Counter()
        # the handlers by method name, not as bound methods: a table of bound methods held by
        # the broker would be a reference cycle, and a dropped broker, with every partition it
        # holds, would then wait for the cyclic garbage collector (issue 16)
        self._handlers: dict[str, str] = {
            Q.LEADER_AND_ISR: "_leader_and_isr",
            Q.UPDATE_METADATA: "_update_metadata",
            Q.STOP_REPLICA: "_stop_replica",
            Q.METADATA: "_metadata_request",
        }

    # -- identity --------------------------------------------------------------------------------

    def set_broker_epoch(self, epoch: int) -> None:
        """The czxid of this broker's current `/brokers/ids/<id>` registration."""
        self._broker_epoch = epoch

    @property
    def broker_epoch(self) -> int | None:
        return self._broker_epoch

    @property
    def controller_epoch(self) -> int:
        """The highest controller epoch seen in an accepted request (-1: none yet)."""
        return self._controller_epoch

    def leader_epoch(self, tp: TopicPartition) -> int:
        """The leader epoch of the last LeaderAndIsr applied for `tp` (-1: none)."""
        return self._leader_epochs.get(tp, -1)

    # -- requests --------------------------------------------------------------------------------

    async def handle(self, frame: Frame) -> dict:
        """The ControlServer handler."""
        api = frame.api
        self._requests[api] += 1
        name = self._handlers.get(api)
        handler = getattr(self, name) if name is not None else None
        if handler is None:
            if self.fallback is not None:
                return await self.fallback(frame)
            return self._reject(UNSUPPORTED, f"broker {self.broker_id} does not handle {api} requests")
        try:
            answer = handler(frame.body)
            if inspect.isawaitable(answer):
                answer = await answer
            return answer
        except Q.RequestFormatError as err:
            return self._reject(INVALID_REQUEST, f"malformed {api} request: {err}")

    def _reject(self, code: str, message: str, tps=()) -> dict:
        self._rejections[code] += 1
        log.info("broker %d: %s", self.broker_id, message)
        answer: dict[str, Any] = {"error": code, "message": message}
        if tps:
            answer["partition_errors"] = [[tp.topic, tp.partition, code] for tp in tps]
        return answer

    def _fence(self, api: str, controller_id: int, controller_epoch: int, broker_epoch: int) -> tuple[str, str] | None:
        if broker_epoch != -1 and self._broker_epoch is not None and broker_epoch < self._broker_epoch:
            return STALE_BROKER_EPOCH, (f"{api} from controller {controller_id} (epoch {controller_epoch}) "
                                        f"has broker epoch {broker_epoch}, older than {self._broker_epoch}")
        if controller_epoch < self._controller_epoch:
            return STALE_CONTROLLER_EPOCH, (f"{api} from controller {controller_id} has controller epoch "
                                            f"{controller_epoch}, older than {self._controller_epoch}")
        return None

    async def _leader_and_isr(self, body: dict) -> dict:
        controller_id, controller_epoch, broker_epoch = Q.decode_control_header(body)
        views = await _decode_views(body.get("partition_states"))
        fenced = self._fence(Q.LEADER_AND_ISR, controller_id, controller_epoch, broker_epoch)
        if fenced is not None:
            return self._reject(*fenced, tps=[v.tp for v in views])
        self._controller_epoch = controller_epoch
        rm = self.replica_manager
        me = self.broker_id
        errors = []
        offline = getattr(rm, "is_offline", None)  # log dirs (adapters/broker/log_dirs.py)
        with _paused_for(views):
            for start in range(0, len(views), YIELD_EVERY):
                if start:
                    await asyncio.sleep(0)  # a 100,000-partition request must not starve the ZooKeeper heartbeats
                self._apply_leader_and_isr(views[start:start + YIELD_EVERY], rm, me, errors, offline)
        self._freeze_when_grown(len(views))
        self._wakeup.set()
        return {"partition_errors": errors}

    def _apply_leader_and_isr(self, views, rm, me, errors, offline) -> None:
        for view in views:
            tp = view.tp
            current = self._leader_epochs.get(tp, -1)
            if offline is not None and offline(tp):
                error = KAFKA_STORAGE_ERROR  # Kafka checks this first, whatever the leader epoch
            elif view.leader_epoch <= current:
                error = STALE_CONTROLLER_EPOCH
                log.debug("broker %d: ignoring LeaderAndIsr for %s: leader epoch %d is not above %d",
                          me, tp, view.leader_epoch, current)
            elif me not in view.replicas:
                error = UNKNOWN_TOPIC_OR_PARTITION
                log.warning("broker %d: ignoring LeaderAndIsr for %s: not among its replicas %s",
                            me, tp, list(view.replicas))
            else:
                try:
                    if view.leader == me:
                        rm.become_leader(view)
                    else:
                        rm.become_follower(view)
                except KafkaStorageError as exc:
                    log.warning("broker %d: %s: %s", me, tp, exc)
                    error = KAFKA_STORAGE_ERROR
                except Exception:
                    log.exception("broker %d: replica manager failed on %s", me, tp)
                    error = UNKNOWN_SERVER_ERROR
                else:
                    self._leader_epochs[tp] = view.leader_epoch
                    continue
            errors.append([tp.topic, tp.partition, error])
            self._partition_errors[error] += 1

    async def _update_metadata(self, body: dict) -> dict:
        controller_id, controller_epoch, broker_epoch = Q.decode_control_header(body)
        views = await _decode_views(body.get("partition_states"))
        brokers = Q.decode_brokers(body.get("live_brokers"))
        shutting = body.get("shutting_down_brokers") or []
        if not isinstance(shutting, list) or any(type(b) is not int for b in shutting):
            raise Q.RequestFormatError("shutting_down_brokers must be a list of broker ids")
        offline = body.get("offline_replicas")
        listed = {TopicPartition(t, p): frozenset(rs) for t, p, rs in offline or ()}
        async with self._metadata_lock:  # one at a time: each copies the cache as the last one left it
            fenced = self._fence(Q.UPDATE_METADATA, controller_id, controller_epoch, broker_epoch)
            if fenced is not None:
                return self._reject(*fenced)
            self._controller_epoch = controller_epoch
            # The first UpdateMetadata of a new registration lists every partition (the
            # controller tells a broker that joins, or re-joins after its session expired,
            # everything): it replaces the partitions instead of being merged into them. A
            # broker paused or cut off while a topic was deleted missed the leader -2 that
            # would have removed it, and kept serving the deleted topic (the chaos soak, seed 13).
            fresh = broker_epoch != -1 and broker_epoch != self._metadata_broker_epoch
            await self._apply_metadata(controller_id, views, brokers, replace=fresh, offline=listed)
            if broker_epoch != -1:
                self._metadata_broker_epoch = broker_epoch
        with _paused_for(views):  # (a broker's death refreshes every partition this one leads)
            if hasattr(self.replica_manager, "update_offline_replicas"):
                # (the partitions as a generator: a manager with no offline replica listed, now or
                # before, returns without reading them, and a 100,000-partition list is not made)
                self.replica_manager.update_offline_replicas((v.tp for v in views), listed)
            # replicas on brokers in controlled shutdown have stopped fetching
            self.replica_manager.update_live_brokers(frozenset(self._meta_brokers) - frozenset(shutting))
        self._wakeup.set()
        return {}

    async def _apply_metadata(self, controller_id: int, views, brokers, replace: bool = False,
                              offline: dict | None = None) -> None:
        # Applied to a copy and swapped in whole, as Kafka's MetadataCache updates under its write
        # lock: the loop yields while a 100,000-partition request is applied, and a Metadata
        # request answered meanwhile must not see half of it. Worse, the Kafka listener keeps its
        # encoded answer per generation: an answer encoded from a half-applied cache under the
        # new generation was served until the next UpdateMetadata (the failover benchmark's
        # client saw 4,000 of 10,000 new leaders for minutes). So the generation moves last.
        cache = {} if replace else dict(self._meta_partitions)
        with _paused_for(views):
            for start in range(0, len(views), YIELD_EVERY):
                if start:
                    await asyncio.sleep(0)
                part = views[start:start + YIELD_EVERY]
                if not any(v.leader == LEADER_DURING_DELETE for v in part):  # (usual: one C-level update)
                    cache.update(zip(map(_tp_of, part), part))
                    continue
                for view in part:  # in order: a partition listed twice ends as its last view says
                    if view.leader == LEADER_DURING_DELETE:
                        cache.pop(view.tp, None)
                    else:
                        cache[view.tp] = view
        self._meta_partitions = cache
        if offline or self._meta_offline:
            # each request lists the offline replicas of the partitions it carries (none listed:
            # none now); without any, listed now or before, a large request is not walked for them
            listed = {} if replace else dict(self._meta_offline)
            for view in views:
                tp = view.tp
                if offline and tp in offline:
                    listed[tp] = offline[tp]
                else:
                    listed.pop(tp, None)
            self._meta_offline = listed
        self._freeze_when_grown(len(views))
        self._meta_brokers = {b.broker_id: b for b in brokers}
        self.metadata_controller_id = controller_id
        self.metadata_generation += 1

    def _stop_replica(self, body: dict) -> dict:
        controller_id, controller_epoch, broker_epoch = Q.decode_control_header(body)
        delete = body.get("delete_partitions")
        if not isinstance(delete, bool):
            raise Q.RequestFormatError(f"delete_partitions must be true or false, got {delete!r}")
        tps = Q.decode_partitions(body.get("partitions"))
        fenced = self._fence(Q.STOP_REPLICA, controller_id, controller_epoch, broker_epoch)
        if fenced is not None:
            return self._reject(*fenced, tps=tps)
        self._controller_epoch = controller_epoch
        errors = []
        for tp in tps:
            try:
                self.replica_manager.stop_replica(tp, delete)
            except Exception:
                log.exception("broker %d: replica manager failed to stop %s", self.broker_id, tp)
                errors.append([tp.topic, tp.partition, UNKNOWN_SERVER_ERROR])
                self._partition_errors[UNKNOWN_SERVER_ERROR] += 1
                continue
            if delete:
                self._leader_epochs.pop(tp, None)
        self._wakeup.set()
        return {"partition_errors": errors}

    def _metadata_request(self, body: dict) -> dict:
        """Metadata (read-only, from tools such as the chaos soak): the cache, as `metadata()`."""
        return self.metadata(Q.decode_metadata_topics(body))

    # -- views -----------------------------------------------------------------------------------

    def metadata(self, topics: frozenset[str] | None = None) -> dict:
        """The metadata cache as JSON-friendly values (of `topics`, default all):
        {"broker_id", "controller_epoch", "brokers": [ids], "partitions": {"t-0": {...}}}."""
        return {
            "broker_id": self.broker_id,
            "controller_epoch": self._controller_epoch if self._controller_epoch >= 0 else None,
            "brokers": sorted(self._meta_brokers),
            "partitions": {
                str(tp): {"leader": v.leader, "leader_epoch": v.leader_epoch, "isr": list(v.isr),
                          "replicas": list(v.replicas)}
                for tp, v in sorted(self._meta_partitions.items())
                if topics is None or tp.topic in topics
            },
        }

    def live_brokers(self) -> dict[int, BrokerInfo]:
        return dict(self._meta_brokers)

    def replicas(self) -> dict:
        """The local replicas as JSON-friendly values: {"t-0": {"role", "leader", ...}}."""
        return {str(tp): s.to_json() for tp, s in sorted(self.replica_manager.partitions().items())}

    def metrics(self) -> dict:
        """Counters: requests by api, rejected requests and partition errors by code, ISR work."""
        rm = self.replica_manager
        role_counts = getattr(rm, "role_counts", None)
        roles = role_counts() if role_counts is not None else Counter(s.role for s in rm.partitions().values())
        return {
            "requests": dict(self._requests),
            "rejections": dict(self._rejections),
            "partition_errors": dict(self._partition_errors),
            "isr_expands": self._isr["expands"],
            "isr_shrinks": self._isr["shrinks"],
            "isr_writes": self._isr["writes"],
            "isr_write_conflicts": self._isr["conflicts"],
            "isr_write_failures": self._isr["failures"],
            "isr_notifications": self._isr["notifications"],
            "isr_notification_failures": self._isr["notification_failures"],
            "replicas": dict(roles),
        }

    # -- the collector ---------------------------------------------------------------------------

    def _freeze_when_grown(self, applied: int) -> None:
        """After a large request, once the partitions this broker holds (replicas and metadata
        cache) doubled since the last freeze: freeze them out of the cyclic collector's scans
        when no large request came for FREEZE_QUIET_S (heap.freeze_survivors: one full
        collection, off the requests' path). Without it every full collection walks every
        replica, and a 50,000-partition LeaderAndIsr on a broker holding 100,000 partitions
        spent more in collections than in its own work."""
        if applied <= DECODE_IN_THREAD:
            return
        self._last_large = time.monotonic()
        if self._freeze_at is None and self._held() > max(FREEZE_FROM, 2 * self._frozen_size):
            self._freeze_at = asyncio.get_running_loop().call_later(FREEZE_QUIET_S, self._freeze)

    def _held(self) -> int:
        return len(self._leader_epochs) + len(self._meta_partitions)

    def _freeze(self) -> None:
        self._freeze_at = None
        if self._closed:
            return
        wait = self._last_large + FREEZE_QUIET_S - time.monotonic()
        if wait <= 0 and gcpause.held():
            wait = FREEZE_QUIET_S  # the node's controller is in a burst (its pause held): not now
        if wait > 0:  # a large request came meanwhile: wait for the quiet after it
            self._freeze_at = asyncio.get_running_loop().call_later(wait, self._freeze)
            return
        size = self._held()
        t0 = time.perf_counter()
        frozen, collected, _ = heap.freeze_survivors()
        self._frozen_size = size
        log.info("broker %d: %d partitions held, frozen out of the garbage collector's scans (%d objects, %d "
                 "collected first; %.0f ms)", self.broker_id, size, frozen, collected, (time.perf_counter() - t0) * 1000)

    # -- background task: ISR changes ------------------------------------------------------------

    async def run(self) -> None:
        """Write the replica manager's ISR changes as they fall due, until `close()`.

        ZooKeeper failures are retried later (logged); anything else propagates."""
        while not self._closed:
            deadline = self.replica_manager.next_isr_deadline()
            if self._pending_notifications:
                deadline = self._notify_retry_at if deadline is None else min(deadline, self._notify_retry_at)
            self._wakeup.clear()
            if deadline is None:
                await self._wakeup.wait()
            else:
                delay = (deadline - self.clock()) / 1000.0
                if delay > 0:
                    try:
                        async with asyncio.timeout(delay):
                            await self._wakeup.wait()
                    except TimeoutError:
                        pass
            if self._closed:
                break
            if not await self.update_isr():
                await asyncio.sleep(0.001)  # nothing was due after all: let time move on

    def wake(self) -> None:
        """Something changed when ISR changes fall due (a replication throttle): look again now."""
        self._wakeup.set()

    def close(self) -> None:
        """Stop `run()` (after the write in progress, if any)."""
        self._closed = True
        if self._freeze_at is not None:
            self._freeze_at.cancel()
            self._freeze_at = None
        self._wakeup.set()

    async def update_isr(self) -> bool:
        """Write the ISR changes due now and flush pending notifications; True if anything was done."""
        proposals = self.replica_manager.isr_proposals()
        did = bool(proposals)
        if proposals:
            await self._write_isr(proposals)
        if self._pending_notifications and self.clock() >= self._notify_retry_at:
            did = True
            await self._notify()
        return did

    async def _write_isr(self, proposals: list[IsrProposal]) -> None:
        rm = self.replica_manager
        for p in proposals:
            if p.leader_isr.zk_version < 0:  # -1 would create the znode: never from a leader
                raise ValueError(f"ISR proposal for {p.tp} has no znode version to expect: {p}")
        paths = [zkpaths.partition_state(p.tp.topic, p.tp.partition) for p in proposals]
        writes = [(path, zkdata.encode_partition_state(p.leader_isr), p.leader_isr.zk_version)
                  for path, p in zip(paths, proposals)]
        try:
            versions, conflicts = await self.zk.write_partition_states(None, writes)
        except ZkError as err:
            log.warning("broker %d: ISR write of %d partition(s) failed, will retry: %s",
                        self.broker_id, len(proposals), err)
            self._isr["failures"] += len(proposals)
            for p in proposals:
                rm.isr_write_failed(p)
            return
        for path, p in zip(paths, proposals):
            tp = p.tp
            if path in versions:
                self._committed(p, versions[path])
                continue
            if path not in conflicts:  # neither written nor in conflict: should not happen
                rm.isr_write_failed(p)
                self._isr["failures"] += 1
                continue
            current = self._decode_state(tp, conflicts[path])
            if current is not None and _same_content(current, p.leader_isr):
                self._committed(p, current.zk_version)  # our own write, whose answer was lost
                continue
            self._isr["conflicts"] += 1
            log.info("broker %d: ISR update of %s to %s conflicted: expected version %d, znode is %s",
                     self.broker_id, tp, list(p.leader_isr.isr), p.leader_isr.zk_version, current)
            rm.isr_conflict(p, current)
            if current is not None and current.leader == self.broker_id \
                    and current.leader_epoch == p.leader_isr.leader_epoch:
                self._pending_notifications[tp] = None  # a write of ours the controller may not know
        self._wakeup.set()

    def _committed(self, p: IsrProposal, zk_version: int) -> None:
        self.replica_manager.isr_committed(p, zk_version)
        self._isr["writes"] += 1
        self._isr["expands"] += bool(p.added)
        self._isr["shrinks"] += bool(p.removed)
        log.info("broker %d: ISR of %s %s -> %s (leader epoch %d, znode version %d)", self.broker_id, p.tp,
                 "expanded" if p.added and not p.removed else "shrunk" if p.removed and not p.added else "changed",
                 list(p.leader_isr.isr), p.leader_isr.leader_epoch, zk_version)
        self._pending_notifications[p.tp] = None

    def _decode_state(self, tp: TopicPartition, found: tuple[bytes, int] | None) -> LeaderIsr | None:
        if found is None:
            return None
        data, version = found
        try:
            return zkdata.decode_partition_state(data, version, tp=tp)
        except zkdata.ZnodeFormatError as err:
            log.error("broker %d: unreadable state znode: %s", self.broker_id, err)
            return None

    async def _notify(self) -> None:
        pending = sorted(self._pending_notifications)
        for start in range(0, len(pending), NOTIFICATION_MAX_PARTITIONS):
            batch = pending[start:start + NOTIFICATION_MAX_PARTITIONS]
            try:
                await self.zk.create(zkpaths.ISR_CHANGE_SEQUENCE_PREFIX,
                                     zkdata.encode_isr_change_notification(batch),
                                     sequential=True, make_parents=True)
            except ZkError as err:
                self._isr["notification_failures"] += 1
                self._notify_retry_at = self.clock() + RETRY_BACKOFF_MS
                log.warning("broker %d: ISR change notification failed, will retry: %s", self.broker_id, err)
                return
            self._isr["notifications"] += 1
            for tp in batch:
                self._pending_notifications.pop(tp, None)


def _same_content(a: LeaderIsr, b: LeaderIsr) -> bool:
    """Kafka's `checkLeaderAndIsrZkData`: equal apart from the znode version."""
    return (a.leader, a.leader_epoch, tuple(a.isr), a.controller_epoch) == \
        (b.leader, b.leader_epoch, tuple(b.isr), b.controller_epoch)


YIELD_EVERY = 2000
"""Partitions of a request applied between two turns of the event loop."""

_tp_of = operator.itemgetter(0)  # a PartitionView's partition (its first field)

DECODE_IN_THREAD = 5000
"""Requests with more partition states than this are decoded in a worker thread (pure work;
the loop keeps serving the ZooKeeper session meanwhile)."""


FREEZE_FROM = 20_000
"""Partitions held (replicas plus metadata cache) below which a broker never freezes them."""
FREEZE_QUIET_S = 1.0
"""How long after the last large request a grown broker freezes its partitions."""


def _paused_for(views):
    """The cyclic collector paused while a large request is applied: the replicas and cache
    entries it makes hold no cycles, and the collections their allocations would trigger walk
    everything the broker holds (a 50,000-partition LeaderAndIsr took 371 ms with them, 112
    without). Small requests leave it alone."""
    return gc_paused() if len(views) > DECODE_IN_THREAD else nullcontext()


async def _decode_views(states):
    topics = states.get("topics") if type(states) is dict else None
    count = sum(len(t[1]) for t in topics if type(t) is list and len(t) > 1 and type(t[1]) is list) \
        if type(topics) is list else 0
    if count > DECODE_IN_THREAD:
        return await asyncio.to_thread(_decode_paused, states)
    return Q.decode_views(states)


def _decode_paused(states):
    """A large request's views with the cyclic collector paused: the decoding allocates one
    tuple per partition and per partition name, none of them in a cycle, and on a broker that
    already holds 100,000 partitions the collections they would trigger cost twice the
    decoding itself (25,000 views: 72 ms with the collector, 24 ms without)."""
    with gc_paused():
        return Q.decode_views(states)
