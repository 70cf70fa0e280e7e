"""The replica manager of a broker node, and the ISR behaviour of a Kafka 2.4 partition leader.

`adapters.broker.broker.Broker` owns the control requests: it fences them (controller epoch, broker
epoch, leader epoch) and hands the accepted partition states to a replica manager. The replica
manager holds the local replicas and, for the partitions this broker leads, decides when the
ISR should change. The broker writes those changes to ZooKeeper and reports the outcome back.
So a replica manager does no I/O itself, and it reads time only through the clock it is given.

A service that embeds a node can plug in its own manager: anything with the methods of the
`ReplicaManager` protocol. Subclass `ReplicaManagerBase` to get the ISR hooks as no-ops (such a
manager never changes an ISR) and implement the four replica methods.

`SimulatedReplicaManager` is the default. It keeps each partition's local state (role, leader
epoch, znode version, ISR, replicas, a log end offset counter) and simulates how a Kafka 2.4
leader maintains its ISR, with the brokers' liveness standing in for fetch requests:

- A follower *fetches* while its broker is live in the last UpdateMetadata, is not in
  controlled shutdown (the UpdateMetadata names those brokers), and its replica is assigned.
  Inferring "stopped" from an ISR removal alone is wrong when the removal was decided while
  the broker was dead and arrives after it came back.
- But a follower the controller has just taken out of the ISR (a LeaderAndIsr with a higher
  leader epoch and without it) does not fetch until an UpdateMetadata *after* that request lists
  its broker as live: the controller sends its UpdateMetadata after the LeaderAndIsr, and in
  between the previous UpdateMetadata may still call a dead broker live (a real follower on a
  dead broker simply stops fetching; ours must not be re-added in that window).
- A fetching follower outside the ISR joins it `catch_up_delay_ms` after it started fetching,
  that is after the later of: this broker becoming leader, the follower's broker becoming live,
  the follower entering the assignment.
- A follower in the ISR that does not fetch is dropped `replica_lag_time_max_ms` after it
  stopped (as seen by this leader). The leader itself is never dropped, so the ISR never becomes
  empty.
- Before the first UpdateMetadata nothing is known about liveness, and no ISR changes.
- Replication throttles (Kafka's `*.replication.throttled.*` dynamic configs): when the
  `throttle(tp, leader, follower)` hook the node gives returns a rate in bytes/s, copying the
  partition's `partition_bytes` takes `partition_bytes / rate` seconds more, so a throttled
  follower joins the ISR that much later. A rate change (`throttles_changed()`) reschedules at
  once; the copy is then timed at the new rate from when the follower started fetching.

The time-driven part follows aioquic's habit: `next_isr_deadline()` says when something next
becomes due and `isr_proposals()` returns what is due. Everything happens on the values you
pass and on the clock you inject, so the tests drive it with a fake clock.
"""
from __future__ import annotations

import logging
import time
from types import MappingProxyType
from typing import Callable, Mapping, Protocol, runtime_checkable

import attrs

from controller_core.values import LeaderIsr, PartitionView, TopicPartition

log = logging.getLogger("kctl.replica_manager")

ROLE_LEADER = "leader"
ROLE_FOLLOWER = "follower"
ROLE_STOPPED = "stopped"
"""After StopReplica(delete=false): the replica is kept (with its leader epoch) but is inactive."""

DEFAULT_REPLICA_LAG_TIME_MAX_MS = 10_000
DEFAULT_CATCH_UP_DELAY_MS = 300
DEFAULT_RETRY_BACKOFF_MS = 500
DEFAULT_PARTITION_BYTES = 10_000_000
"""A simulated partition's size: what a throttled follower has to copy before it joins the ISR."""

Throttle = Callable[[TopicPartition, int, int], "float | None"]
"""`throttle(tp, leader, follower)`: the replication rate (bytes/s) that applies to `follower`
copying `tp` from `leader`, or None when it is not throttled."""

class KafkaStorageError(Exception):
    """A replica manager cannot host this replica: its log dir is offline. The broker answers
    the partition with KAFKA_STORAGE_ERROR (adapters/broker/log_dirs.py)."""


Clock = Callable[[], float]
"""Milliseconds on any monotonic scale."""


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0


# ---------------------------------------------------------------------------------------------
# values


@attrs.frozen(slots=True)
class ReplicaState:
    """A snapshot of one local replica."""

    tp: TopicPartition
    role: str
    leader: int
    leader_epoch: int
    controller_epoch: int
    zk_version: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    log_end_offset: int = 0

    def to_json(self) -> dict:
        return {"role": self.role, "leader": self.leader, "leader_epoch": self.leader_epoch,
                "controller_epoch": self.controller_epoch, "zk_version": self.zk_version,
                "isr": list(self.isr), "replicas": list(self.replicas), "log_end_offset": self.log_end_offset}


