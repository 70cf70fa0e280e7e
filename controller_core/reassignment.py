"""Partition reassignment (Kafka 2.4's onPartitionReassignment), on a Draft.

With OAR the original replicas and RAR (TRS) the target:

- A (not complete): RS = OAR + RAR with AR/RR persisted in the topic znode, leader epoch
  bumped and LeaderAndIsr sent to every replica, new replicas started (NewReplica). The
  controller then watches the partition's state znode until every target is in the ISR.
- B (complete): new replicas Online, RS = RAR, the leader moved if it is not a target (or is
  dead), removed replicas taken out of the ISR, stopped and deleted, the topic znode written,
  the partition dropped from `/admin/reassign_partitions`, and every broker told.

A reassignment whose targets are offline simply waits in phase A and resumes when they return.
"""
from __future__ import annotations

import numpy as np

from . import commands as C
from . import deletion
from . import partitions as P
from . import replicas as R
from .columns import PAD
from .draft import Draft
from .intents import WriteIntent
from .machines import ReplicaState
from .state import PartitionInfo
from .values import ReplicaAssignment, TopicPartition

RS = ReplicaState


def on_reassignment_requested(d: Draft, exists: bool, plan, problem: str | None, zk_version: int = -1) -> None:
    """`/admin/reassign_partitions` changed. Bad entries are rejected and removed from the
    znode; entries already in progress with the same target are left alone (the znode fires
    again on every rewrite, including the controller's own)."""
    if exists and 0 <= zk_version < d.plan_zk_version:
        return  # an older listing than this controller has seen or written: an echo of its own rewrites
    d.plan_zk_version = zk_version if exists else -1
    if not exists:
        d.reassignment_plan = ()
        return
    if problem is not None:
        d.reject("partition reassignment", f"malformed /admin/reassign_partitions: {problem}; removing it")
        d.reassignment_plan = ()
        d.command(C.WriteReassignmentPlan(partitions=(), expected_version=zk_version))
        d.plan_zk_version = -1
        return
    kept, actions = [], []
    changed = False
    # brokers registered now or ever: enough for nearly every target; the scan of every
    # assignment (10 ms at 10,000 partitions, and this znode fires again on each of our own
    # rewrites) only when a target names a broker outside them
    known_brokers = frozenset(d.brokers.keys()) | d.seen_brokers
    scanned = False
    seen = set()
    # the assignments alone, read in bulk (the whole plan is listed again on every rewrite)
    assignments = d.assignments([tp for tp, _ in plan])
    for (tp, target), assignment in zip(plan, assignments):
        target = tuple(target)
        if not scanned and any(r not in known_brokers for r in target):
            known_brokers, scanned = _known_brokers(d), True
        reason = "listed twice" if tp in seen else validate(d, tp, target, known_brokers, assignment)
        seen.add(tp)
        if reason is not None:
            d.reject("partition reassignment", f"{tp}: {reason}")
            changed = True
            continue
        if tp in d.reassigning:
            kept.append((tp, target))
            if assignment.target_replicas != target:  # the admin changed its mind
                actions.append((tp, target))
            continue
        if assignment.replicas == target:
            d.reject("partition reassignment", f"{tp}: replicas are already {list(target)}; nothing to do")
            changed = True
            continue
        kept.append((tp, target))
        actions.append((tp, target))
    # the plan is set before anything runs: a reassignment that completes at once removes
    # itself from it, and must not be put back (or started a second time)
    d.reassignment_plan = tuple(kept)
    for tp, target in actions:
        on_partition_reassignment(d, tp, d.info(tp).assignment.reassign_to(target))
    if changed:
        d.plan_dirty = True


def _known_brokers(d: Draft) -> frozenset[int]:
    """Every broker the cluster knows: registered, seen, or holding a replica (read from the
    image's replica column: a scan built every partition's value, ~10 ms at 10,000)."""
    known = set(d.brokers.keys()) | set(d.seen_brokers)
    image = d.partitions
    if image.odd:
        for _, info in d.scan():
            known.update(info.assignment.replicas)
    elif image.count:
        replicas = image.column("replicas")[image.column("present")]
        known.update(np.unique(replicas[replicas != PAD]).tolist())
    return frozenset(known)


def validate(d: Draft, tp: TopicPartition, target: tuple, known_brokers: frozenset[int],
             assignment: ReplicaAssignment | None) -> str | None:
    """Why a requested target is unacceptable, or None. Offline brokers are acceptable (the
    reassignment waits for them); brokers the cluster has never known are not. `assignment`:
    the partition's as it stands (None: no such partition)."""
    if assignment is None or d.topics.get(tp.topic) is None:
        return "unknown topic or partition"
    if d.queued_for_deletion(tp.topic):
        return "the topic is being deleted"
    if not target:
        return "empty replica list"
    if any(type(r) is not int or r < 0 for r in target):
        return f"invalid broker id in {list(target)}"
    if len(set(target)) != len(target):
        return f"duplicate replicas in {list(target)}"
    unknown = sorted(r for r in target if r not in known_brokers)
    if unknown:
        return f"unknown broker(s) {unknown}"
    return None


def is_complete(d: Draft, tp: TopicPartition, ra: ReplicaAssignment) -> bool:
    li = d.info(tp).leader_isr
    if li is None:
        return False
    isr = li.isr
    return all(r in isr for r in ra.target_replicas)


