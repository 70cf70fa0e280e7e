"""Hypothesis stateful test of the pure core, driven only through `step()`.

The machine plays everything around the controller the way the runtime adapters would:

- a model ZooKeeper (`Zk`): registered brokers with their czxid epochs, topic znodes, partition
  state znodes with versions, the admin znodes and the controller epoch. Admin actions (create,
  expand, delete a topic, reassign, request elections, change configs) write it and the watch
  event is fed to the core at once, read from it the way the adapters read it;
- the ZooKeeper writer: every znode write the core asks for (`WritePartitionStates`,
  `WriteTopicAssignment`, `DeleteTopic`, `WriteReassignmentPlan`, ...) joins one FIFO, as the
  writes of one session do, and lands when the machine says so. In a `WritePartitionStates`
  each write whose `expected_version` matches the znode lands (version + 1), the others come back
  as conflicts with the znode's current content; the outcome is delivered at once or later. The
  watches the core's own writes trigger are queued and delivered later, read at delivery time
  (events are level-triggered);
- partition leaders: a live leader adds a live assigned follower (not shutting down) to its ISR
  or drops a follower (never the last member) with a write of its own, sometimes racing an
  in-flight controller write, and the ISR-change notification (or the reassignment watch) comes
  back as `PartitionStatesObserved`; followers of a reassignment catch up;
- brokers: joins, failures, bounces (new czxid), controlled shutdowns (right or stale broker
  epoch), StopReplica(delete=true) answers (success or error); the rebalance timer;
- controller failover: the old controller resigns, is fenced or is replaced by a fresh node; a
  prefix of its queued writes landed, the rest were fenced; then `ControllerElected` with a higher
  epoch from a snapshot of the model ZooKeeper. Between a resignation and the next election
  every event must be ignored.

Checked after every step (`do`): determinism (the same step twice gives equal results); refused
inputs change nothing and produce only rejections/replies; Online partitions have a live leader
in their ISR (or none); ISRs are never empty and lie within RS (with the Kafka-legitimate
exceptions documented below); state transitions follow the tables of `controller_core.machines`
(the logged ones, and before/after reachability through them); Send* commands only address
brokers of the last listing, with their current broker epoch and our controller epoch; every
partition write raises the znode's leader epoch, at issue and when it lands. Beyond the issue's
list, the machine also checks that brokers are only told partition states that landed, that leader
epochs sent and held in state never go back, that a landing controller write never grows the ISR
nor elects outside it, and that once everything is delivered the cache equals ZooKeeper.

Every invariant is on. The bugs this machine found (eleven so far) each have a minimal plain
regression test at the end of this file.
"""
from __future__ import annotations

import itertools
from collections import defaultdict

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from controller_core import codec
from controller_core import commands as C
from controller_core import events as E
from controller_core.assignment import assign_replicas_to_brokers, expand_partitions
from controller_core.machines import (
    PartitionState,
    ReplicaState,
    partition_transition_ok,
    replica_transition_ok,
)
from controller_core.rebalance import REBALANCE_TIMER
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    NO_ZK_VERSION,
    LeaderIsr,
    ReplicaAssignment,
    TopicPartition,
)
from tests.core.builders import AT, broker, elected, leader_isr, of_type, run, tp

# -- invariant switches ----------------------------------------------------------------------------
# All on. When a new core bug is found and cannot be fixed at once, switch its check off here
# *temporarily*, naming the strict-xfail regression test that pins it.

CHECK_ONLINE_LEADER_ALIVE_AND_IN_ISR = True
CHECK_ISR_SUBSET_OF_ASSIGNMENT = True
CHECK_LOGGED_TRANSITIONS_LEGAL = True
CHECK_CONTROLLER_WRITES_ARE_CLEAN = True
"""A controller write that lands never adds a replica to the ISR it replaces, and never makes a
replica outside that ISR the leader (unless unclean election may be in play)."""
CHECK_CACHE_MATCHES_ZK_WHEN_QUIET = True
"""Once every write, outcome and watch has been delivered, the cache equals ZooKeeper."""
CHECK_SENT_STATES_LANDED = True
"""Every partition state sent to brokers (LeaderAndIsr/UpdateMetadata) is one that landed in ZK."""
CHECK_SENT_EPOCHS_MONOTONIC = True
"""Per partition, the leader epochs sent in LeaderAndIsr requests never go back (across failovers)."""
CHECK_STATE_EPOCHS_MONOTONIC = True
"""Leader epochs in the controller's confirmed state never go back from one step to the next."""
CHECK_PARTITIONS_WITH_WRITES_IN_FLIGHT = True
"""The per-partition state checks (ISR within RS, Online leader alive and in ISR) also run on
partitions that have a controller write whose outcome has not been delivered yet."""
CHECK_ONLINE_PARTITION_HAS_LEADER_AND_ISR = True
"""An Online partition always has a leader and ISR."""
CHECK_PARTITIONS_RECREATED_OVER_ORPHANED_STATES = True
"""The ISR-within-RS check also covers partitions re-created over an orphaned state znode (the
topic znode lost them to an unconditional WriteTopicAssignment computed before an expansion)."""
CHECK_TRANSITIONS_OF_CONFLICT_RETRIES = True
"""The transitions logged by a conflict retry ("retry of write N ...") are checked against the tables."""

# -- the model's ZooKeeper --------------------------------------------------------------------------

LEADER_WRITE_VERSION_STRIDE = 1
"""How far a partition leader's ISR write moves the state znode's version: 1, as ZooKeeper does.
(An earlier core chained writes on predicted versions and a leader's write could alias one of
them; the knob let the machine look past that bug. The core no longer chains writes.)"""

# -- Kafka-legitimate exceptions, not bugs -------------------------------------------------------

ISR_SUBSET_CHECK_ALLOWS_LEADER_ADDED_REPLICAS = True
"""A partition leader expands the ISR from the assignment it knows, which lags the controller's:
the LeaderAndIsr carrying a new RS is sent only once the controller's write lands. A replica the
controller just dropped from a reassignment, but which had caught up, can therefore be added by
the leader (Kafka 2.4 has the same window; the leader shrinks it out once it stops fetching), and
a later controller write keeps it, as Kafka's elections and ISR shrinks do. So a cached ISR
member outside RS is accepted if a partition leader put it there and it has not left since."""

ISR_SUBSET_CHECK_ALLOWS_MIRRORED_LEADER_STATES = True
"""The controller mirrors a state znode a partition leader wrote (an ISR notification, or the
fresh content of a conflict) before it re-decides; that ISR is the leader's, not the
controller's, and may predate the controller's RS change."""

ISR_SUBSET_CHECK_ALLOWS_LAST_MEMBER = True
"""The last ISR member is never removed (Kafka's removeReplicasFromIsr), even when a reassignment
just removed it from RS: e.g. the old leader shrank the ISR to itself while the controller's
reassignment-completion write was in flight; the retry cannot elect a target, and Kafka 2.4
ends the same way (leader -1, ISR = [removed replica])."""

TRANSITION_CHECK_SKIPS_TOPICS_THAT_VANISHED = True
"""A topic whose znode vanished from a TopicsChanged listing is dropped from memory without state
transitions, as Kafka 2.4's processTopicChange does (controllerContext.removeTopic)."""

ONLINE_LEADER_CHECK_SKIPS_TOPICS_QUEUED_FOR_DELETION = True
"""Kafka 2.4's onReplicasBecomeOffline leaves the partitions of topics queued for deletion out of
`partitionsWithoutLeader`, so a topic whose deletion is queued but halted (a reassignment of it is
in progress) keeps OnlinePartition with a dead leader; the core does the same."""

BROKER_IDS = (1, 2, 3, 4, 5)
TOPIC_NAMES = ("a", "b", "c", "d")
REFUSAL_COMMANDS = (C.RejectRequest, C.ReplyControlledShutdown, C.ReplyLeaderElection)
SENDS = (C.SendLeaderAndIsr, C.SendUpdateMetadata, C.SendStopReplica)
P_BY_NAME = {str(s): s for s in PartitionState}
R_BY_NAME = {str(s): s for s in ReplicaState}


