"""The scratchpad of one decision: a mutable working copy that ends as `(state, commands)`.

Kafka's controller mutates its ControllerContext and fills a ControllerBrokerRequestBatch while
it handles an event, then sends the batch. A `Draft` is the first for one call of `step()`, and
holds the second (`draft.requests`, a `RequestBatch` of request_batch.py): it is created from a
state, mutated by the subdomain handlers, and frozen by `finish()`. Nothing outside `step()`
ever sees it, so `step()` stays a pure function.

Two rules of the asynchronous shell live here:

- Partition-state writes are optimistic: the draft records the value it expects ZooKeeper to
  hold after the write (znode version + 1), so later decisions build on it. Each write keeps the
  intents that produced it, so that a version conflict can be re-decided on fresh data.
- Broker requests of a decision that writes partition states wait for the write's outcome (Kafka
  sends its batch only after its synchronous ZooKeeper writes). They are parked in
  `state.pending[write_id]` as an `Outbox` and released by `PartitionStatesWritten`.
"""
from __future__ import annotations

from itertools import chain
from operator import attrgetter
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from . import commands as C
from .partition_views import remember_rows
from .partition_writes import PartitionWrites
from .machines import (
    PartitionState,
    ReplicaState,
    partition_transition_ok,
    replica_transition_ok,
)
from .request_batch import RequestBatch, emit_outbox
from .state import STATE_FIELDS, ControllerState, PartitionInfo, config_value, state_from
from .values import (
    NO_ZK_VERSION,
    LeaderIsr,
    ReplicaAssignment,
    TopicPartition,
)

_ABSENT = object()
_new = tuple.__new__  # builds the NamedTuple values of the hot path without a Python-level call


REJECTIONS_LISTED = 5
"""Rejections of one kind in one decision reported one by one; more are summarised."""


class _RejectionsOf(NamedTuple):
    """Where the rejections of one kind go among a decision's commands (see Draft.reject)."""

    kind: str


def _rejections(kind: str, reasons: list[str]) -> list:
    if len(reasons) <= REJECTIONS_LISTED:
        return [C.RejectRequest(kind=kind, reason=r) for r in reasons]
    shown = "; ".join(reasons[:REJECTIONS_LISTED])
    return [C.RejectRequest(kind=kind, reason=f"{len(reasons)} rejected: {shown}; "
                                              f"and {len(reasons) - REJECTIONS_LISTED} more")]


class DecisionParked(Exception):
    """Raised by a handler once its decision is sure to be dropped for a re-read of the ISRs it
    refused on (`Draft.unconfirmed`, see step.py), and nothing left to decide in it can add a
    partition to that re-read: the rest of the decision would be computed only to be thrown
    away. `step._drafted` catches it and parks the event as it would at the end. Only a handler
    that knows it is the last part of its decision may raise it: the re-read's partitions, in
    their order, are journaled with the decision's digest."""


_WORKING = tuple(name for name in STATE_FIELDS if name != "partitions")
"""The state fields a draft holds as attributes, from the state's own list (a field added to
`ControllerState` reaches every draft without being listed here); the partitions live in the
draft's image and its delta."""
_working_of = attrgetter(*_WORKING)
_PARTITIONS = STATE_FIELDS.index("partitions")