@attrs.frozen(slots=True)
class IsrProposal:
    """An ISR change a leader wants written.

    `leader_isr` is the new state znode content; its `zk_version` is the version the write must
    expect (the one from the LeaderAndIsr, or of this leader's own last write). Leader, leader
    epoch and controller epoch are those of the LeaderAndIsr that made this broker leader.
    """

    tp: TopicPartition
    leader_isr: LeaderIsr
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()


# ---------------------------------------------------------------------------------------------
# the protocol


@runtime_checkable
class ReplicaManager(Protocol):
    """What a broker needs from a replica manager.

    The broker calls these from the event loop, one at a time, after fencing: a `view` handed to
    `become_leader` / `become_follower` always has a higher leader epoch than the previous one
    for that partition and lists this broker among its replicas. Exceptions raised here become
    per-partition errors in the broker's answer.

    ISR hooks (times are milliseconds on the broker's clock): the broker calls
    `update_live_brokers` after each UpdateMetadata, sleeps until `next_isr_deadline()` (or until
    a request arrives), then takes `isr_proposals()`, writes each to its state znode and reports
    the outcome with exactly one of `isr_committed`, `isr_conflict`, `isr_write_failed`.
    A proposal whose leader epoch is no longer the partition's must be ignored by these.
    """

    def become_leader(self, view: PartitionView) -> None:
        """Make (or keep) the local replica the leader, with the view's epoch, ISR and replicas."""

    def become_follower(self, view: PartitionView) -> None:
        """Make the local replica a follower of `view.leader` (which may be -1: no leader)."""

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        """Stop the replica; with `delete`, also remove it and its data. Unknown partitions are fine."""

    def partitions(self) -> Mapping[TopicPartition, ReplicaState]:
        """A snapshot of the local replicas."""

    def update_live_brokers(self, live: frozenset[int]) -> None:
        """The live brokers of the latest UpdateMetadata."""

    def next_isr_deadline(self) -> float | None:
        """When `isr_proposals()` may next return something (None: not until something changes)."""

    def isr_proposals(self) -> list[IsrProposal]:
        """The ISR changes due now. A partition has at most one proposal outstanding."""

    def isr_committed(self, proposal: IsrProposal, zk_version: int) -> None:
        """The proposal was written; the znode now has `zk_version`."""

    def isr_conflict(self, proposal: IsrProposal, current: LeaderIsr | None) -> None:
        """The znode did not have the expected version. `current` is what it holds now (with
        its version), None if it is missing or unreadable."""

    def isr_write_failed(self, proposal: IsrProposal) -> None:
        """The write did not happen (ZooKeeper unavailable): it may be proposed again later."""


class ReplicaManagerBase:
    """Convenience base: the ISR hooks do nothing (the ISR is left to the controller)."""

    def update_live_brokers(self, live: frozenset[int]) -> None:
        pass

    def next_isr_deadline(self) -> float | None:
        return None

    def isr_proposals(self) -> list[IsrProposal]:
        return []

    def isr_committed(self, proposal: IsrProposal, zk_version: int) -> None:
        pass

    def isr_conflict(self, proposal: IsrProposal, current: LeaderIsr | None) -> None:
        pass

    def isr_write_failed(self, proposal: IsrProposal) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# the simulated replica manager


class _Follower:
    """How the leader sees one follower: fetching or not, and since when (ms)."""

    __slots__ = ("fetching", "since")

    def __init__(self, fetching: bool, since: float):
        self.fetching = fetching
        self.since = since


_NO_FOLLOWERS: Mapping[int, "_Follower"] = MappingProxyType({})
"""A replica's followers while it does not lead (read-only: leading gives it a dict of its own)."""
_NONE: frozenset[int] = frozenset()


