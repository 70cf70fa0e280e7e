"""Carries out the core's commands: each kind goes to the adapter that owns that I/O.

`execute()` never waits for I/O: ZooKeeper writes run as tasks whose outcomes come back as
events, broker requests go to the send queues, replies are handed to the waiting request
handlers. Once a write has been fenced, nothing more is executed until the core has processed
the `ControllerFenced` event and a new term starts (the contract: a fenced controller applies
nothing).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import PartitionState
from controller_core.state import ControllerState

from adapters.observability import statelog
from controller_core.machines import ReplicaState

log = logging.getLogger("kctl.controller")

_ONLINE = str(PartitionState.ONLINE)
_ELECTED_FROM = (str(PartitionState.OFFLINE), str(PartitionState.ONLINE))

_ZK_WRITES = (C.WriteTopicAssignment, C.DeleteTopic, C.DeleteTopicDeletionRequests,
              C.WriteReassignmentPlan, C.DeletePreferredElectionRequest)
_SENDS = (C.SendLeaderAndIsr, C.SendUpdateMetadata, C.SendStopReplica)


class Timers:
    """Named one-shot timers that fire `TimerFired` into the loop."""

    def __init__(self, put_event: Callable, clock: Callable[[], int]):
        self.put_event = put_event
        self.clock = clock
        self.handles: dict[str, asyncio.TimerHandle] = {}

    def schedule(self, name: str, delay_ms: int) -> None:
        self.cancel(name)
        loop = asyncio.get_running_loop()
        self.handles[name] = loop.call_later(delay_ms / 1000, self._fire, name)

    def _fire(self, name: str) -> None:
        self.handles.pop(name, None)
        self.put_event(E.TimerFired(at=self.clock(), name=name))

    def cancel(self, name: str) -> None:
        handle = self.handles.pop(name, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for name in list(self.handles):
            self.cancel(name)


class Replies:
    """Requests from brokers and tools that wait for the controller's answer."""

    def __init__(self):
        self.next_id = 1
        self.waiting: dict[int, asyncio.Future] = {}

    def open(self) -> tuple[int, asyncio.Future]:
        request_id = self.next_id
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        return request_id, future

    def resolve(self, request_id: int, value) -> None:
        future = self.waiting.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(value)

    def forget(self, request_id: int) -> None:
        self.waiting.pop(request_id, None)


class Executor:
    """Routes commands. `zk` executes ZooKeeper writes (adapters/controller/zkwriter.py), `senders` the
    broker requests, `watches` the partition-state watches, `resign` the election's resignation.
    `controller_id` and `event_seq` (the journal seq of the event being decided) label the
    state-change log. The counters are read by the metrics (adapters/observability/metrics.py)."""

    def __init__(self, *, zk, senders, replies: Replies, timers: Timers, watches, resign: Callable[[str], None],
                 clock: Callable[[], int] = lambda: int(time.time() * 1000), controller_id: int = -1,
                 event_seq: Callable[[], int | None] = lambda: None):
        self.zk = zk
        self.senders = senders
        self.replies = replies
        self.timers = timers
        self.watches = watches
        self.resign = resign
        self.clock = clock
        self.controller_id = controller_id
        self.event_seq = event_seq
        self._brokers = None
        self.rejections = 0
        self.unclean_elections = 0
        self.leader_elections = 0

    def execute(self, commands: tuple, state: ControllerState) -> None:
        if not state.active:
            self._brokers = None
            self.senders.stop_all()
            self.timers.cancel_all()
            if self.watches is not None:
                self.watches.unwatch_all()
        elif state.brokers is not self._brokers:
            self._brokers = state.brokers
            self.senders.sync_brokers(state.brokers)
        if self.zk.fenced and not any(isinstance(c, C.Resign) for c in commands):
            return
        sends = []
        for c in commands:
            kind = type(c)
            if kind is C.WritePartitionStates:
                self.zk.write_partition_states(c, state.epoch_zk_version)
            elif kind in _SENDS:
                sends.append(c)
            elif kind in _ZK_WRITES:
                self.zk.write(c, state.epoch_zk_version)
            elif kind is C.LogStateChanges:
                self._log_state_changes(c, state)
            elif kind is C.RejectRequest:
                self.rejections += 1
                log.error("rejected %s: %s", c.kind, c.reason)
            elif kind is C.ReplyControlledShutdown or kind is C.ReplyLeaderElection:
                self.replies.resolve(c.request_id, c)
            elif kind is C.ScheduleTimer:
                self.timers.schedule(c.name, c.delay_ms)
            elif kind is C.CancelTimer:
                self.timers.cancel(c.name)
            elif kind is C.WatchPartitionStates:
                self.watches.watch_partitions(c.partitions)
            elif kind is C.ReadPartitionStates:
                self.watches.read_partition_states(c.read_id, c.partitions)
            elif kind is C.UnwatchPartitionStates:
                self.watches.unwatch_partitions(c.partitions)
            elif kind is C.Resign:
                log.warning("resigning as controller: %s", c.reason)
                self.resign(c.reason)
            else:
                raise TypeError(f"no executor for {c!r}")
        if sends:
            if getattr(self.senders, "storage_errors_seen", False):
                self.senders.send(sends, offline_replicas=_offline_replicas(sends, state))
            else:
                self.senders.send(sends)

    def busy(self) -> bool:
        """Writes in flight or broker requests not yet acknowledged."""
        return bool(self.zk.in_flight()) or any(self.senders.queue_sizes().values())

    def _log_state_changes(self, c: C.LogStateChanges, state: ControllerState) -> None:
        """Kafka's state-change log (adapters/observability/statelog.py: one line per group listing every
        partition, written off the loop), and the election counters: O(groups), not O(partitions)."""
        for e in c.entries:
            if e.ok and e.replica < 0 and e.to_state == _ONLINE and e.from_state in _ELECTED_FROM:
                self.leader_elections += len(e.partitions)
                if "unclean" in e.detail:
                    self.unclean_elections += len(e.partitions)
        statelog.log_state_changes(c, state, self.controller_id, self.event_seq())


def _offline_replicas(sends, state: ControllerState) -> dict:
    """{id(partitions of an UpdateMetadata): [[topic, partition, [replicas]], ...]}: replicas of
    live brokers that are not online for their partition (Kafka's isReplicaOnline): those the
    controller keeps as on a failed log dir (`replicas_on_offline_dirs`), and those in
    OfflineReplica, where a failed log dir, or a controlled shutdown, puts them (only computed
    once some broker reported KAFKA_STORAGE_ERROR)."""

    out: dict = {}
    live = state.brokers
    kept: dict = {}
    for tp, r in state.replicas_on_offline_dirs:
        kept.setdefault(tp, set()).add(r)
    for c in sends:
        if type(c) is not C.SendUpdateMetadata or id(c.partitions) in out:
            continue
        found = []
        for view, info in zip(c.partitions, state.partitions.get_many([v.tp for v in c.partitions])):
            if info is None:
                continue
            offline = {r for r, s in info.replica_states if s is ReplicaState.OFFLINE and r in live}
            offline |= {r for r in kept.get(view.tp, ()) if r in live}
            if offline:
                found.append([view.tp.topic, view.tp.partition, sorted(offline)])
        out[id(c.partitions)] = found
    return out