class Zk:
    """The model's ZooKeeper: only what the controller reads and writes."""

    def __init__(self):
        self.zxid = 1000
        self.brokers: dict[int, object] = {}  # id -> BrokerInfo (epoch = czxid)
        self.ever_registered: set[int] = set()
        self.topics: dict[str, dict[int, ReplicaAssignment]] = {}
        self.configs: dict[str, tuple] = {}
        self.states: dict[TopicPartition, LeaderIsr] = {}  # zk_version = the znode's version
        self.delete_requests: set[str] = set()
        self.plan: tuple | None = None  # /admin/reassign_partitions
        self.plan_version = -1  # its znode version (-1: absent)
        self.preferred: tuple | None = None  # /admin/preferred_replica_election
        self.preferred_version = -1
        self.epoch = 0
        # every (leader, leader_epoch, isr, version) a state znode ever held, per partition
        self.history: dict[TopicPartition, set] = defaultdict(set)
        # (leader, leader_epoch, isr, version) states written by partition leaders
        self.leader_states: dict[TopicPartition, set] = defaultdict(set)
        # state znodes whose partition vanished from the topic znode's data (an overwrite)
        self.orphaned: set[TopicPartition] = set()
        # replicas a partition leader added to the ISR, while they stay in it
        self.leader_added: dict[TopicPartition, set] = defaultdict(set)

    def register(self, b: int):
        self.zxid += 1
        self.brokers[b] = broker(b, epoch=self.zxid)
        self.ever_registered.add(b)

    def listing(self):
        return tuple(self.brokers[b] for b in sorted(self.brokers))

    def set_state(self, t: TopicPartition, li: LeaderIsr, by_leader: bool = False):
        previous = self.states.get(t)
        if by_leader and previous is not None:
            self.leader_added[t] |= set(li.isr) - set(previous.isr)
        if by_leader:
            self.leader_states[t].add((li.leader, li.leader_epoch, li.isr, li.zk_version))
        self.leader_added[t] &= set(li.isr)
        self.states[t] = li
        self.history[t].add((li.leader, li.leader_epoch, li.isr, li.zk_version))

    def partition_exists(self, t: TopicPartition) -> bool:
        return t.partition in self.topics.get(t.topic, {})

    def snapshot(self, at: int) -> E.ClusterSnapshot:
        return E.ClusterSnapshot(
            brokers=self.listing(),
            topics=tuple((t, tuple(sorted(parts.items()))) for t, parts in sorted(self.topics.items())),
            topic_configs=tuple(sorted(self.configs.items())),
            partition_states=tuple(sorted(self.states.items())),
            topics_to_delete=frozenset(self.delete_requests),
            reassignment=(E.ReassignmentRequested(at=at, exists=True, partitions=self.plan,
                                                  zk_version=self.plan_version) if self.plan else None),
            preferred_election=(E.PreferredElectionRequested(at=at, exists=True, partitions=self.preferred,
                                                             zk_version=self.preferred_version)
                                if self.preferred is not None else None),
        )


