"""Becoming the controller (Kafka's onControllerFailover), from a full snapshot of ZooKeeper.

Order matters and follows Kafka: the context is rebuilt from the snapshot, UpdateMetadata goes
to every live broker before anything else, then the replica and partition state machines start
(live replicas Online and told their state, dead ones Offline and out of the ISR, leaderless
partitions elected), then reassignments, deletions and preferred elections left pending by the
previous controller resume, and the rebalance timer is armed.

The partitions are rebuilt by `_build`, one `PartitionInfo` each: the specification. In the
common case `columnar_load.load` builds the same image as columns straight from the snapshot
(tests/core/test_failover_load.py holds it to `_build`), and the machines start over the columns
(`columnar_failover`).
"""
from __future__ import annotations

from . import columnar_failover, columnar_load
from . import commands as C
from . import deletion
from . import partitions as P
from . import reassignment
from . import rebalance
from . import replicas as R
from .draft import Draft
from .request_batch import ALL, Outbox, emit_outbox
from .events import ControllerElected
from .machines import PartitionState, ReplicaState
from .pmap import pmap
from .state import ControllerState, PartitionInfo, TopicInfo, _pair
from .topics import validate_assignment
from .values import TopicPartition


def on_elected(state: ControllerState, event: ControllerElected) -> tuple[ControllerState, tuple]:
    snap = event.snapshot
    brokers = pmap({b.broker_id: b for b in snap.brokers})
    live = frozenset(brokers.keys())
    loaded = columnar_load.load(snap.topics, snap.partition_states, live)
    if loaded is not None:  # the common case: the image's columns straight from the snapshot
        topics, built, rejected = loaded
    else:
        topics, built, rejected = _build(snap, live)
    for topic, problem in snap.malformed_topics:
        rejected.append(f"topic {topic}: malformed topic znode ({problem}); ignoring it")
    base = ControllerState(
        config=state.config,
        active=True,
        epoch=event.epoch,
        epoch_zk_version=event.epoch_zk_version,
        brokers=brokers,
        seen_brokers=live | state.seen_brokers,
        topics=pmap(topics),
        topic_configs=pmap({t: tuple(sorted(c)) for t, c in snap.topic_configs if c}),
        partitions=built,
        next_write_id=state.next_write_id,
    )
    d = Draft(base, cause=f"ControllerElected(epoch {event.epoch})")
    if built.__class__ is dict and not base.partitions.odd:
        d.seed(built)  # the values just built are what the image reads back: no second build
    for reason in rejected:
        d.reject("topic", reason)
    _init_deletion(d, snap.topics_to_delete)
    # 1. UpdateMetadata to every live broker before any other request
    d.immediate.extend(emit_outbox(d.snapshot_state(), Outbox(um_brokers=live, um_partitions=ALL), known=d.known))
    if not columnar_failover.start_machines(d):  # a healthy cluster: the batch from the columns
        _start_machines(d, live)
    # 4. reassignments: the admin znode first, then those persisted in topic znodes
    if snap.reassignment is not None:
        r = snap.reassignment
        reassignment.on_reassignment_requested(d, r.exists, r.partitions, r.problem, r.zk_version)
    reassignment.resume_in_progress(d)
    # 5. deletions
    deletion.resume(d)
    # 6. a preferred election requested while there was no controller
    if snap.preferred_election is not None:
        pe = snap.preferred_election
        rebalance.on_preferred_requested(d, pe.exists, pe.partitions, pe.problem, pe.zk_version)
    # 7. the rebalance timer
    if state.config.auto_leader_rebalance_enable:
        d.command(C.ScheduleTimer(name=rebalance.REBALANCE_TIMER, delay_ms=rebalance.FIRST_REBALANCE_DELAY_MS))
    return d.finish()


