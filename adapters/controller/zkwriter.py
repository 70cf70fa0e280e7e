"""Executes the core's ZooKeeper write commands, every one fenced by the controller epoch.

Partition states go out as a few large epoch-checked multi-ops sent concurrently
(`ZkSession.write_states`, by index), or, in the benchmark's other modes, in the pattern of
adapters/controller/zkpattern.py (Kafka <= 1.0's one at a time, Kafka 2.4's two-op multi per partition,
10 in flight). Their outcome returns to the loop as `PartitionStatesWritten`. Other writes (topic
znodes, admin znodes) are applied in command order by one task.

The first fenced write flips `fenced`: the executor then runs nothing more, and the loop gets a
`ControllerFenced` event so that the core resigns.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Callable

from controller_core import commands as C
from controller_core import events as E
from controller_core.partition_writes import PartitionWrites

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import Delete, Fenced, NoNode, SetData, TransactionFailed, ZkError
from adapters.controller.zkpattern import PATTERNS

log = logging.getLogger("kctl.zkwriter")

PROGRESS_MIN = 4000
PROGRESS_PARTS = 4
"""A write of at least `PROGRESS_MIN` partition states reports its progress each time another
quarter of it has landed (`PartitionStatesWritten(final=False)`), so those partitions'
LeaderAndIsr and UpdateMetadata go out while ZooKeeper writes the rest: on a 10,000-partition
failover brokers then work in parallel with ZooKeeper instead of after it. A fixed number of
reports per write, because each one costs a journal fsync and a pass over the write's
requests."""

ORDERED_ATTEMPTS = 5
"""Tries of a topic or admin znode write whose multi-op failed because the tree changed."""


class ZkWriter:
    def __init__(self, zk, put_event: Callable, *, clock: Callable[[], int] = lambda: int(time.time() * 1000),
                 pattern=PATTERNS["batched"], on_written: Callable | None = None):
        self.zk = zk
        self.put_event = put_event
        self.clock = clock
        self.pattern = pattern  # how partition states are written (adapters/controller/zkpattern.py)
        self.on_written = on_written  # benchmarks: (write_id, count, seconds)
        self.fenced = False
        self._ordered: asyncio.Queue = asyncio.Queue()
        # admin znodes this controller rewrote or deleted: path -> (version, data), (-1, None) for
        # a deletion; the watches use it to tell their echo from a new request (adapters/controller/watches.py)
        self.own_writes: dict[str, tuple[int, bytes | None]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._ordered_task: asyncio.Task | None = None

    def in_flight(self) -> int:
        return len(self._tasks) + self._ordered.qsize()

    def reset(self) -> None:
        """A new term as controller: writes are allowed again."""
        self.fenced = False
        self.own_writes.clear()

    # -- partition states ----------------------------------------------------------------------

    def write_partition_states(self, command: C.WritePartitionStates, epoch_zk_version: int) -> None:
        task = asyncio.create_task(self._write_states(command, epoch_zk_version), name=f"zk-write-{command.write_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_states(self, command: C.WritePartitionStates, epoch_zk_version: int) -> None:
        # columns, by write index: at 100,000 partitions a dict per path (by_path, predicted)
        # and a tuple per write cost more than ZooKeeper took to write them (notes:
        # docs/notes/issue-17-zk-writes.md)
        writes = command.writes
        if isinstance(writes, PartitionWrites):  # a whole-cluster decision's: read from its columns
            tps = list(writes.tps)
            states = writes.state_rows()
            expected = writes.expected.tolist()
            predicted = writes.zk_version.tolist()
        else:
            tps = [w.tp for w in writes]
            states = [w.leader_isr for w in writes]
            expected = [w.expected_version for w in writes]
            predicted = [li[4] for li in states]  # each state's zk_version: what it will be at once written
        paths = list(itertools.starmap(zkpaths.partition_state, tps))
        progress = None
        if len(writes) >= PROGRESS_MIN and self.pattern.progress:
            progress = _Progress(self, command.write_id, tps, predicted, len(writes) // PROGRESS_PARTS)
        t0 = time.perf_counter()
        try:
            versions, conflicts = await self.pattern.write_columns(
                self.zk, epoch_zk_version, paths, states, expected, zkdata.encode_partition_states,
                on_landed=progress.landed if progress is not None else None)
        except Fenced as exc:
            self._fence(f"partition-state write {command.write_id} failed the controller epoch check: {exc}")
            return
        except ZkError as exc:
            # connection trouble: whether each write landed is unknown, so the znodes are read
            # back and the outcome reports what ZooKeeper holds (the core waits for it)
            log.error("partition-state write %d failed (%s); reading the states back", command.write_id, exc)
            if self.fenced:
                return
            read = await self._read_back(command.write_id, paths, zkdata.encode_partition_states(states), expected)
            if read is None:
                return
            versions, conflicts = read
        if self.on_written is not None:
            self.on_written(command.write_id, len(writes), time.perf_counter() - t0)
        conflict_values = []
        for i, current in conflicts.items():
            tp = tps[i]
            if current is None:
                conflict_values.append((tp, None))
            else:
                data, version = current
                try:
                    conflict_values.append((tp, zkdata.decode_partition_state(data, version, tp=tp)))
                except zkdata.ZnodeFormatError as exc:
                    log.error("unreadable state znode %s: %s", paths[i], exc)
                    conflict_values.append((tp, None))
        # a write that landed is at its predicted version (expected + 1, or 0 for a create): only
        # surprises are listed, so the outcome of 10,000 clean writes is a few bytes to journal
        surprises = () if versions == predicted else tuple(
            (tps[i], v) for i, (v, p) in enumerate(zip(versions, predicted)) if v is not None and v != p)
        self.put_event(E.PartitionStatesWritten(
            at=self.clock(), write_id=command.write_id, versions=surprises, conflicts=tuple(conflict_values)))

    async def _read_back(self, write_id: int, paths: list[str], data: list[bytes],
                         expected: list[int]) -> tuple[list, dict] | None:
        """(versions, conflicts) by index, as ZooKeeper holds the znodes now: a znode holding
        this write's data at the expected version + 1 landed, anything else is a conflict with
        its current content. Retried (with backoff) until ZooKeeper answers; gives up only when
        this controller is fenced or the writer closes. A session that expired meanwhile means a
        resignation, after which the core ignores the outcome."""
        delay = 0.1
        while not self.fenced:
            try:
                current = await self.zk.get_many(paths)
            except ZkError as exc:
                log.warning("reading back write %d failed (%s); retrying in %.1fs", write_id, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            versions: list = [None] * len(paths)
            conflicts = {}
            for i, path in enumerate(paths):
                now = current.get(path)
                if now is not None and now[0] == data[i] and now[1].version == expected[i] + 1:
                    versions[i] = now[1].version
                else:
                    conflicts[i] = None if now is None else (now[0], now[1].version)
            return versions, conflicts
        return None

    # -- other znodes ---------------------------------------------------------------------------

    def write(self, command, epoch_zk_version: int) -> None:
        if self._ordered_task is None or self._ordered_task.done():
            self._ordered_task = asyncio.create_task(self._ordered_writes(), name="zk-ordered-writes")
        self._ordered.put_nowait((command, epoch_zk_version))

    async def _ordered_writes(self) -> None:
        while True:
            command, epoch_zk_version = await self._ordered.get()
            if self.fenced:
                continue
            for attempt in range(1, ORDERED_ATTEMPTS + 1):
                try:
                    ops = await self._ops(command)
                    if ops:
                        await self.zk.multi(ops, epoch_zk_version=epoch_zk_version)
                except Fenced as exc:
                    self._fence(f"{type(command).__name__} failed the controller epoch check: {exc}")
                except (TransactionFailed, ZkError) as exc:
                    if _conditional(command) and isinstance(exc, TransactionFailed):
                        # an admin wrote a newer request meanwhile: ours is not applied, and the
                        # watch delivers theirs
                        self.own_writes.pop(_admin_path(command), None)
                        log.info("%s not applied: the znode changed since it was read (%s)",
                                 type(command).__name__, exc)
                        break
                    # the ops are computed from what exists: a znode created or removed meanwhile
                    # (a child under a deletion marker, a plan deleted by hand) is seen on retry
                    if attempt < ORDERED_ATTEMPTS and not self.fenced:
                        log.info("%s failed (%s); retrying", type(command).__name__, exc)
                        await asyncio.sleep(0.05 * attempt)
                        continue
                    log.warning("%s failed: %s", type(command).__name__, exc)
                    self.put_event(E.ZnodeWriteFailed(at=self.clock(), what=_describe(command), reason=str(exc)))
                break
            if isinstance(command, C.DeleteTopic) and not self.fenced:
                # after the multi's answer: a topic listing read after the removal is queued
                # after this report (one session, answers in order), so the core can tell a
                # listing read before it (state.removing_topics)
                self.put_event(E.TopicZnodesDeleted(at=self.clock(), topic=command.topic))

    async def _ops(self, c) -> list:
        if isinstance(c, C.WriteTopicAssignment):
            data = zkdata.encode_topic_assignment(dict(c.partitions))
            return [SetData(zkpaths.topic(c.topic), data, -1)]
        if isinstance(c, C.DeleteTopic):
            # whole subtrees: anything created under the deletion marker or the config znode
            # must not keep the topic alive (a multi-op cannot delete recursively)
            ops = []
            for path in (zkpaths.topic(c.topic), zkpaths.config_topic(c.topic), zkpaths.delete_topic(c.topic)):
                ops.extend(await self._delete_tree_ops(path))
            return ops
        if isinstance(c, C.DeleteTopicDeletionRequests):
            ops = []
            for topic in c.topics:
                path = zkpaths.delete_topic(topic)
                if await self.zk.exists(path) is not None:
                    ops.append(Delete(path, -1))
            return ops
        if isinstance(c, C.WriteReassignmentPlan):
            path = zkpaths.REASSIGN_PARTITIONS
            if c.expected_version >= 0:  # conditional: see ReassignmentRequested / the core's plan_zk_version
                if not c.partitions:
                    self.own_writes[path] = (-1, None)
                    return [Delete(path, c.expected_version)]
                data = zkdata.encode_reassignment(c.partitions)
                self.own_writes[path] = (c.expected_version + 1, data)
                return [SetData(path, data, c.expected_version)]
            if not c.partitions:
                return [Delete(path, -1)] if await self.zk.exists(path) is not None else []
            return [SetData(path, zkdata.encode_reassignment(c.partitions), -1)]
        if isinstance(c, C.DeletePreferredElectionRequest):
            path = zkpaths.PREFERRED_REPLICA_ELECTION
            if c.expected_version >= 0:
                self.own_writes[path] = (-1, None)
                return [Delete(path, c.expected_version)]
            return [Delete(path, -1)] if await self.zk.exists(path) is not None else []
        raise TypeError(f"not a znode write: {c!r}")

    async def _delete_tree_ops(self, root: str) -> list:
        """Delete ops for a subtree, leaves first (a multi cannot delete recursively)."""
        ops: list = []

        async def walk(path: str) -> None:
            try:
                children = await self.zk.get_children(path)
            except NoNode:
                return
            for child in children:
                await walk(f"{path}/{child}")
            ops.append(Delete(path, -1))

        await walk(root)
        return ops

    def _fence(self, reason: str) -> None:
        if not self.fenced:
            self.fenced = True
            log.error("fenced: %s", reason)
            self.put_event(E.ControllerFenced(at=self.clock(), reason=reason))

    async def drain(self) -> None:
        """Wait for the writes in flight (tests and clean shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        while not self._ordered.empty():
            await asyncio.sleep(0.01)

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._ordered_task is not None:
            self._ordered_task.cancel()


def _describe(c) -> str:
    if isinstance(c, (C.WriteTopicAssignment, C.DeleteTopic)):
        return f"{type(c).__name__}({c.topic})"
    return type(c).__name__


class _Progress:
    """Collects the chunks of one large write as they commit and reports them in groups of
    `every` partitions (only writes that landed at their predicted version)."""

    def __init__(self, writer: "ZkWriter", write_id: int, tps: list, predicted: list[int], every: int):
        self.writer = writer
        self.write_id = write_id
        self.tps = tps
        self.predicted = predicted
        self.every = every
        self.reports = 0
        self.buffer: list = []

    def landed(self, start: int, versions: list[int]) -> None:
        end = start + len(versions)
        if versions == self.predicted[start:end]:  # the usual case, compared in C
            self.buffer.extend(self.tps[start:end])
        else:
            tps, predicted = self.tps, self.predicted
            self.buffer.extend(tps[i] for i, v in enumerate(versions, start) if v == predicted[i])
        if (len(self.buffer) >= self.every and self.reports < PROGRESS_PARTS - 1
                and not self.writer.fenced):
            self.reports += 1
            landed, self.buffer = tuple(self.buffer), []
            self.writer.put_event(E.PartitionStatesWritten(at=self.writer.clock(), write_id=self.write_id,
                                                           landed=landed, final=False))


def _conditional(c) -> bool:
    """An admin-znode write conditional on the version the controller read."""
    return isinstance(c, (C.WriteReassignmentPlan, C.DeletePreferredElectionRequest)) and c.expected_version >= 0


def _admin_path(c) -> str:
    return zkpaths.REASSIGN_PARTITIONS if isinstance(c, C.WriteReassignmentPlan) else zkpaths.PREFERRED_REPLICA_ELECTION