def _reachable(start, end, edges) -> bool:
    if start == end:
        return True
    seen, frontier = {start}, [start]
    while frontier:
        cur = frontier.pop()
        for f, t in edges:
            if f == cur and t not in seen:
                if t == end:
                    return True
                seen.add(t)
                frontier.append(t)
    return False


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.zk = Zk()
        self.now = AT
        self.request_ids = itertools.count(1)
        self.state = None
        self.config = None
        self.listing: dict[int, object] = {}  # the brokers listing the core last received
        self.writer: list = []  # ZooKeeper writes not yet applied, in order
        self.outcomes: list[E.PartitionStatesWritten] = []  # applied, outcome not delivered
        self.watches: list[tuple] = []  # watch notifications to deliver, read at delivery
        self.watched: set[TopicPartition] = set()  # WatchPartitionStates
        self.stops: list[tuple[int, int, tuple]] = []  # StopReplica(delete=true) awaiting answers
        self.timers: set[str] = set()
        self.shutting_down: set[int] = set()  # brokers that asked for a controlled shutdown
        self.sent_epochs: dict[TopicPartition, int] = {}
        self.unclean_requested = False  # an admin asked for an UNCLEAN election at some point
        self.unclean_topics: set[str] = set()  # topics whose config enabled unclean election once

    # -- plumbing ---------------------------------------------------------------------------

    def tick(self) -> int:
        self.now += 1
        return self.now

    @property
    def active(self) -> bool:
        return self.state is not None and self.state.active

    def do(self, event, refused: bool = False):
        """Step the core, check every invariant, execute the commands on the model.

        While a controller write is in flight, or a re-read of partition states before an
        election (`rechecking`, the stale-ISR rule), the core defers every other event (step.py),
        and the outcome that ends the wait also decides the deferred events: `processed` are the
        events this step actually decided, in order; an event whose decision refused on a cached
        ISR is parked (its decision dropped) and decided when `PartitionStatesRechecked` brings
        the re-read states. (A model that knew only the writes took events deferred or parked
        behind a re-read for decided: a stale request "changed the state", and a parked broker
        change's listing was used to check commands the core decided without it.)"""
        before = self.state
        s1, c1 = step(before, event)
        s2, c2 = step(before, event)
        assert s1 == s2 and c1 == c2, f"step is not deterministic for {event!r}"
        # the fast digest (its caches warm from earlier steps, c2 of fresh objects) is the reference's
        assert codec.digest(c1) == codec.reference_digest(c1) == codec.digest(c2), (
            f"fast digest differs from the reference for {type(event).__name__}")
        was_active = before.active
        deferred = was_active and s1.deferred == before.deferred + (event,) and \
            bool(before.pending or before.rechecking)
        if deferred:
            assert c1 == () and attrs.evolve(s1, deferred=before.deferred) == before, (
                f"deferring {type(event).__name__} changed more than the deferred queue")
            processed = []
        else:
            queue = list(before.deferred) if was_active else []
            decided = [event]
            if isinstance(event, E.PartitionStatesRechecked) and before.rechecking and event.read_id == before.recheck_id:
                decided += before.rechecking  # the event parked for the re-read is decided now
            decided += queue[:len(queue) - len(s1.deferred)]
            # an event parked for a re-read (its decision dropped) is decided when the read is back
            processed = [e for e in decided if e not in s1.rechecking] if s1.active or was_active else [event]
        if refused or (not was_active and not isinstance(event, E.ControllerElected)):
            if not deferred:
                assert s1 is before or s1 == before, f"refused input {type(event).__name__} changed the state"
            bad = [c for c in c1 if not isinstance(c, REFUSAL_COMMANDS)]
            assert not bad, f"refused input {type(event).__name__} produced {bad}"
        listings = [self.listing]
        for e in processed:
            if isinstance(e, (E.ControllerElected, E.BrokersChanged)) and s1.active:
                listing = e.snapshot.brokers if isinstance(e, E.ControllerElected) else e.brokers
                self.listing = {b.broker_id: b for b in listing}
                listings.append(self.listing)
        self.state = s1
        if s1.active:
            if was_active and not isinstance(event, E.ControllerElected):
                self._check_transitions(before, s1, c1, processed)
                if CHECK_STATE_EPOCHS_MONOTONIC:
                    self._check_epochs_monotonic(before, s1)
            self._check_commands(s1, c1, listings)
        self._execute(c1)
        if s1.active:
            self._check_state(s1)
        return s1, c1

    ZK_WRITES = (C.WritePartitionStates, C.WriteTopicAssignment, C.DeleteTopic, C.DeleteTopicDeletionRequests,
                 C.WriteReassignmentPlan, C.DeletePreferredElectionRequest)

    def _execute(self, commands):
        for c in commands:
            if isinstance(c, self.ZK_WRITES):
                self.writer.append(c)  # one session: ZooKeeper applies them in this order
            elif isinstance(c, C.SendStopReplica) and c.delete:
                self.stops.append((c.broker_id, c.broker_epoch, c.partitions))
            elif isinstance(c, C.WatchPartitionStates):
                self.watched |= set(c.partitions)
            elif isinstance(c, C.UnwatchPartitionStates):
                self.watched -= set(c.partitions)
            elif isinstance(c, C.ReadPartitionStates):
                self.watches.append(("reread", c.read_id, c.partitions))  # read when delivered
            elif isinstance(c, C.ScheduleTimer):
                self.timers.add(c.name)
            elif isinstance(c, C.CancelTimer):
                self.timers.discard(c.name)
            elif isinstance(c, C.Resign):
                self._forget_incarnation(landed=0)

    def _land(self, c):
        """ZooKeeper applies one queued write; a partition-state write returns its outcome."""
        zk = self.zk
        if isinstance(c, C.WritePartitionStates):
            return self._apply_write(c)
        if isinstance(c, C.WriteTopicAssignment):
            if c.topic in zk.topics:
                kept = {p for p, _ in c.partitions}
                zk.orphaned |= {TopicPartition(c.topic, p) for p in zk.topics[c.topic]
                                if p not in kept and TopicPartition(c.topic, p) in zk.states}
                zk.topics[c.topic] = dict(c.partitions)
                self.watches.append(("topic", c.topic))
            else:
                self.watches.append(("failed", f"/brokers/topics/{c.topic}"))
        elif isinstance(c, C.DeleteTopic):
            zk.topics.pop(c.topic, None)
            zk.configs.pop(c.topic, None)
            zk.delete_requests.discard(c.topic)
            for t in [t for t in zk.states if t.topic == c.topic]:
                del zk.states[t]
                zk.history.pop(t, None)
                zk.leader_states.pop(t, None)
                zk.leader_added.pop(t, None)
                zk.orphaned.discard(t)
                self.sent_epochs.pop(t, None)
            self.watches.append(("removed", c.topic))  # the writer's report, before the watches fire
            self.watches.append(("topics",))
            self.watches.append(("deletions",))
        elif isinstance(c, C.DeleteTopicDeletionRequests):
            zk.delete_requests -= set(c.topics)
            self.watches.append(("deletions",))
        elif isinstance(c, C.WriteReassignmentPlan):
            # conditional: an admin's newer request is not overwritten (ZooKeeper says BadVersion
            # and the writer drops the write); SetData on a missing znode fails (NoNode)
            if c.expected_version in (-1, zk.plan_version) and (zk.plan is not None or not c.partitions):
                if c.partitions:
                    zk.plan, zk.plan_version = tuple(c.partitions), zk.plan_version + 1
                else:
                    zk.plan, zk.plan_version = None, -1
                self.watches.append(("plan",))
        elif isinstance(c, C.DeletePreferredElectionRequest):
            if c.expected_version in (-1, zk.preferred_version):
                zk.preferred, zk.preferred_version = None, -1
                self.watches.append(("preferred",))
        return None

    # -- invariants -------------------------------------------------------------------------

    def _writes_in_flight(self) -> set:
        tps = {pw.tp for w in self.writer if isinstance(w, C.WritePartitionStates) for pw in w.writes}
        for o in self.outcomes:
            tps |= {t for t, _ in o.versions} | {t for t, _ in o.conflicts}
        return tps

    def _check_state(self, s):
        in_flight = set() if CHECK_PARTITIONS_WITH_WRITES_IN_FLIGHT else self._writes_in_flight()
        for t, info in s.partitions.items():
            li = info.leader_isr
            rs = info.assignment.replicas
            if li is not None:
                assert li.isr, f"{t}: empty ISR ({li})"
            if t in in_flight:
                continue
            if li is not None:
                outside = set(li.isr) - set(rs)
                if ISR_SUBSET_CHECK_ALLOWS_LEADER_ADDED_REPLICAS:
                    outside -= self.zk.leader_added.get(t, set())
                if ISR_SUBSET_CHECK_ALLOWS_MIRRORED_LEADER_STATES and (
                        (li.leader, li.leader_epoch, li.isr, li.zk_version) in self.zk.leader_states.get(t, ())):
                    outside = set()
                if ISR_SUBSET_CHECK_ALLOWS_LAST_MEMBER and len(li.isr) == 1:
                    outside = set()
                if not CHECK_PARTITIONS_RECREATED_OVER_ORPHANED_STATES and t in self.zk.orphaned:
                    outside = set()
                assert not CHECK_ISR_SUBSET_OF_ASSIGNMENT or not outside, (
                    f"{t}: ISR {li.isr} not a subset of the assignment {rs}")
            if info.state is PartitionState.ONLINE and CHECK_ONLINE_LEADER_ALIVE_AND_IN_ISR:
                if li is None and not CHECK_ONLINE_PARTITION_HAS_LEADER_AND_ISR:
                    continue
                assert li is not None, f"{t}: Online without a leader and ISR"
                exempt = ONLINE_LEADER_CHECK_SKIPS_TOPICS_QUEUED_FOR_DELETION and t.topic in s.topics_to_delete
                if li.leader != NO_LEADER and not exempt:
                    assert li.leader in s.brokers, f"{t}: Online with dead leader {li.leader} ({li})"
                    assert li.leader in li.isr, f"{t}: Online with leader {li.leader} outside ISR {li.isr}"

    def _check_epochs_monotonic(self, before, after):
        """A partition with a write in flight before the step holds the write's prediction, not
        a state anybody was told: its outcome may replace it with what a partition leader wrote
        meanwhile, at the lower epoch (the retry then builds on that). Only confirmed states
        must never go back."""
        predicted = {t for outbox in before.pending.values() for t in outbox.intents.keys()}
        for t, info in after.partitions.items():
            old = before.partitions.get(t)
            if old is None or old.leader_isr is None or info.leader_isr is None or t in predicted:
                continue
            assert info.leader_isr.leader_epoch >= old.leader_isr.leader_epoch, (
                f"{t}: leader epoch went back in state {old.leader_isr} -> {info.leader_isr}")

    def _check_transitions(self, before, after, commands, processed):
        edges = defaultdict(set)
        for c in commands:
            if not isinstance(c, C.LogStateChanges):
                continue
            skip_legality = not CHECK_TRANSITIONS_OF_CONFLICT_RETRIES and c.cause.startswith("retry of write")
            for e in c.entries:
                if not e.ok:
                    continue
                if e.replica == -1:
                    f, t = P_BY_NAME[e.from_state], P_BY_NAME[e.to_state]
                    assert not CHECK_LOGGED_TRANSITIONS_LEGAL or skip_legality or partition_transition_ok(f, t), (
                        f"logged illegal partition transition {e}")
                else:
                    f, t = R_BY_NAME[e.from_state], R_BY_NAME[e.to_state]
                    assert not CHECK_LOGGED_TRANSITIONS_LEGAL or skip_legality or replica_transition_ok(f, t), (
                        f"logged illegal replica transition {e}")
                for x in e.partitions:
                    edges[(x, e.replica)].add((f, t))
        vanished = set()
        if TRANSITION_CHECK_SKIPS_TOPICS_THAT_VANISHED:
            for e in processed:
                if isinstance(e, E.TopicsChanged):
                    vanished |= {t for t in before.topics.keys() if t not in e.topics}
        for x in set(before.partitions.keys()) | set(after.partitions.keys()):
            if x.topic in vanished:
                continue
            b, a = before.partitions.get(x), after.partitions.get(x)
            bs = b.state if b is not None else PartitionState.NON_EXISTENT
            as_ = a.state if a is not None else PartitionState.NON_EXISTENT
            assert _reachable(bs, as_, edges[(x, -1)]), (
                f"{x}: partition {bs} -> {as_} without legal logged transitions {edges[(x, -1)]}")
            replicas = {r for r, _ in (b.replica_states if b else ())} | {r for r, _ in (a.replica_states if a else ())}
            for r in replicas:
                rb = b.replica_state(r) if b is not None else ReplicaState.NON_EXISTENT
                ra = a.replica_state(r) if a is not None else ReplicaState.NON_EXISTENT
                assert _reachable(rb, ra, edges[(x, r)]), (
                    f"{x} replica {r}: {rb} -> {ra} without legal logged transitions {edges[(x, r)]}")

    def _check_commands(self, s, commands, listings):
        """`listings`: the broker listings the core knew while deciding this step's events (the
        one before, then each one it processed): a request must address a broker of one of them
        with that listing's broker epoch."""
        zk = self.zk
        for c in commands:
            if isinstance(c, SENDS):
                known = [lst[c.broker_id] for lst in listings if c.broker_id in lst]
                assert known, f"{type(c).__name__} to broker {c.broker_id} not in the listing"
                assert any(c.broker_epoch == b.epoch for b in known), f"{c!r} carries a stale broker epoch"
                assert c.controller_epoch == s.epoch
            if isinstance(c, (C.SendLeaderAndIsr, C.SendUpdateMetadata)):
                for v in c.partitions:
                    if CHECK_SENT_STATES_LANDED:
                        landed = zk.history.get(v.tp, set())
                        ok = any(v.leader_epoch == e and v.isr == isr and v.zk_version == ver
                                 and (v.leader == leader or v.leader == LEADER_DURING_DELETE)
                                 for leader, e, isr, ver in landed)
                        assert ok, f"{type(c).__name__} to {c.broker_id} sends {v} which never landed in ZK"
                    if isinstance(c, C.SendLeaderAndIsr) and CHECK_SENT_EPOCHS_MONOTONIC:
                        assert v.leader_epoch >= self.sent_epochs.get(v.tp, -1), (
                            f"LeaderAndIsr for {v.tp} with epoch {v.leader_epoch} after "
                            f"{self.sent_epochs[v.tp]} was sent")
                        self.sent_epochs[v.tp] = v.leader_epoch
            if isinstance(c, C.WritePartitionStates):
                for w in c.writes:
                    li = w.leader_isr
                    current = zk.states.get(w.tp)
                    # only a write that would land now can replace the znode: one expecting another
                    # version (a create of an existing znode, a stale version) conflicts, harmlessly.
                    # Every write is checked again, strictly, when it lands (_apply_write).
                    if current is not None and w.expected_version == current.zk_version:
                        assert li.leader_epoch > current.leader_epoch, (
                            f"write {w} does not raise the leader epoch of {current}")
                    assert li.isr, f"write {w} has an empty ISR"
                    assert li.leader == NO_LEADER or li.leader in li.isr, f"write {w}: leader outside the ISR"
                    assert li.controller_epoch == s.epoch

    # -- the model ZooKeeper writer -------------------------------------------------------------

    def _apply_write(self, w: C.WritePartitionStates) -> E.PartitionStatesWritten:
        conflicts = [(pw.tp, self.zk.states.get(pw.tp)) for pw in w.writes if not self._apply_one(pw)]
        # landed writes are at their predicted versions: not listed, as adapters/controller/zkwriter.py does
        return E.PartitionStatesWritten(at=self.tick(), write_id=w.write_id, conflicts=tuple(conflicts))

    def _apply_one(self, pw: C.PartitionWrite) -> bool:
        """ZooKeeper applies one conditional state write if the znode is at the expected version."""
        zk = self.zk
        current = zk.states.get(pw.tp)
        version = current.zk_version if current is not None else NO_ZK_VERSION
        # the state znode lives under /brokers/topics/<t>, whatever that znode's data lists
        if pw.tp.topic not in zk.topics or pw.expected_version != version:
            return False
        new_version = version + 1
        assert pw.leader_isr.zk_version == new_version, f"{pw}: predicted version is not {new_version}"
        if current is not None:
            assert pw.leader_isr.leader_epoch > current.leader_epoch, (
                f"landing {pw} would not raise the leader epoch of {current}")
            if CHECK_CONTROLLER_WRITES_ARE_CLEAN and not self._unclean_possible(pw.tp.topic):
                new = pw.leader_isr
                assert set(new.isr) <= set(current.isr), (
                    f"landing {pw} adds replicas to the ISR of {current}")
                assert new.leader in (NO_LEADER, current.leader) or new.leader in current.isr, (
                    f"landing {pw} elects a leader outside the ISR of {current}")
        zk.set_state(pw.tp, pw.leader_isr._replace(zk_version=new_version))
        if not zk.partition_exists(pw.tp):
            zk.orphaned.add(pw.tp)  # the topic znode no longer lists it (see _land)
        if pw.tp in self.watched:
            self.watches.append(("isr", pw.tp, "reassignment"))
        return True

    def _unclean_possible(self, topic: str) -> bool:
        """Unclean election was allowed for the topic at some point: a write decided then may land
        later (after the config changed back)."""
        return self.unclean_requested or self.config.unclean_leader_election_enable or topic in self.unclean_topics

    def _forget_incarnation(self, landed: int):
        """The controller is gone: the first `landed` writes of its queue reached ZooKeeper
        before the epoch moved, the rest were fenced; its senders and watches stop."""
        for c in self.writer[:landed]:
            self._land(c)
        self.writer.clear()
        self.outcomes.clear()
        self.stops.clear()
        self.watched.clear()
        self.watches = [w for w in self.watches if w[0] != "isr" or w[2] != "reassignment"]
        self.timers.clear()

    def _watch_event(self, item):
        zk = self.zk
        kind = item[0]
        at = self.tick()
        if kind == "isr":
            return E.PartitionStatesObserved(at=at, states=((item[1], zk.states.get(item[1])),), source=item[2])
        if kind == "topic":
            parts = zk.topics.get(item[1])
            return E.TopicsChanged(at=at, topics=frozenset(zk.topics),
                                   assignments=((item[1], tuple(sorted(parts.items()))),) if parts else ())
        if kind == "topics":
            return E.TopicsChanged(at=at, topics=frozenset(zk.topics))
        if kind == "deletions":
            return E.TopicDeletionsRequested(at=at, topics=frozenset(zk.delete_requests))
        if kind == "plan":
            return E.ReassignmentRequested(at=at, exists=zk.plan is not None, partitions=zk.plan or (),
                                           zk_version=zk.plan_version)
        if kind == "preferred":
            return E.PreferredElectionRequested(at=at, exists=zk.preferred is not None, partitions=zk.preferred or (),
                                                zk_version=zk.preferred_version)
        if kind == "failed":
            return E.ZnodeWriteFailed(at=at, what=item[1], reason="NoNode")
        if kind == "removed":
            return E.TopicZnodesDeleted(at=at, topic=item[1])
        if kind == "reread":
            return E.PartitionStatesRechecked(at=at, read_id=item[1], states=tuple((t, zk.states.get(t)) for t in item[2]))
        raise AssertionError(item)

    def _brokers_changed(self):
        live = self.zk.brokers
        self.stops = [s for s in self.stops if s[0] in live and live[s[0]].epoch == s[1]]
        self.shutting_down &= set(live)
        self.do(E.BrokersChanged(at=self.tick(), brokers=self.zk.listing()))

    def _elect(self, fresh: bool):
        zk = self.zk
        zk.epoch += 1
        if fresh or self.state is None:
            self.state = initial_state(self.config)
        self.do(E.ControllerElected(at=self.tick(), epoch=zk.epoch, epoch_zk_version=zk.epoch - 1,
                                    snapshot=zk.snapshot(self.now)))

    def _known_brokers(self, data, include_down: bool):
        known = set(self.zk.brokers)
        down = sorted(self.zk.ever_registered - known)
        if include_down and down:
            known.add(data.draw(st.sampled_from(down), label="down broker"))
        return sorted(known)

    def _observe(self, t: TopicPartition, data):
        """A leader wrote its ISR: the notification (or the reassignment watch) reaches the core,
        now or later."""
        source = "reassignment" if t in self.watched and data.draw(st.booleans(), label="via watch") else "isr_change"
        item = ("isr", t, source)
        if data.draw(st.booleans(), label="observe now"):
            self.do(self._watch_event(item))
        else:
            self.watches.append(item)

    def _leader_writes_isr(self, t: TopicPartition, isr: tuple):
        li = self.zk.states[t]
        self.zk.set_state(t, LeaderIsr(li.leader, li.leader_epoch, isr, li.controller_epoch,
                                       li.zk_version + LEADER_WRITE_VERSION_STRIDE),
                          by_leader=True)

    def _leading(self):
        """Partitions whose ZK leader is a live broker (it acts on its ISR)."""
        zk = self.zk
        return sorted(t for t, li in zk.states.items()
                      if li.leader in zk.brokers and zk.partition_exists(t))

    # -- set-up ---------------------------------------------------------------------------

    @initialize(data=st.data())
    def start(self, data):
        self.config = ControllerConfig(
            broker_id=1,
            auto_leader_rebalance_enable=data.draw(st.booleans(), label="auto rebalance"),
            unclean_leader_election_enable=data.draw(st.sampled_from([False, False, True]), label="unclean"),
            delete_topic_enable=data.draw(st.sampled_from([True, True, True, False]), label="delete enable"),
        )
        zk = self.zk
        for b in data.draw(st.lists(st.sampled_from(BROKER_IDS), min_size=1, max_size=5, unique=True), label="brokers"):
            zk.register(b)
        for name in data.draw(st.lists(st.sampled_from(TOPIC_NAMES[:2]), max_size=2, unique=True), label="topics"):
            rf = data.draw(st.integers(1, min(3, len(zk.brokers))), label="rf")
            n = data.draw(st.integers(1, 3), label="partitions")
            parts = assign_replicas_to_brokers([(b, None) for b in zk.brokers], n, rf,
                                               seed=data.draw(st.integers(0, 99), label="seed"))
            zk.topics[name] = {p: ReplicaAssignment(tuple(r)) for p, r in parts.items()}
            for p, r in parts.items():
                zk.set_state(TopicPartition(name, p), LeaderIsr(r[0], 0, tuple(r), 0, 0))
        self.state = initial_state(self.config)
        self._elect(fresh=True)

    # -- brokers --------------------------------------------------------------------------

    @rule(b=st.sampled_from(BROKER_IDS))
    def broker_joins(self, b):
        if b in self.zk.brokers:
            return
        self.zk.register(b)
        self._brokers_changed()

    @precondition(lambda self: self.zk.brokers)
    @rule(data=st.data())
    def broker_fails(self, data):
        b = data.draw(st.sampled_from(sorted(self.zk.brokers)), label="failing broker")
        del self.zk.brokers[b]
        self._brokers_changed()

    @precondition(lambda self: self.zk.brokers)
    @rule(data=st.data())
    def broker_bounces(self, data):
        b = data.draw(st.sampled_from(sorted(self.zk.brokers)), label="bouncing broker")
        self.zk.register(b)
        self._brokers_changed()

    @precondition(lambda self: self.zk.brokers)
    @rule(data=st.data(), stale=st.booleans())
    def controlled_shutdown(self, data, stale):
        b = data.draw(st.sampled_from(sorted(self.zk.brokers)), label="shutting down broker")
        epoch = self.zk.brokers[b].epoch
        if stale:
            event = E.ControlledShutdownRequested(at=self.tick(), request_id=next(self.request_ids),
                                                  broker_id=b, broker_epoch=epoch - 1)
            self.do(event, refused=True)
            return
        self.do(E.ControlledShutdownRequested(at=self.tick(), request_id=next(self.request_ids),
                                              broker_id=b, broker_epoch=epoch))
        if self.active:
            self.shutting_down.add(b)

    @precondition(lambda self: self.stops)
    @rule(data=st.data())
    def stop_replica_answered(self, data):
        i = data.draw(st.integers(0, len(self.stops) - 1), label="stop replica request")
        b, _, tps = self.stops.pop(i)
        errors = ()
        if data.draw(st.integers(0, 3), label="error?") == 0:
            errors = ((data.draw(st.sampled_from(tps), label="failed partition"), "KAFKA_STORAGE_ERROR"),)
        self.do(E.StopReplicaResponded(at=self.tick(), broker_id=b, delete=True, partitions=tps, errors=errors))

    # -- topics ---------------------------------------------------------------------------

    @precondition(lambda self: self.zk.brokers)
    @rule(data=st.data(), name=st.sampled_from(TOPIC_NAMES), n=st.integers(1, 3), rf=st.integers(1, 3),
          include_down=st.booleans(), seed=st.integers(0, 99))
    def create_topic(self, data, name, n, rf, include_down, seed):
        zk = self.zk
        if name in zk.topics:
            return
        known = self._known_brokers(data, include_down)
        if rf > len(known):
            return
        parts = assign_replicas_to_brokers([(b, None) for b in known], n, rf, seed=seed)
        if ("removed", name) in self.watches:
            # the name was free because the writer's DeleteTopic landed: its report was queued
            # then, ahead of anything the admin's creation makes the watches read
            self.watches.remove(("removed", name))
            self.do(E.TopicZnodesDeleted(at=self.tick(), topic=name))
        zk.topics[name] = {p: ReplicaAssignment(tuple(r)) for p, r in parts.items()}
        self.do(E.TopicsChanged(at=self.tick(), topics=frozenset(zk.topics),
                                assignments=((name, tuple(sorted(zk.topics[name].items()))),)))

    @precondition(lambda self: self.zk.topics and self.zk.brokers)
    @rule(data=st.data(), extra=st.integers(1, 2), include_down=st.booleans())
    def expand_topic(self, data, extra, include_down):
        zk = self.zk
        name = data.draw(st.sampled_from(sorted(zk.topics)), label="topic")
        existing = {p: list(ra.target_replicas) for p, ra in zk.topics[name].items()}
        known = self._known_brokers(data, include_down)
        if len(existing[0]) > len(known):
            return
        new = expand_partitions(existing, [(b, None) for b in known], len(existing) + extra, topic=name)
        zk.topics[name] = {**zk.topics[name], **{p: ReplicaAssignment(tuple(r)) for p, r in new.items()}}
        self.do(E.TopicsChanged(at=self.tick(), topics=frozenset(zk.topics),
                                assignments=((name, tuple(sorted(zk.topics[name].items()))),)))

    @rule(data=st.data())
    def request_topic_deletion(self, data):
        zk = self.zk
        name = data.draw(st.sampled_from(sorted(zk.topics) + ["ghost"]), label="topic to delete")
        zk.delete_requests.add(name)
        self.do(E.TopicDeletionsRequested(at=self.tick(), topics=frozenset(zk.delete_requests)))

    @precondition(lambda self: self.zk.topics)
    @rule(data=st.data(), unclean=st.booleans())
    def set_unclean(self, data, unclean):
        zk = self.zk
        name = data.draw(st.sampled_from(sorted(zk.topics)), label="topic")
        zk.configs[name] = (("unclean.leader.election.enable", "true" if unclean else "false"),)
        if unclean:
            self.unclean_topics.add(name)
        self.do(E.TopicConfigsChanged(at=self.tick(), configs=((name, zk.configs[name]),)))

    # -- admin requests -----------------------------------------------------------------------

    def _some_partitions(self, data, allow_unknown=True):
        zk = self.zk
        tps = sorted(TopicPartition(t, p) for t, parts in zk.topics.items() for p in parts)
        if allow_unknown:
            tps.append(TopicPartition("ghost", 0))
        return data.draw(st.lists(st.sampled_from(tps), min_size=1, max_size=3, unique=True), label="partitions")

    @precondition(lambda self: self.zk.topics)
    @rule(data=st.data())
    def request_reassignment(self, data):
        zk = self.zk
        chosen = self._some_partitions(data, allow_unknown=False)
        plan = dict(zk.plan or ())
        candidates = sorted(zk.ever_registered)
        for t in chosen:
            rf = len(zk.topics[t.topic][t.partition].target_replicas)
            rf = data.draw(st.sampled_from([rf, rf, max(1, rf - 1), rf + 1]), label="target rf")
            if rf > len(candidates):
                continue
            target = data.draw(st.permutations(candidates), label="target order")[:rf]
            plan[t] = tuple(target)
        if not plan:
            return
        zk.plan, zk.plan_version = tuple(sorted(plan.items())), zk.plan_version + 1 if zk.plan is not None else 0
        self.do(E.ReassignmentRequested(at=self.tick(), exists=True, partitions=zk.plan, zk_version=zk.plan_version))

    @precondition(lambda self: self.zk.topics)
    @rule(data=st.data())
    def request_preferred_election_znode(self, data):
        zk = self.zk
        zk.preferred = tuple(self._some_partitions(data))
        zk.preferred_version = zk.preferred_version + 1 if zk.preferred_version >= 0 else 0
        self.do(E.PreferredElectionRequested(at=self.tick(), exists=True, partitions=zk.preferred,
                                             zk_version=zk.preferred_version))

    @rule(data=st.data(), kind=st.sampled_from(["preferred", "unclean"]), everything=st.booleans())
    def request_leader_election(self, data, kind, everything):
        self.unclean_requested |= kind == "unclean"
        tps = None if everything or not self.zk.topics else tuple(self._some_partitions(data))
        self.do(E.LeaderElectionRequested(at=self.tick(), request_id=next(self.request_ids),
                                          election_type=kind, partitions=tps))

    @precondition(lambda self: REBALANCE_TIMER in self.timers)
    @rule()
    def rebalance_timer_fires(self):
        self.do(E.TimerFired(at=self.tick(), name=REBALANCE_TIMER))

    # -- partition leaders ----------------------------------------------------------------------

    def _isr_change(self, data, t: TopicPartition):
        zk = self.zk
        li = zk.states[t]
        rs = zk.topics[t.topic][t.partition].replicas
        joiners = [r for r in rs if r not in li.isr and r in zk.brokers and r not in self.shutting_down]
        leavers = [r for r in li.isr if r != li.leader]
        moves = [("join", r) for r in joiners] + [("leave", r) for r in leavers]
        if not moves:
            return False
        kind, r = data.draw(st.sampled_from(moves), label="isr change")
        self._leader_writes_isr(t, li.isr + (r,) if kind == "join" else tuple(x for x in li.isr if x != r))
        self._observe(t, data)
        return True

    @precondition(lambda self: self._leading())
    @rule(data=st.data())
    def leader_changes_isr(self, data):
        self._isr_change(data, data.draw(st.sampled_from(self._leading()), label="partition"))

    @precondition(lambda self: self._leading())
    @rule(data=st.data())
    def followers_catch_up(self, data):
        """Every live target replica of a reassigning partition joins its ISR."""
        zk = self.zk
        candidates = [t for t in self._leading() if zk.topics[t.topic][t.partition].adding] or self._leading()
        t = data.draw(st.sampled_from(candidates), label="partition")
        li = zk.states[t]
        joiners = tuple(r for r in zk.topics[t.topic][t.partition].replicas
                        if r not in li.isr and r in zk.brokers and r not in self.shutting_down)
        if joiners:
            self._leader_writes_isr(t, li.isr + joiners)
            self._observe(t, data)

    @precondition(lambda self: any(isinstance(w, C.WritePartitionStates) for w in self.writer))
    @rule(data=st.data())
    def leader_races_controller_write(self, data):
        """A leader changes the ISR of a partition the controller is writing right now."""
        zk = self.zk
        racing = sorted({pw.tp for w in self.writer if isinstance(w, C.WritePartitionStates) for pw in w.writes
                         if pw.tp in zk.states and zk.states[pw.tp].leader in zk.brokers
                         and zk.partition_exists(pw.tp)})
        if racing:
            self._isr_change(data, data.draw(st.sampled_from(racing), label="raced partition"))

    # -- the runtime's queues -----------------------------------------------------------------

    @precondition(lambda self: self.writer)
    @rule(delay=st.booleans())
    def writes_land(self, delay):
        """The writer applies queued znode writes up to and including the next partition-state
        write, whose outcome is delivered now or later."""
        while self.writer:
            outcome = self._land(self.writer.pop(0))
            if outcome is not None:
                self.outcomes.append(outcome)  # one writer, one event queue: outcomes stay in order
                if not delay:
                    while self.outcomes:
                        self.do(self.outcomes.pop(0))
                return

    @precondition(lambda self: self.writer and isinstance(self.writer[0], C.WritePartitionStates)
                  and len(self.writer[0].writes) >= 2)
    @rule(data=st.data(), delay=st.booleans())
    def write_lands_in_part(self, data, delay):
        """The first chunk of a large write lands before the rest, and the writer reports it
        (`final=False`); writes of the chunk that conflict are retried with the rest, whose
        outcome is final."""
        w = self.writer[0]
        k = data.draw(st.integers(1, len(w.writes) - 1), label="writes landing first")
        landed, left = [], []
        for pw in w.writes[:k]:
            (landed if self._apply_one(pw) else left).append(pw)
        self.writer[0] = attrs.evolve(w, writes=tuple(left) + w.writes[k:])
        if landed:
            self.outcomes.append(E.PartitionStatesWritten(at=self.tick(), write_id=w.write_id,
                                                          landed=tuple(pw.tp for pw in landed), final=False))
            if not delay:
                while self.outcomes:
                    self.do(self.outcomes.pop(0))

    @precondition(lambda self: self.outcomes)
    @rule()
    def delayed_outcome_delivered(self):
        self.do(self.outcomes.pop(0))

    @precondition(lambda self: self.watches)
    @rule()
    def watch_fires(self):
        self.do(self._watch_event(self.watches.pop(0)))

    @rule()
    def runtime_settles(self):
        """Deliver everything in flight, in order, until nothing is left."""
        for _ in range(500):
            if self.outcomes:
                self.do(self.outcomes.pop(0))
            elif self.writer:
                outcome = self._land(self.writer.pop(0))
                if outcome is not None:
                    self.do(outcome)
            elif self.watches:
                self.do(self._watch_event(self.watches.pop(0)))
            else:
                break
        else:
            raise AssertionError("the runtime never settles: writes keep coming")
        if self.active and CHECK_CACHE_MATCHES_ZK_WHEN_QUIET:
            self._check_cache_matches_zk()

    def _check_cache_matches_zk(self):
        zk = self.zk
        for t, info in self.state.partitions.items():
            if info.leader_isr is not None:
                assert zk.states.get(t) == info.leader_isr, (
                    f"{t}: once quiet, the cache holds {info.leader_isr} but ZooKeeper {zk.states.get(t)}")

    # -- controller failover ---------------------------------------------------------------------

    @precondition(lambda self: self.active)
    @rule(data=st.data(), how=st.sampled_from(["resigned", "fenced", "fresh node"]))
    def controller_failover(self, data, how):
        self._forget_incarnation(landed=data.draw(st.integers(0, len(self.writer)), label="old writes landed"))
        if how == "resigned":
            self.do(E.ControllerResigned(at=self.tick(), reason="session expired"))
        elif how == "fenced":
            _, commands = self.do(E.ControllerFenced(at=self.tick(), reason="epoch moved"))
            assert of_type(commands, C.Resign), "a fenced controller must resign"
        self._elect(fresh=how == "fresh node")

    @precondition(lambda self: self.active)
    @rule(data=st.data())
    def controller_resigns(self, data):
        self._forget_incarnation(landed=data.draw(st.integers(0, len(self.writer)), label="old writes landed"))
        self.do(E.ControllerResigned(at=self.tick(), reason="session expired"))
        assert not self.state.active

    @precondition(lambda self: not self.active)
    @rule()
    def controller_elected(self):
        self._elect(fresh=False)

    # -- inputs the core must refuse or ignore -----------------------------------------------------

    @rule(data=st.data(), kind=st.sampled_from(["outcome", "lai", "stop", "timer", "znode", "shutdown", "election"]))
    def refused_input(self, data, kind):
        at = self.tick()
        some_tp = TopicPartition("a", 0)
        if kind == "outcome":
            known = set(self.state.pending.keys())
            write_id = max(known | {self.state.next_write_id}) + 1 + data.draw(st.integers(0, 3))
            event = E.PartitionStatesWritten(at=at, write_id=write_id, versions=((some_tp, 7),))
        elif kind == "lai":
            event = E.LeaderAndIsrResponded(at=at, broker_id=1, errors=((some_tp, "NOT_LEADER"),))
        elif kind == "stop":
            event = E.StopReplicaResponded(at=at, broker_id=1, delete=False, partitions=(some_tp,))
        elif kind == "timer":
            event = E.TimerFired(at=at, name="no-such-timer")
        elif kind == "znode":
            event = E.ZnodeWriteFailed(at=at, what="/admin/reassign_partitions", reason="BadVersion")
        elif kind == "shutdown":
            unknown = [b for b in BROKER_IDS if b not in (self.state.brokers if self.active else {})]
            if not unknown:
                return
            event = E.ControlledShutdownRequested(at=at, request_id=next(self.request_ids),
                                                  broker_id=unknown[0], broker_epoch=5)
        else:
            event = E.LeaderElectionRequested(at=at, request_id=next(self.request_ids), election_type="dirty")
        self.do(event, refused=True)