def _build(snap, live: frozenset[int]) -> tuple[dict, dict, list]:
    """The snapshot's partitions one `PartitionInfo` each: the specification of
    `columnar_load.load`, and the build of what it declines. Returns the accepted topics, the
    partitions and the reasons topics were rejected."""
    leader_isrs = dict(snap.partition_states)
    rejected = []
    topics = {}
    built = {}
    for topic, assignment in snap.topics:
        assignment = dict(assignment)
        reason = validate_assignment(assignment, same_factor=False)  # reassignments may differ
        if reason is not None:
            rejected.append(f"topic {topic}: {reason}; ignoring it")
            continue
        topics[topic] = TopicInfo(len(assignment))
        for p, ra in assignment.items():
            tp = TopicPartition(topic, p)
            li = leader_isrs.get(tp)
            if li is None:
                pstate = PartitionState.NEW
            else:
                pstate = PartitionState.ONLINE if li.leader in live else PartitionState.OFFLINE
            rstates = tuple(_pair(r, ReplicaState.ONLINE if r in live else ReplicaState.DELETION_INELIGIBLE)
                            for r in ra.replicas)
            built[tp] = PartitionInfo(ra, li, pstate, rstates)
    return topics, built, rejected


def _start_machines(d: Draft, live: frozenset[int]) -> None:
    # 2. replica state machine: live replicas stay Online and are told their state ...
    offline_replicas = []
    # sorted: command order must not depend on the map's hash order (the replay re-executes
    # this with another interpreter, whose string hashes differ)
    for tp, info in sorted(d.scan()):
        replicas = info.assignment.replicas
        if info.leader_isr is not None:
            d.requests.send_leader_and_isr([r for r in replicas if r in live], tp)
        offline_replicas.extend((tp, r) for r in replicas if r not in live)
    # ... dead ones go Offline and leave the ISR
    offline_replicas.sort()
    R.move(d, [(tp, r) for tp, r in offline_replicas if not d.queued_for_deletion(tp.topic)], ReplicaState.OFFLINE)
    _repair_half_done_reassignments(d)
    # 3. partition state machine: elect New and Offline partitions
    P.trigger_online_state_change(d)


def _init_deletion(d: Draft, requested: frozenset[str]) -> None:
    unknown = sorted(t for t in requested if t not in d.topics)
    if unknown:
        d.reject("topic deletion", f"ignoring request to delete non-existing topics {', '.join(unknown)}")
        d.command(C.DeleteTopicDeletionRequests(topics=tuple(unknown)))
    queued = frozenset(t for t in requested if t in d.topics)
    if not queued:
        return
    if not d.config.delete_topic_enable:
        d.command(C.DeleteTopicDeletionRequests(topics=tuple(sorted(queued))))
        return
    # A half-done reassignment does not hold a queued deletion back here (Kafka 2.4 does): the
    # new controller elects no leader for a topic being deleted, so the reassignment could never
    # finish and the deletion would wait forever (the chaos soak found exactly that). The
    # deletion removes the unfinished assignment with the topic; `resume_in_progress` skips it.
    live = d.live
    ineligible = set()
    for topic in queued:
        for tp in d.partitions_of(topic):
            if any(r not in live for r in d.info(tp).assignment.replicas):
                ineligible.add(topic)
                break
    d.topics_to_delete = queued
    d.topics_ineligible_for_deletion = frozenset(ineligible)


def _repair_half_done_reassignments(d: Draft) -> None:
    """A predecessor fenced in the middle of completing a reassignment can leave a state znode
    whose leader or ISR members are no longer assigned (its topic-znode write landed, its
    partition-state writes did not; they are separate ZooKeeper operations here, not one blocking
    sequence as in Kafka). Kafka 2.4 would leave them until the leader shrinks its ISR; the new
    controller finishes the job instead: the leader moves to an assigned in-sync replica (the
    reassignment rule) and the unassigned replicas leave the ISR."""
    for tp, info in sorted(d.scan()):
        li = info.leader_isr
        replicas = info.assignment.replicas
        if li is None or li.controller_epoch > d.epoch or d.queued_for_deletion(tp.topic) \
                or all(r in replicas for r in li.isr):
            continue
        if li.leader != -1 and li.leader not in replicas and info.state is PartitionState.ONLINE:
            P.to_online(d, (tp,), P.REASSIGN)
        for r in li.isr:
            if r not in replicas:
                R.shrink_isr(d, tp, r)
