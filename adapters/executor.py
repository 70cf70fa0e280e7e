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
from controller_core.state import ControllerState

log = logging.getLogger("kctl.controller")
state_change_log = logging.getLogger("kctl.state.change")

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
    """Routes commands. `zk` executes ZooKeeper writes (adapters/zkwriter.py), `senders` the
    broker requests, `watches` the partition-state watches, `resign` the election's resignation."""

    def __init__(self, *, zk, senders, replies: Replies, timers: Timers, watches, resign: Callable[[str], None],
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)):
        self.zk = zk
        self.senders = senders
        self.replies = replies
        self.timers = timers
        self.watches = watches
        self.resign = resign
        self.clock = clock
        self._brokers = None
        self.rejections = 0
        self.unclean_elections = 0

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
                self._log_state_changes(c, state.epoch)
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
            elif kind is C.UnwatchPartitionStates:
                self.watches.unwatch_partitions(c.partitions)
            elif kind is C.Resign:
                log.warning("resigning as controller: %s", c.reason)
                self.resign(c.reason)
            else:
                raise TypeError(f"no executor for {c!r}")
        if sends:
            self.senders.send(sends)

    def busy(self) -> bool:
        """Writes in flight or broker requests not yet acknowledged."""
        return bool(self.zk.in_flight()) or any(self.senders.queue_sizes().values())

    def _log_state_changes(self, c: C.LogStateChanges, epoch: int) -> None:
        """Kafka's state-change log: one line per group at INFO (failures at ERROR), the
        partitions listed at DEBUG, so a 10,000-partition failover writes a handful of lines."""
        for e in c.entries:
            what = "partition" if e.replica < 0 else f"replica {e.replica}"
            if "unclean" in e.detail:
                self.unclean_elections += len(e.partitions)
            if e.ok:
                state_change_log.info("[Controller epoch=%d] %s: %d %s(s) %s -> %s%s (%s)", epoch, c.cause,
                                      len(e.partitions), what, e.from_state, e.to_state,
                                      f" [{e.detail}]" if e.detail else "", _sample(e.partitions))
            else:
                state_change_log.error("[Controller epoch=%d] %s: %s change %s -> %s failed for %d partition(s): %s (%s)",
                                       epoch, c.cause, what, e.from_state, e.to_state, len(e.partitions), e.detail,
                                       _sample(e.partitions))
            if state_change_log.isEnabledFor(logging.DEBUG):
                state_change_log.debug("  partitions: %s", ", ".join(str(tp) for tp in e.partitions))


def _sample(tps, n: int = 5) -> str:
    shown = ", ".join(str(tp) for tp in tps[:n])
    return shown + (f", … {len(tps) - n} more" if len(tps) > n else "")