# The default run is derandomized (the same examples every time: CI cannot flake) and takes a few
# seconds; the slow run explores fresh examples, longer ones, for as long as it is given.
FAST = settings(max_examples=100, stateful_step_count=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])
SLOW = settings(FAST, max_examples=3000, stateful_step_count=100, derandomize=False)


def test_controller_core_keeps_the_cluster_invariants():
    run_state_machine_as_test(ControllerMachine, settings=FAST)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_controller_core_keeps_the_cluster_invariants_long():
    run_state_machine_as_test(ControllerMachine, settings=SLOW)


# =================================================================================================
# Regressions: the minimal examples of the core bugs the machine found, one test each. Most came
# from one design flaw: a decision could write a partition while an earlier write to it was still
# in flight, chaining on the version it predicted. The core now defers every event while a write is
# in flight (step.py), so those sequences become "the later event waits for the outcome"; each test
# below replays its original sequence and checks the behaviour that replaced the bug.
# =================================================================================================

A0 = tp("a", 0)


def _write(commands) -> C.WritePartitionStates:
    writes = of_type(commands, C.WritePartitionStates)
    assert len(writes) == 1, commands
    return writes[0]


def _views(commands, cls=C.SendLeaderAndIsr):
    return [(c.broker_id, v) for c in of_type(commands, cls) for v in c.partitions]