class _Replica:
    """Mutable local state of one partition (internal; `ReplicaState` is the public snapshot)."""

    __slots__ = ("tp", "role", "leader", "leader_epoch", "controller_epoch", "zk_version", "isr", "replicas",
                 "log_end_offset", "followers", "stopped", "removed", "in_flight", "blocked", "retry_at",
                 "offline")

    def __init__(self, tp: TopicPartition):
        self.tp = tp
        self.role = ROLE_FOLLOWER
        self.leader = -1
        self.leader_epoch = -1
        self.controller_epoch = -1
        self.zk_version = -1
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.log_end_offset = 0
        # leaders only, and on a follower the shared empty values: a broker holds tens of
        # thousands of follower replicas, and two sets each were 430 bytes and two objects the
        # cyclic collector walked (a 50,000-partition LeaderAndIsr spent most of its time in
        # collections triggered by them)
        self.followers: Mapping[int, _Follower] = _NO_FOLLOWERS  # a dict of its own while leading
        self.stopped: frozenset[int] = _NONE  # followers whose replica the controller stopped
        self.removed: frozenset[int] = _NONE  # taken out of the ISR, not yet seen live since
        self.in_flight = False  # a proposal is being written
        self.blocked = False  # the znode holds something this leader cannot explain: wait for LeaderAndIsr
        self.retry_at = 0.0
        self.offline: frozenset[int] = frozenset()  # followers on a failed log dir (UpdateMetadata)

    def apply(self, view: PartitionView, role: str) -> None:
        self.role = role
        self.leader = view.leader
        self.leader_epoch = view.leader_epoch
        self.controller_epoch = view.controller_epoch
        self.zk_version = view.zk_version
        self.isr = tuple(view.isr)
        self.replicas = tuple(view.replicas)

    def snapshot(self) -> ReplicaState:
        return ReplicaState(self.tp, self.role, self.leader, self.leader_epoch, self.controller_epoch,
                            self.zk_version, self.isr, self.replicas, self.log_end_offset)