def on_partition_reassignment(d: Draft, tp: TopicPartition, ra: ReplicaAssignment) -> None:
    deletion.mark_ineligible(d, (tp.topic,))
    _update_current(d, tp, ra)
    if not is_complete(d, tp, ra):
        _bump_leader_epoch_and_send(d, tp, ra)  # A1
        # A2; replicas already started (a resumed reassignment) keep their state
        R.move(d, [(tp, r) for r in ra.adding if d.info(tp).replica_state(r) is RS.NON_EXISTENT], RS.NEW)
        return
    R.move(d, [(tp, r) for r in ra.adding], RS.ONLINE)  # B1
    completed = ReplicaAssignment(ra.target_replicas)
    _set_assignment(d, tp, completed)  # B2
    _move_leader_if_required(d, tp, completed)  # B3
    _stop_removed(d, tp, ra.removing)  # B4, B5
    d.dirty_topics.add(tp.topic)  # B6
    _remove_from_reassigning(d, tp, completed)  # B7
    d.requests.send_update_metadata_to_all((tp,))  # B8
    deletion.resume_for_topics(d, (tp.topic,))


def maybe_complete(d: Draft, tp: TopicPartition) -> None:
    """A reassigning partition's ISR changed: finish the reassignment once targets caught up."""
    if tp in d.reassigning:
        info = d.info(tp)
        if info is None:  # the partition is gone (its topic was deleted)
            d.reassigning = d.reassigning - {tp}
            d.command(C.UnwatchPartitionStates(partitions=(tp,)))
            return
        if is_complete(d, tp, info.assignment):
            on_partition_reassignment(d, tp, info.assignment)


def _set_assignment(d: Draft, tp: TopicPartition, ra: ReplicaAssignment) -> None:
    info = d.info(tp)
    d.put(tp, PartitionInfo(ra, info.leader_isr, info.state, info.replica_states))


def _update_current(d: Draft, tp: TopicPartition, ra: ReplicaAssignment) -> None:
    current = d.info(tp).assignment
    if current != ra:
        d.dirty_topics.add(tp.topic)  # U1
        _set_assignment(d, tp, ra)  # U2
        unneeded = [r for r in current.replicas if r not in ra.replicas]
        if unneeded:
            _stop_removed(d, tp, unneeded)
    if tp not in d.reassigning:
        d.reassigning = d.reassigning | {tp}
        d.command(C.WatchPartitionStates(partitions=(tp,)))


def _bump_leader_epoch_and_send(d: Draft, tp: TopicPartition, ra: ReplicaAssignment) -> None:
    info = d.info(tp)
    li = info.leader_isr
    if li is None or li.controller_epoch > d.epoch:
        d.record(info.state, info.state, tp, ok=False,
                 detail="cannot send LeaderAndIsr with the new assignment: no leader state or a newer controller wrote it")
        return
    d.write_change(tp, info, li.leader, li.isr, (WriteIntent.BUMP,))
    d.requests.send_leader_and_isr(ra.replicas, tp)


def _move_leader_if_required(d: Draft, tp: TopicPartition, completed: ReplicaAssignment) -> None:
    li = d.info(tp).leader_isr
    if li is not None and li.leader in completed.replicas and li.leader in d.live:
        _bump_leader_epoch_and_send(d, tp, completed)
    else:
        P.to_online(d, (tp,), P.REASSIGN)


def _stop_removed(d: Draft, tp: TopicPartition, removed) -> None:
    replicas = [(tp, r) for r in removed]
    R.move(d, replicas, RS.OFFLINE)
    R.move(d, replicas, RS.DELETION_STARTED)
    R.move(d, replicas, RS.DELETION_SUCCESSFUL)
    R.move(d, replicas, RS.NON_EXISTENT)


def _remove_from_reassigning(d: Draft, tp: TopicPartition, completed: ReplicaAssignment) -> None:
    if tp in d.reassigning:
        d.reassigning = d.reassigning - {tp}
        d.command(C.UnwatchPartitionStates(partitions=(tp,)))
        remaining = tuple(e for e in d.reassignment_plan if e[0] != tp)
        if len(remaining) != len(d.reassignment_plan):
            d.reassignment_plan = remaining
            d.plan_dirty = True


def resume_in_progress(d: Draft) -> None:
    """At failover: restart reassignments persisted in topic znodes (adding/removing set) that
    the admin znode did not already cover, except in topics being deleted (failover.py says why)."""
    resumable = sorted(tp for tp in _being_reassigned(d)
                       if tp not in d.reassigning and not d.queued_for_deletion(tp.topic))
    for tp in resumable:
        on_partition_reassignment(d, tp, d.info(tp).assignment)


def _being_reassigned(d: Draft) -> list[TopicPartition]:
    """The partitions whose assignment has replicas being added or removed: read from the
    image's `moving` column (a new controller's image holds 100,000 partitions and a handful of
    reassignments), or from every partition's value when the image keeps some whole (`odd`)."""
    image = d.partitions
    if image.odd:
        return [tp for tp, info in d.scan() if info.assignment.is_being_reassigned]
    return image.tps(np.flatnonzero(image.column("present") & image.column("moving")))