def _landed(v, *states: LeaderIsr) -> bool:
    return any((v.leader, v.leader_epoch, v.isr, v.zk_version) == (s.leader, s.leader_epoch, s.isr, s.zk_version)
               for s in states)


def _lands(s, w: C.WritePartitionStates):
    """Every write of `w` lands as predicted."""
    return step(s, E.PartitionStatesWritten(at=AT, write_id=w.write_id,
                                            versions=tuple((pw.tp, pw.leader_isr.zk_version) for pw in w.writes)))


def test_released_requests_carry_the_state_that_landed_not_a_later_in_flight_one():
    s, _ = elected(brokers=(1, 2, 3), topics={"a": [[1, 2, 3]]})  # a-0: leader 1, ISR 1,2,3, version 0
    s, c1 = step(s, E.BrokersChanged(at=AT, brokers=(broker(1), broker(2))))  # W1: ISR 1,2 (epoch 1, v1)
    w1 = _write(c1)
    s, c2 = step(s, E.BrokersChanged(at=AT, brokers=(broker(1),)))  # waits for W1
    assert c2 == () and len(s.deferred) == 1
    landed = w1.writes[0].leader_isr
    s, released = step(s, E.PartitionStatesWritten(at=AT, write_id=w1.write_id, versions=((A0, 1),)))
    views = _views(released)
    assert views, "W1's LeaderAndIsr to broker 1 is released"
    assert all(_landed(v, landed) for _, v in views), views
    w2 = _write(released)  # then the deferred failure is decided on the landed state
    assert w2.writes[0].expected_version == 1 and w2.writes[0].leader_isr.isr == (1,)