class SimulatedReplicaManager:
    """The default replica manager: local replica state plus simulated Kafka 2.4 ISR upkeep.

    See the module docstring for the rules. `clock()` returns milliseconds; the broker that
    owns this manager must use the same clock.
    """

    def __init__(
        self,
        broker_id: int,
        *,
        replica_lag_time_max_ms: float = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        catch_up_delay_ms: float = DEFAULT_CATCH_UP_DELAY_MS,
        retry_backoff_ms: float = DEFAULT_RETRY_BACKOFF_MS,
        clock: Clock = monotonic_ms,
        throttle: Throttle | None = None,
        partition_bytes: int = DEFAULT_PARTITION_BYTES,
    ):
        if replica_lag_time_max_ms < 0 or catch_up_delay_ms < 0 or retry_backoff_ms < 0:
            raise ValueError("delays must not be negative")
        if partition_bytes < 0:
            raise ValueError("partition_bytes must not be negative")
        self.broker_id = broker_id
        self.throttle = throttle
        self.partition_bytes = partition_bytes
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.catch_up_delay_ms = catch_up_delay_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._clock = clock
        self._replicas: dict[TopicPartition, _Replica] = {}
        self._led: dict[TopicPartition, None] = {}  # insertion-ordered set
        self._due: dict[TopicPartition, float] = {}  # led partitions with a change pending, and when
        self._live: frozenset[int] | None = None  # None until the first UpdateMetadata
        self._listed_offline: set[TopicPartition] = set()  # replicas whose `offline` is not empty

    # -- replica transitions -------------------------------------------------------------------

    def become_leader(self, view: PartitionView) -> None:
        now = self._clock()
        tp = view.tp
        r = self._replicas.get(tp)
        if r is None:
            r = self._replicas[tp] = _Replica(tp)
        was_leader = r.role == ROLE_LEADER
        me = self.broker_id
        removed = {b for b in r.isr if b not in view.isr and b != me} if view.leader_epoch > r.leader_epoch else ()
        r.apply(view, ROLE_LEADER)
        r.leader = self.broker_id
        r.in_flight = r.blocked = False
        r.retry_at = 0.0
        if not was_leader:
            r.followers = {}
            r.stopped = r.removed = _NONE
        if removed:
            r.removed = r.removed | removed
        self._led[tp] = None
        self._refresh(r, now)

    def become_follower(self, view: PartitionView) -> None:
        tp = view.tp
        r = self._replicas.get(tp)
        if r is None:
            r = self._replicas[tp] = _Replica(tp)
        r.apply(view, ROLE_FOLLOWER)
        self._stop_leading(r)

    def stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        r = self._replicas.get(tp)
        if r is None:
            return
        self._stop_leading(r)
        if delete:
            del self._replicas[tp]
            self._listed_offline.discard(tp)
        else:
            r.role = ROLE_STOPPED

    def partitions(self) -> dict[TopicPartition, ReplicaState]:
        return {tp: r.snapshot() for tp, r in self._replicas.items()}

    def partition(self, tp: TopicPartition) -> ReplicaState | None:
        r = self._replicas.get(tp)
        return None if r is None else r.snapshot()

    def role_counts(self) -> dict[str, int]:
        """How many local replicas are in each role (cheaper than `partitions()`)."""
        counts: dict[str, int] = {}
        for r in self._replicas.values():
            counts[r.role] = counts.get(r.role, 0) + 1
        return counts

    def append(self, tp: TopicPartition, records: int = 1) -> int:
        """Advance a leader's log end offset (for embedding and tests); returns the new offset."""
        r = self._replicas.get(tp)
        if r is None or r.role != ROLE_LEADER:
            raise ValueError(f"{tp} is not led by broker {self.broker_id}")
        r.log_end_offset += records
        return r.log_end_offset

    # -- liveness --------------------------------------------------------------------------------

    def update_live_brokers(self, live: frozenset[int]) -> None:
        live = frozenset(live)
        previous = self._live
        self._live = live
        now = self._clock()
        changed = live if previous is None else live ^ previous
        gone = frozenset() if previous is None else previous - live
        for tp in self._led:
            r = self._replicas[tp]
            refresh = previous is None or (changed and not changed.isdisjoint(r.followers))
            if gone and r.stopped:
                r.stopped = r.stopped - gone  # a stopped replica restarts when its broker comes back
            if r.removed and not r.removed.isdisjoint(live):
                r.removed = r.removed - live  # taken out of the ISR, now seen live after that: it fetches again
                refresh = True
            if refresh:
                self._refresh(r, now)

    def update_offline_replicas(self, tps, offline: Mapping[TopicPartition, frozenset[int]]) -> None:
        """An UpdateMetadata's offline replicas for `tps` (those it carries, any iterable, read
        once): a follower on a failed log dir does not fetch, so it never rejoins the ISR while
        it is listed."""
        if not offline and not self._listed_offline:
            return  # none listed now or before: a 100,000-partition UpdateMetadata changes nothing
        now = self._clock()
        for tp in tps:
            r = self._replicas.get(tp)
            if r is None:
                continue
            listed = offline.get(tp, frozenset())
            if listed != r.offline:
                r.offline = listed
                if listed:
                    self._listed_offline.add(tp)
                else:
                    self._listed_offline.discard(tp)
                if r.role == ROLE_LEADER:
                    self._refresh(r, now)

    @property
    def live_brokers(self) -> frozenset[int] | None:
        return self._live

    # -- ISR decisions ---------------------------------------------------------------------------

    def next_isr_deadline(self) -> float | None:
        return min(self._due.values()) if self._due else None

    def isr_proposals(self) -> list[IsrProposal]:
        now = self._clock()
        due = sorted(tp for tp, at in self._due.items() if at <= now)
        proposals = []
        for tp in due:
            r = self._replicas[tp]
            del self._due[tp]
            removed = tuple(b for b in r.isr if self._drop_due(r, b, now))
            added = tuple(b for b in r.replicas if self._join_due(r, b, now))
            if not removed and not added:
                self._schedule(r)
                continue
            isr = tuple(b for b in r.isr if b not in removed) + added
            r.in_flight = True
            proposals.append(IsrProposal(tp, LeaderIsr(self.broker_id, r.leader_epoch, isr, r.controller_epoch,
                                                       r.zk_version), added, removed))
        return proposals

    def isr_committed(self, proposal: IsrProposal, zk_version: int) -> None:
        r = self._current(proposal)
        if r is None:
            return
        r.in_flight = False
        r.isr = proposal.leader_isr.isr
        r.zk_version = zk_version
        self._schedule(r)

    def isr_conflict(self, proposal: IsrProposal, current: LeaderIsr | None) -> None:
        r = self._current(proposal)
        if r is None:
            return
        r.in_flight = False
        if current is None or current.leader_epoch > r.leader_epoch or current.leader != self.broker_id:
            # A newer leader epoch (or no partition at all): this broker is no longer the leader.
            # Keep the local leader epoch, so that the LeaderAndIsr carrying the new one is accepted.
            log.info("broker %d: %s: state znode is %s, no longer acting as leader (epoch %d)",
                     self.broker_id, r.tp, current, r.leader_epoch)
            r.role = ROLE_FOLLOWER
            r.leader = -1 if current is None else current.leader
            self._stop_leading(r)
        elif current.leader_epoch == r.leader_epoch and current.controller_epoch == r.controller_epoch:
            # Only this leader writes with its leader epoch (the controller always bumps it):
            # this is an earlier write of ours whose answer was lost. Adopt it and plan again.
            r.isr = current.isr
            r.zk_version = current.zk_version
            self._refresh(r, self._clock())
        else:
            log.warning("broker %d: %s: state znode holds %s, which leader epoch %d cannot explain; "
                        "waiting for a LeaderAndIsr", self.broker_id, r.tp, current, r.leader_epoch)
            r.blocked = True
            self._due.pop(r.tp, None)

    def isr_write_failed(self, proposal: IsrProposal) -> None:
        r = self._current(proposal)
        if r is None:
            return
        r.in_flight = False
        r.retry_at = self._clock() + self.retry_backoff_ms
        self._schedule(r)

    # -- internals -------------------------------------------------------------------------------

    def _current(self, proposal: IsrProposal) -> _Replica | None:
        """The replica a proposal was made for, if it is still led at the proposal's epoch."""
        r = self._replicas.get(proposal.tp)
        if r is None or r.role != ROLE_LEADER or r.leader_epoch != proposal.leader_isr.leader_epoch \
                or r.zk_version != proposal.leader_isr.zk_version:
            return None
        return r

    def _stop_leading(self, r: _Replica) -> None:
        self._led.pop(r.tp, None)
        self._due.pop(r.tp, None)
        r.followers = _NO_FOLLOWERS
        r.stopped = r.removed = _NONE
        r.in_flight = r.blocked = False

    def _fetching(self, r: _Replica, broker: int) -> bool:
        live = self._live
        return (live is not None and broker in live and broker in r.replicas and broker not in r.stopped
                and broker not in r.removed and broker not in r.offline)

    def _refresh(self, r: _Replica, now: float) -> None:
        """Recompute which followers fetch (stamping changes with `now`) and reschedule. The
        followers are the replicas and ISR members other than this broker; each fetches as
        `_fetching` says (inlined here: a LeaderAndIsr or UpdateMetadata of 10,000 partitions
        refreshes thousands of them)."""
        me = self.broker_id
        live = self._live
        replicas, isr, followers = r.replicas, r.isr, r.followers
        for b in [b for b in followers if b == me or (b not in replicas and b not in isr)]:
            del followers[b]
        stopped, removed, offline = r.stopped, r.removed, r.offline
        for b in replicas:
            if b == me:
                continue
            fetching = (live is not None and b in live and b not in stopped and b not in removed
                        and b not in offline)
            f = followers.get(b)
            if f is None:
                followers[b] = _Follower(fetching, now)
            elif f.fetching != fetching:
                f.fetching = fetching
                f.since = now
        for b in isr:  # ISR members outside the assignment (a reassignment's leftovers) never fetch
            if b == me or b in replicas:
                continue
            f = followers.get(b)
            if f is None:
                followers[b] = _Follower(False, now)
            elif f.fetching:
                f.fetching = False
                f.since = now
        self._schedule(r)

    def _join_due(self, r: _Replica, b: int, now: float) -> bool:
        f = r.followers.get(b)
        return f is not None and f.fetching and b not in r.isr and f.since + self._catch_up_ms(r, b) <= now

    def _catch_up_ms(self, r: _Replica, b: int) -> float:
        """How long follower `b` needs from starting to fetch until it is caught up."""
        rate = self.throttle(r.tp, self.broker_id, b) if self.throttle is not None else None
        if rate is None or rate <= 0:
            return self.catch_up_delay_ms
        return self.catch_up_delay_ms + self.partition_bytes * 1000.0 / rate

    def throttles_changed(self) -> None:
        """The throttle configuration changed: recompute when each catching-up follower joins."""
        for tp in self._led:
            self._schedule(self._replicas[tp])

    def _drop_due(self, r: _Replica, b: int, now: float) -> bool:
        f = r.followers.get(b)
        return (f is not None and not f.fetching and b != self.broker_id and self.broker_id in r.isr
                and f.since + self.replica_lag_time_max_ms <= now)

    def _schedule(self, r: _Replica) -> None:
        tp = r.tp
        if (r.role != ROLE_LEADER or r.in_flight or r.blocked or r.zk_version < 0 or self._live is None):
            self._due.pop(tp, None)
            return
        at = None
        isr = r.isr
        me_in_isr = self.broker_id in isr
        for b, f in r.followers.items():
            if f.fetching:
                if b in isr:
                    continue
                t = f.since + (self._catch_up_ms(r, b) if self.throttle is not None else self.catch_up_delay_ms)
            elif me_in_isr and b in isr:
                t = f.since + self.replica_lag_time_max_ms
            else:
                continue
            if at is None or t < at:
                at = t
        if at is None:
            self._due.pop(tp, None)
        else:
            self._due[tp] = max(at, r.retry_at)