class Draft:
    """Working copy of a `ControllerState` for one step (see the module docstring)."""

    def __init__(self, state: ControllerState, cause: str, confirmed: frozenset = frozenset()):
        self.base = state
        self.cause = cause
        # the state's fields as attributes the handlers read and replace (`_WORKING`)
        self.__dict__.update(zip(_WORKING, _working_of(state)))
        self._image = state.partitions  # the columnar image as of the last freeze
        self._delta: dict = {}  # partitions changed since (None: removed), applied per chunk on freeze
        self._read: dict = {}  # partitions read from the image in this step (rows built once)
        self._rows: list | None = None  # every row's partition, once `scan` has read them all
        self._live = None
        self._offline_dirs: tuple | None = None  # (pairs, {tp: brokers}) of replicas_on_offline_dirs
        # election results by (rule, replicas, ISR), valid while the live brokers do not change:
        # a failover elects thousands of partitions with a handful of distinct shapes
        self.elections: dict[tuple, tuple | None] = {}
        # the partition-state writes, each with the intents that produced it
        self.writes: dict[TopicPartition, C.PartitionWrite] = {}
        # a whole-cluster decision's writes as columns (write_rows), before any other write
        self.bulk_writes: PartitionWrites | None = None
        self.intents: dict[TopicPartition, tuple] = {}
        self.requests = RequestBatch()  # the broker requests and replies
        self.commands: list = []
        self.rejections: dict[str, list[str]] = {}
        self.log: dict[tuple, list[TopicPartition]] = {}
        self.immediate: list = []  # commands that must precede this decision's writes
        self.dirty_topics: set[str] = set()  # topic znodes to rewrite (reassignment)
        self.plan_dirty = False  # /admin/reassign_partitions to rewrite
        # partitions whose state this decision has just read from ZooKeeper, and those whose
        # election it refused on a cached ISR (see step.py: such a refusal is confirmed first)
        self.confirmed = confirmed
        self.unconfirmed: dict[TopicPartition, None] = {}

    # -- reads ---------------------------------------------------------------------------------

    @property
    def partitions(self):
        """The partitions as they stand, frozen into an image (the delta so far applied per
        chunk): for scans, and for the columns of whole-cluster decisions."""
        if self._delta:
            self._image = self._image.with_changes(self._delta)
            self._read.update(self._delta)
            self._delta = {}
        return self._image

    @property
    def known(self) -> dict:
        """The partitions read or built in this step, as the frozen image holds them."""
        self.partitions  # noqa: B018 (freezes the delta first)
        return self._read

    def seed(self, infos: dict) -> None:
        """Partitions the decision built itself, exactly as the image reads them back (a new
        controller's, from its snapshot): kept so that they are not built again from rows."""
        self.partitions  # noqa: B018 (freezes the delta first)
        self._read.update(infos)
        if len(infos) == self._image.count == self._image.size:
            self._rows = list(chain.from_iterable(self._image.tp_chunks))

    def replace_image(self, image) -> None:
        """Take the image a whole-cluster decision wrote its results into (the delta is empty:
        such a decision starts from `partitions`)."""
        assert not self._delta, "a whole-cluster decision starts from a frozen image"
        self._image = image
        self._read = {}
        self._rows = None

    def scan(self) -> list[tuple[TopicPartition, PartitionInfo]]:
        """Every partition with its value as it stands (row order; sort for a decision order),
        built a chunk at a time the first time and kept for the reads that follow (a failover
        scans the partitions five times)."""
        image = self.partitions
        read = self._read
        if self._rows is not None and len(self._rows) == image.size:
            return [(tp, info) for tp in self._rows if (info := read[tp]) is not None]
        items = image.items()
        rows = self._rows = list(chain.from_iterable(image.tp_chunks))
        if len(items) != len(rows):
            read.update(dict.fromkeys(rows))
        read.update(items)
        return items

    def info(self, tp: TopicPartition) -> PartitionInfo | None:
        info = self._delta.get(tp, _ABSENT)
        if info is _ABSENT:
            info = self._read.get(tp, _ABSENT)
            if info is _ABSENT:
                info = self._read[tp] = self._image.get(tp)
        return info

    def read_many(self, tps: Iterable[TopicPartition]) -> None:
        """Read the partitions of `tps` this step has neither changed nor read, a chunk at a
        time (`PartitionImage.get_many`), for the `info` calls that follow (a re-read's
        states, compared one by one with the cached ones)."""
        delta, read = self._delta, self._read
        unread = [tp for tp in tps if tp not in delta and tp not in read]
        if unread:
            read.update(zip(unread, self._image.get_many(unread)))

    def assignments(self, tps: Sequence[TopicPartition]) -> list[ReplicaAssignment | None]:
        """`info(tp).assignment` of each of `tps` as it stands (None: no such partition): the
        partitions this step changed or read from their values, the others from the image's
        replica columns in bulk (`PartitionImage.assignments_of`), nothing kept."""
        delta, read = self._delta, self._read
        out: list = []
        plain: list[int] = []
        for k, tp in enumerate(tps):
            info = delta.get(tp, _ABSENT)
            if info is _ABSENT:
                info = read.get(tp, _ABSENT)
                if info is _ABSENT:
                    plain.append(k)
                    out.append(None)
                    continue
            out.append(None if info is None else info.assignment)
        if plain:
            for k, a in zip(plain, self._image.assignments_of([tps[k] for k in plain])):
                out[k] = a
        return out

    def replica_states(self, tp: TopicPartition) -> list[tuple[int, ReplicaState]] | None:
        """`(replica, state)` of each assigned replica of `tp` as it stands, in assignment order
        (None: no such partition), as `info(tp).replica_state(r)` gives them: from the image's
        rows when this step has neither changed nor read the partition (no `PartitionInfo`
        built, none kept)."""
        info = self._delta.get(tp, _ABSENT)
        if info is _ABSENT:
            info = self._read.get(tp, _ABSENT)
            if info is _ABSENT:
                return self._image.replica_states(tp)
        if info is None:
            return None
        return [(r, info.replica_state(r)) for r in info.assignment.replicas]

    def replica_state_sets(self, groups: Sequence[Sequence[TopicPartition]]) -> list[set[ReplicaState]]:
        """For each group of partitions, the states `replica_states` gives for their replicas,
        as one set: the partitions this step changed or read from their values, the others
        from the image's columns in bulk (`PartitionImage.replica_state_sets`)."""
        delta, read = self._delta, self._read
        if not delta and not read:
            return self._image.replica_state_sets(groups)
        # (topic deletion asks for every queued topic on every StopReplica answer, when the step
        # has touched a few partitions: a group none of them is in goes to the image as it is,
        # the membership test done in C rather than two lookups a partition here)
        touched = delta.keys() | read.keys()
        found: list[set[ReplicaState]] = []
        plain: list[Sequence[TopicPartition]] = []
        for members in groups:
            mine: set[ReplicaState] = set()
            if touched.isdisjoint(members):
                found.append(mine)
                plain.append(members)
                continue
            rest = []
            for tp in members:
                info = delta.get(tp, _ABSENT)
                if info is _ABSENT:
                    info = read.get(tp, _ABSENT)
                    if info is _ABSENT:
                        rest.append(tp)
                        continue
                if info is not None:
                    mine.update(map(info.replica_state, info.assignment.replicas))
            found.append(mine)
            plain.append(rest)
        for mine, more in zip(found, self._image.replica_state_sets(plain)):
            mine |= more
        return found

    @property
    def live(self) -> frozenset[int]:
        """Live brokers not shutting down (Kafka's liveBrokerIds)."""
        if self._live is None:
            self._live = frozenset(self.brokers.keys()) - self.shutting_down
        return self._live

    @property
    def live_or_shutting_down(self) -> frozenset[int]:
        return frozenset(self.brokers.keys())

    def on_offline_dirs(self, tp: TopicPartition) -> frozenset[int]:
        """The brokers whose replica of `tp` is on a failed log dir (Kafka's
        replicasOnOfflineDirs): live or not, they do not count as online for its elections.
        Empty but for the few partitions of a failed disk, until its broker restarts."""
        pairs = self.replicas_on_offline_dirs
        if not pairs:
            return frozenset()
        cached = self._offline_dirs
        if cached is None or cached[0] is not pairs:
            by_tp: dict[TopicPartition, set[int]] = {}
            for t, b in pairs:
                by_tp.setdefault(t, set()).add(b)
            cached = self._offline_dirs = (pairs, {t: frozenset(bs) for t, bs in by_tp.items()})
        return cached[1].get(tp, frozenset())

    def offline_dir_cells(self, image, matrix: np.ndarray) -> np.ndarray:
        """A mask over `matrix` (a broker-id column of `image`: replicas or ISR, every row) of
        the cells whose replica is on a failed log dir (`replicas_on_offline_dirs`)."""
        out = np.zeros(matrix.shape, bool)
        pairs = self.replicas_on_offline_dirs
        if pairs:
            pairs = sorted(pairs)
            at = image.rows_of([tp for tp, _ in pairs]).tolist()
            for row, (_, broker) in zip(at, pairs):
                if row >= 0:
                    out[row] |= matrix[row] == broker
        return out

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        info = self.topics.get(topic)
        return [_new(TopicPartition, (topic, p)) for p in range(info.partition_count)] if info else []

    def unclean_allowed(self, topic: str) -> bool:
        value = config_value(self.topic_configs.get(topic), "unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_default()
        return value.strip().lower() == "true"

    def queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    # -- writes to the working copy ---------------------------------------------------------------

    def put(self, tp: TopicPartition, info: PartitionInfo) -> None:
        self._delta[tp] = info

    def drop(self, tp: TopicPartition) -> None:
        self._delta[tp] = None

    def set_brokers(self, brokers) -> None:
        self.brokers = brokers
        self._live = None
        self.elections.clear()

    def set_shutting_down(self, ids: frozenset[int]) -> None:
        self.shutting_down = ids
        self._live = None
        self.elections.clear()

    def forget_offline_dirs(self, brokers: Iterable[int] = (), topic: str | None = None) -> None:
        """Drop the failed-log-dir replicas of brokers that start or fail (their disks are
        replaced while they are down; Kafka's onBrokerStartup and onBrokerFailure) or of a topic
        that is gone (`replicas_on_offline_dirs`)."""
        pairs = self.replicas_on_offline_dirs
        if pairs:
            brokers = frozenset(brokers)
            kept = frozenset(p for p in pairs if p[1] not in brokers and p[0].topic != topic)
            if len(kept) != len(pairs):
                self.replicas_on_offline_dirs = kept

    def record(self, from_state, to_state, tp: TopicPartition, replica: int = -1, ok: bool = True, detail: str = "") -> None:
        """Add one entry to the state-change log (grouped by transition in `finish`)."""
        key = (from_state, to_state, replica, ok, detail)
        group = self.log.get(key)
        if group is None:
            self.log[key] = [tp]
        else:
            group.append(tp)

    def record_many(self, from_state, to_state, tps: list, replica: int = -1) -> None:
        """`record` of one successful transition for many partitions, in their order."""
        key = (from_state, to_state, replica, True, "")
        group = self.log.get(key)
        if group is None:
            self.log[key] = list(tps)
        else:
            group.extend(tps)

    def reject(self, kind: str, reason: str) -> None:
        """Report a rejected input. A decision that rejects many inputs of one kind (a 15,000-entry
        reassignment naming unknown partitions) reports them as one `RejectRequest` listing the
        first few, so that one bad request is one log line, not thousands."""
        reasons = self.rejections.get(kind)
        if reasons is None:
            self.rejections[kind] = [reason]
            self.commands.append(_RejectionsOf(kind))
        else:
            reasons.append(reason)

    def command(self, command) -> None:
        self.commands.append(command)

    # -- state machines: checked transitions ----------------------------------------------------

    def move_partition(self, tp: TopicPartition, target: PartitionState, info: PartitionInfo | None = None) -> bool:
        """Move a partition to `target` if the table allows it; log either way."""
        info = info if info is not None else self.info(tp)
        current = info.state if info is not None else PartitionState.NON_EXISTENT
        if not partition_transition_ok(current, target):
            self.record(current, target, tp, ok=False, detail="illegal transition")
            return False
        if info is not None and current is not target:
            self.put(tp, _new(PartitionInfo, (info.assignment, info.leader_isr, target, info.replica_states)))
        if current is not target or target is PartitionState.ONLINE:
            self.record(current, target, tp)
        return True

    def move_replica(self, tp: TopicPartition, replica: int, target: ReplicaState) -> bool:
        info = self.info(tp)
        if info is None:
            self.record(ReplicaState.NON_EXISTENT, target, tp, replica, ok=False, detail="unknown partition")
            return False
        current = info.replica_state(replica)
        if not replica_transition_ok(current, target):
            self.record(current, target, tp, replica, ok=False, detail="illegal transition")
            return False
        if current is not target:
            new_state = None if target is ReplicaState.NON_EXISTENT else target
            self.put(tp, info.with_replica_state(replica, new_state))
            self.record(current, target, tp, replica)
        return True

    # -- partition state writes ---------------------------------------------------------------

    def write_leader_isr(self, tp: TopicPartition, new: LeaderIsr, intent: tuple,
                         info: PartitionInfo | None = None, state: PartitionState | None = None) -> None:
        """Record a conditional write of `new` (whose zk_version is the version expected) and
        keep the optimistic result (version + 1) in the working copy, optionally moving the
        partition to `state` (already checked and logged by the caller) in the same put."""
        info = info if info is not None else self.info(tp)
        if self.bulk_writes is not None:
            self._spill()
        first = self.writes.get(tp)
        if first is None:
            expected = new.zk_version
            self.intents[tp] = (intent,)
        else:
            expected = first.expected_version  # two changes in one step: one write
            self.intents[tp] = self.intents[tp] + (intent,)
        stored = LeaderIsr(new.leader, new.leader_epoch, new.isr, new.controller_epoch,
                           0 if expected == NO_ZK_VERSION else expected + 1)
        self.writes[tp] = C.PartitionWrite(tp, stored, expected)
        self.put(tp, PartitionInfo(info.assignment, stored, state if state is not None else info.state,
                                   info.replica_states))

    def write_change(self, tp: TopicPartition, info: PartitionInfo, leader: int, isr: tuple[int, ...], intent: tuple,
                     state: PartitionState | None = None) -> None:
        """`write_leader_isr` of Kafka's `newLeaderAndIsr` on the partition's current state (the
        leader epoch bumped by one, this controller's epoch), building the value only once:
        a failover makes 10,000 of these."""
        li = info.leader_isr
        if self.bulk_writes is not None:
            self._spill()
        first = self.writes.get(tp)
        if first is None:
            expected = li.zk_version
            self.intents[tp] = (intent,)
        else:
            expected = first.expected_version
            self.intents[tp] = self.intents[tp] + (intent,)
        stored = _new(LeaderIsr, (leader, li.leader_epoch + 1, isr if isr.__class__ is tuple else tuple(isr),
                                  self.epoch, 0 if expected == NO_ZK_VERSION else expected + 1))
        self.writes[tp] = C.PartitionWrite(tp, stored, expected)
        self.put(tp, _new(PartitionInfo, (info.assignment, stored, state if state is not None else info.state,
                                          info.replica_states)))

    def write_rows(self, tps: list, rows: np.ndarray, leader: np.ndarray, leader_epoch: np.ndarray,
                   isr: np.ndarray, expected: np.ndarray | None = None) -> dict:
        """`write_change` for many partitions at once, from columns aligned with `rows` (the
        image's row of each of `tps`, in write order): each write expects the version the image
        holds (or `expected`, NO_ZK_VERSION for a znode to create) and stores this controller's
        epoch. The whole-cluster decisions call it before `replace_image`; a second call in the
        step (a bounce's startup after its failure) follows the first's writes, merging a
        partition written by both as `write_change` does (the caller passes the first write's
        expected version for it); returns the columns to write into the image for `rows`."""
        assert not self.writes, "write_rows makes a decision's first writes, or follows another write_rows"
        if expected is None:
            expected = self._image.column("zk_version")[rows]
        stored = np.where(expected == NO_ZK_VERSION, 0, expected + 1).astype(np.int32)
        leader = leader.astype(np.int32)
        leader_epoch = leader_epoch.astype(np.int32)
        epochs = np.full(len(rows), self.epoch, np.int32)
        if len(rows):
            writes = PartitionWrites(list(tps), leader, leader_epoch, isr, epochs, stored, expected)
            self.bulk_writes = writes if self.bulk_writes is None else self.bulk_writes.then(writes)
        return {"leader": leader, "leader_epoch": leader_epoch, "isr": isr, "controller_epoch": epochs,
                "zk_version": stored}

    @property
    def has_writes(self) -> bool:
        return bool(self.writes) or self.bulk_writes is not None

    def _spill(self) -> None:
        """A write after `write_rows` in the same step: the columns become `PartitionWrite`s
        (in their order, first), so that the new write can merge with one of them."""
        bulk, self.bulk_writes = self.bulk_writes, None
        self.writes = dict(zip(bulk.tps, bulk.writes())) | self.writes

    # -- finishing ------------------------------------------------------------------------------

    def finish(self) -> tuple[ControllerState, tuple]:
        """Freeze the working copy and produce the commands of this decision."""
        if self._delta:
            # as `partitions` does, telling the image what this step read of the partitions it
            # changes: a change of leader-and-ISR alone is then written without reading its row
            self._image = self._image.with_changes(self._delta, before=self._read)
            self._read.update(self._delta)
            self._delta = {}
        commands: list = list(self.immediate)
        log = self._log_command()
        if log is not None:
            commands.append(log)
        outbox = self.requests.close(self.brokers, self.has_writes, self.intents, self.cause)
        if self.has_writes:  # (the draft ends here: its own fields become the state's)
            write_id = self.next_write_id
            self.next_write_id += 1
            commands.append(self._write_command(write_id))
            self.pending = self.pending.set(write_id, outbox)
        for c in self.commands:
            if c.__class__ is _RejectionsOf:
                commands.extend(_rejections(c.kind, self.rejections[c.kind]))
            else:
                commands.append(c)
        parts = self.partitions
        for topic in sorted(self.dirty_topics):
            info = self.topics.get(topic)
            if info is not None:
                # the assignments alone, from the replica columns (a reassignment request
                # rewrites every topic it touches: building each partition cost ~2 ms a request)
                tps = self.partitions_of(topic)
                found = parts.assignments_of(tps)
                if None in found:  # (cannot happen: a topic's partitions are all in the image)
                    found = [parts[tp].assignment for tp in tps]
                commands.append(C.WriteTopicAssignment(topic=topic, partitions=tuple(
                    (tp.partition, a) for tp, a in zip(tps, found))))
        if self.plan_dirty:
            commands.append(C.WriteReassignmentPlan(partitions=self.reassignment_plan,
                                                    expected_version=self.plan_zk_version))
            # the version the znode will have once this lands (an empty plan deletes it)
            self.plan_zk_version = self.plan_zk_version + 1 if self.reassignment_plan and self.plan_zk_version >= 0 else -1
        state = self._state()
        if outbox is not None:
            noted = self.requests.noted_rows(outbox)
            if not self.has_writes:
                commands.extend(emit_outbox(state, outbox, known=self._read,
                                            hints={id(tps): rows for tps, rows in noted}))
            else:  # released in parts once the writes land: their rows kept for each part
                index = state.partitions.index
                for tps, rows in noted:
                    remember_rows(tps, index, rows)
        return state, tuple(commands)

    def snapshot_state(self) -> ControllerState:
        """The working copy as a state value, without finishing the draft."""
        return self._state()

    def _state(self) -> ControllerState:
        values = list(_working_of(self))
        values.insert(_PARTITIONS, self.partitions)
        return state_from(*values)

    def add_intents(self, more: dict) -> None:
        """Record the intents of a whole-cluster decision's writes (`more`: a dict made for this
        call, taken over). Into an empty draft it is kept as it is: merging 100,000 entries into
        an empty dict costs as much as making them (about 9 ms)."""
        if self.intents:
            self.intents.update(more)
        else:
            self.intents = more

    def _write_command(self, write_id: int) -> C.WritePartitionStates:
        if self.bulk_writes is not None:  # (only those: a later write spills them)
            return C.WritePartitionStates(write_id=write_id, writes=self.bulk_writes)
        return C.WritePartitionStates(write_id=write_id, writes=tuple(self.writes.values()))

    def _log_command(self) -> C.LogStateChanges | None:
        if not self.log:
            return None
        entries = tuple(
            C.StateChange(from_state=str(f), to_state=str(t), partitions=tuple(tps), replica=r, ok=ok, detail=d)
            for (f, t, r, ok, d), tps in self.log.items()
        )
        return C.LogStateChanges(cause=self.cause, entries=entries)