def test_a_decision_without_writes_does_not_send_an_in_flight_state():
    s, _ = elected(brokers=(1, 2), topics={"a": [[2, 1]]})  # a-0: leader 2, ISR 2,1, epoch 0, version 0
    before = leader_isr(s, "a", 0)
    # broker 1 (a follower) shuts down: W1 = ISR 2 at epoch 1, version 1, in flight
    s, c1 = step(s, E.ControlledShutdownRequested(at=AT, request_id=1, broker_id=1, broker_epoch=101))
    w1 = _write(c1)
    # broker 1 restarts before W1's outcome: that decision waits, nothing is sent
    s, c2 = step(s, E.BrokersChanged(at=AT, brokers=(broker(1, epoch=201), broker(2))))
    assert c2 == ()
    # W1 conflicts (leader 2 rewrote the ISR first): brokers are only ever told what ZooKeeper holds
    fresh = LeaderIsr(2, 0, (2, 1), 1, 1)
    s, c3 = step(s, E.PartitionStatesWritten(at=AT, write_id=w1.write_id, conflicts=((A0, fresh),)))
    assert all(_landed(v, before, fresh) for _, v in _views(c3) + _views(c3, C.SendUpdateMetadata)), c3
    retry = _write(c3)
    s, c4 = _lands(s, retry)
    landed = retry.writes[0].leader_isr
    assert all(_landed(v, landed) for _, v in _views(c4) + _views(c4, C.SendUpdateMetadata)), c4
    assert s.deferred == () and s.brokers[1].epoch == 201


def test_leader_epoch_in_state_never_goes_back_when_a_leader_wins_a_race():
    s, _ = elected(brokers=(1, 2), topics={"a": [[2, 1]]})
    # broker 1 shuts down: W1 = leader 2, ISR 2, epoch 1 (version 1 predicted)
    s, c1 = step(s, E.ControlledShutdownRequested(at=AT, request_id=1, broker_id=1, broker_epoch=101))
    assert leader_isr(s, "a", 0).leader_epoch == 1
    # leader 2 removed 1 itself first: version 1 holds its write, at leader epoch 0; the
    # notification waits for W1's outcome instead of overwriting the write in flight
    s, _ = step(s, E.PartitionStatesObserved(at=AT, states=((A0, LeaderIsr(2, 0, (2,), 1, 1)),)))
    assert leader_isr(s, "a", 0).leader_epoch >= 1


def test_a_missing_state_znode_does_not_leave_an_online_partition_without_leader():
    s, _ = elected(brokers=(1, 2), topics={"a": [[1, 2]]})
    s, c1 = step(s, E.BrokersChanged(at=AT, brokers=(broker(2),)))  # leader 1 dies: elect 2 (W1)
    w1 = _write(c1)
    s, commands = step(s, E.PartitionStatesWritten(at=AT, write_id=w1.write_id, conflicts=((A0, None),)))
    info = s.partitions[A0]
    assert not (info.state is PartitionState.ONLINE and info.leader_isr is None), info
    assert info.state is PartitionState.OFFLINE and not of_type(commands, C.WritePartitionStates)


def test_a_conflict_retry_does_not_resurrect_a_partition_being_deleted():
    s, _ = elected(brokers=(1, 2), topics={"a": [[1, 2]]}, states={A0: LeaderIsr(2, 0, (1, 2), 1, 0)})
    s, c1 = step(s, E.PreferredElectionRequested(at=AT, exists=True, partitions=(A0,)))  # W1: elect 1
    w1 = _write(c1)
    s, c2 = step(s, E.TopicDeletionsRequested(at=AT, topics=frozenset({"a"})))  # waits for W1
    assert c2 == ()
    # leader 2 rewrote its ISR meanwhile: W1 conflicts and is re-decided before the deletion
    fresh = LeaderIsr(2, 0, (2, 1), 1, 1)
    s, c3 = step(s, E.PartitionStatesWritten(at=AT, write_id=w1.write_id, conflicts=((A0, fresh),)))
    retry = _write(c3)
    assert retry.writes[0].leader_isr.leader == 1 and s.deferred
    s, c4 = _lands(s, retry)  # now the deletion runs: the partition goes away, no new leader
    assert s.partitions[A0].state is PartitionState.NON_EXISTENT
    moves = [e for log in of_type(c4, C.LogStateChanges) for e in log.entries if e.ok and e.replica == -1]
    assert moves, "the deletion logged no partition transition"
    for e in moves:
        assert partition_transition_ok(P_BY_NAME[e.from_state], P_BY_NAME[e.to_state]), e
    assert not any(w.leader_isr.leader not in (NO_LEADER, 1) for c in of_type(c4, C.WritePartitionStates)
                   for w in c.writes), "no new leader for a topic being deleted"


def test_a_conflict_retry_still_removes_the_replicas_the_decision_took_offline():
    s, _ = elected(brokers=(1, 2), topics={"a": [[2]]})
    s, _ = run(s, E.ReassignmentRequested(at=AT, exists=True, partitions=((A0, (1,)),)))  # RS 1,2 (+1 -2)
    # the admin changes its mind: back to [2]; replica 1 is stopped and removed, RS = 2
    s, c1 = step(s, E.ReassignmentRequested(at=AT, exists=True, partitions=((A0, (2,)),)))
    w1 = _write(c1)
    assert s.partitions[A0].assignment.replicas == (2,)
    # leader 2 (still on the old assignment) had added 1 to the ISR: W1 conflicts
    fresh = LeaderIsr(2, 1, (2, 1), 2, w1.writes[0].expected_version + 1)
    s, commands = step(s, E.PartitionStatesWritten(at=AT, write_id=w1.write_id, conflicts=((A0, fresh),)))
    retry = _write(commands)
    # Kafka's removeReplicasFromIsr re-reads the znode and removes the offline replica
    assert 1 not in retry.writes[0].leader_isr.isr, retry


def test_a_conflict_does_not_undo_a_later_election():
    s, _ = elected(brokers=(1, 2, 3), topics={"a": [[1, 2, 3]]})
    s, c1 = step(s, E.BrokersChanged(at=AT, brokers=(broker(1), broker(2))))  # W1: shrink 3
    w1 = _write(c1)
    s, c2 = step(s, E.BrokersChanged(at=AT, brokers=(broker(2),)))  # leader 1 dies: waits for W1
    assert c2 == ()
    # leader 1 had dropped 3 itself before dying: W1 conflicts; nothing left to shrink, so the
    # deferred failure of 1 is decided on ZooKeeper's content and elects 2
    fresh = LeaderIsr(1, 0, (1, 2), 1, 1)
    s, c3 = step(s, E.PartitionStatesWritten(at=AT, write_id=w1.write_id, conflicts=((A0, fresh),)))
    w2 = _write(c3)
    assert w2.writes[0].expected_version == 1 and w2.writes[0].leader_isr.leader == 2
    s, _ = _lands(s, w2)
    info = s.partitions[A0]
    assert info.state is PartitionState.ONLINE and info.leader_isr.leader == 2 and info.leader_isr.zk_version == 2


def test_conflict_aliasing_never_elects_outside_the_isr():
    s, _ = elected(brokers=(1, 2, 3), topics={"a": [[2, 1, 3]]}, states={A0: LeaderIsr(1, 0, (1, 2, 3), 1, 0)})
    s, c1 = step(s, E.PreferredElectionRequested(at=AT, exists=True, partitions=(A0,)))  # W1: 2 leads (v1)
    w1 = _write(c1)
    s, c2 = step(s, E.BrokersChanged(at=AT, brokers=(broker(1), broker(2))))  # 3 dies: waits for W1
    assert c2 == ()
    # leader 1 shrank 2 out of the ISR first, making version 1
    zk = LeaderIsr(1, 0, (1, 3), 1, 1)
    s, c3 = step(s, E.PartitionStatesWritten(at=AT, write_id=w1.write_id, conflicts=((A0, zk),)))
    (w2,) = of_type(c3, C.WritePartitionStates)  # the preferred retry fails; 3's removal is built on v1
    (pw,) = w2.writes
    assert pw.expected_version == zk.zk_version
    assert pw.leader_isr.leader in zk.isr, f"{pw} makes {pw.leader_isr.leader} leader; ISR was {zk.isr}"
    assert set(pw.leader_isr.isr) <= set(zk.isr), f"{pw} grows the ISR {zk.isr}"


def test_a_re_reassignment_that_completes_at_once_is_processed_once():
    s, _ = elected(brokers=(1, 2), topics={"a": [[2]]})
    s, _ = run(s, E.ReassignmentRequested(at=AT, exists=True, partitions=((A0, (1,)),)))
    epoch = leader_isr(s, "a", 0).leader_epoch
    s, commands = step(s, E.ReassignmentRequested(at=AT, exists=True, partitions=((A0, (2,)),)))
    assert not of_type(commands, C.WatchPartitionStates), commands
    assert len(of_type(commands, C.UnwatchPartitionStates)) == 1
    assert _write(commands).writes[0].leader_isr.leader_epoch == epoch + 1
    assert s.reassignment_plan == () and of_type(commands, C.WriteReassignmentPlan)


def test_an_init_conflict_does_not_adopt_a_state_outside_the_assignment():
    s, _ = elected(brokers=(1, 2, 4), topics={})
    s, c1 = step(s, E.TopicsChanged(at=AT, topics=frozenset({"a"}),
                                    assignments=(("a", ((0, ReplicaAssignment((4, 2))),)),)))
    w1 = _write(c1)
    assert w1.writes[0].expected_version == NO_ZK_VERSION
    # a state znode left behind by an earlier a-0 (assigned 2,1) that the topic znode lost
    orphan = LeaderIsr(2, 3, (2, 1), 1, 5)
    s, commands = step(s, E.PartitionStatesWritten(at=AT, write_id=w1.write_id, conflicts=((A0, orphan),)))
    retry = _write(commands).writes[0]
    assert retry.expected_version == orphan.zk_version and retry.leader_isr.leader_epoch == orphan.leader_epoch + 1
    assert set(retry.leader_isr.isr) <= {4, 2}, retry
    s, released = _lands(s, _write(commands))  # the retry's LeaderAndIsr waits for it to land
    views = _views(commands) + _views(released)
    assert views, "no LeaderAndIsr for a-0"
    assert all(set(v.isr) <= {4, 2} for _, v in views), "brokers are told an ISR outside RS"
    assert set(leader_isr(s, "a", 0).isr) <= {4, 2}


def test_a_later_write_landing_after_a_conflict_leaves_the_cache_equal_to_zookeeper():
    s, _ = elected(brokers=(1, 2), topics={"a": [[1, 2]]})  # leader 1, ISR 1,2, epoch 0, version 0
    s, c1 = step(s, E.BrokersChanged(at=AT, brokers=(broker(1), broker(2, epoch=202))))  # W1: shrink 2
    w1 = _write(c1)
    leaders_write = LeaderIsr(1, 0, (1,), 1, 1)  # leader 1 dropped 2 itself: version 1
    s, _ = step(s, E.PartitionStatesObserved(at=AT, states=((A0, leaders_write),)))  # waits
    s, _ = step(s, E.BrokersChanged(at=AT, brokers=(broker(1, epoch=201), broker(2, epoch=202))))  # waits
    zk = leaders_write
    s, commands = step(s, E.PartitionStatesWritten(at=AT, write_id=w1.write_id, conflicts=((A0, zk),)))
    for _ in range(5):  # land whatever follows, as ZooKeeper would, until nothing is in flight
        writes = of_type(commands, C.WritePartitionStates)
        if not writes:
            break
        (w,) = writes
        (pw,) = w.writes
        assert pw.expected_version == zk.zk_version
        zk = pw.leader_isr
        s, commands = _lands(s, w)
    assert not s.pending and not s.deferred
    assert leader_isr(s, "a", 0) == zk
