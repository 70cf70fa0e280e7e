"""The replica state machine's actions (Kafka's ZkReplicaStateMachine), on a Draft.

Moving a replica Offline is the one that writes: the replica leaves the ISR (never the last
member; if it led, the partition is left without a leader), which bumps the leader epoch, and
the remaining replicas are told. Every transition is checked against the table in
`machines.py`; a refused one is logged and changes nothing.
"""
from __future__ import annotations

from typing import Iterable

from .draft import Draft
from .intents import WriteIntent
from .machines import REPLICA_VALID_PREVIOUS, ReplicaState
from .state import PartitionInfo
from .values import NO_LEADER, ReplicaAssignment, TopicPartition

R = ReplicaState
OFFLINE = R.OFFLINE


def move(d: Draft, replicas: Iterable[tuple[TopicPartition, int]], target: ReplicaState) -> None:
    """Kafka's handleStateChanges(replicas, target)."""
    handler = _HANDLERS[target]
    valid = REPLICA_VALID_PREVIOUS[target]
    info_of = d.info
    for tp, replica in replicas:
        info = info_of(tp)
        current = info.replica_state(replica) if info is not None else R.NON_EXISTENT
        if info is None or current not in valid:
            d.record(current, target, tp, replica, ok=False,
                     detail="unknown partition" if info is None else "illegal transition")
            continue
        handler(d, tp, replica, info, current)


def _set(d: Draft, tp: TopicPartition, replica: int, current: ReplicaState, target: ReplicaState) -> None:
    info = d.info(tp)
    d.put(tp, info.with_replica_state(replica, None if target is R.NON_EXISTENT else target))
    d.record(current, target, tp, replica)


def _to_new(d: Draft, tp, replica, info: PartitionInfo, current) -> None:
    li = info.leader_isr
    if li is not None:
        if li.leader == replica:
            d.record(current, R.NEW, tp, replica, ok=False, detail="the replica is the current leader")
            return
        d.requests.send_leader_and_isr((replica,), tp, is_new=True)
    _set(d, tp, replica, current, R.NEW)


def _to_online(d: Draft, tp, replica, info: PartitionInfo, current) -> None:
    if current is R.NEW:
        a = info.assignment
        if replica not in a.replicas:
            # Kafka logs this as an error and repairs the assignment rather than losing the replica
            d.put(tp, PartitionInfo(ReplicaAssignment(a.replicas + (replica,), a.adding, a.removing),
                                    info.leader_isr, info.state, info.replica_states))
    elif info.leader_isr is not None:
        d.requests.send_leader_and_isr((replica,), tp)
    _set(d, tp, replica, current, R.ONLINE)


def _to_offline(d: Draft, tp, replica, info: PartitionInfo, current) -> None:
    d.requests.send_stop_replica(replica, tp, delete=False)
    li = info.leader_isr
    if li is None:
        d.requests.send_update_metadata_to_all((tp,))
    elif li.controller_epoch > d.epoch:
        d.record(current, OFFLINE, tp, replica, ok=False,
                 detail=f"state written by a newer controller epoch ({li.controller_epoch})")
        return
    else:
        if replica in li.isr:
            shrink_isr(d, tp, replica)
            info = d.info(tp)
        if tp.topic not in d.topics_to_delete:
            d.requests.send_leader_and_isr([r for r in info.assignment.replicas if r != replica], tp)
    d.put(tp, info.with_replica_state(replica, OFFLINE))
    d.record(current, OFFLINE, tp, replica)


def shrink_isr(d: Draft, tp: TopicPartition, replica: int) -> None:
    """Kafka's removeReplicasFromIsr for one partition: drop `replica` from the ISR unless it is
    the last member; if it led, the partition has no leader. A change bumps the leader epoch."""
    info = d.info(tp)
    li = info.leader_isr
    if li is None or replica not in li.isr:
        return
    leader = NO_LEADER if li.leader == replica else li.leader
    isr = li.isr if len(li.isr) == 1 else tuple(r for r in li.isr if r != replica)
    if leader == li.leader and isr == li.isr:
        return
    d.write_change(tp, info, leader, isr, (WriteIntent.SHRINK, replica))


def _to_deletion_started(d: Draft, tp, replica, info, current) -> None:
    d.requests.send_stop_replica(replica, tp, delete=True)
    _set(d, tp, replica, current, R.DELETION_STARTED)


def _to_plain(target: ReplicaState):
    def handler(d: Draft, tp, replica, info, current) -> None:
        _set(d, tp, replica, current, target)
    return handler


def _to_non_existent(d: Draft, tp, replica, info: PartitionInfo, current) -> None:
    a = info.assignment
    if replica in a.replicas:
        d.put(tp, PartitionInfo(
            ReplicaAssignment(tuple(r for r in a.replicas if r != replica),
                              tuple(r for r in a.adding if r != replica),
                              tuple(r for r in a.removing if r != replica)),
            info.leader_isr, info.state, info.replica_states))
    _set(d, tp, replica, current, R.NON_EXISTENT)


_HANDLERS = {
    R.NEW: _to_new,
    R.ONLINE: _to_online,
    R.OFFLINE: _to_offline,
    R.DELETION_STARTED: _to_deletion_started,
    R.DELETION_SUCCESSFUL: _to_plain(R.DELETION_SUCCESSFUL),
    R.DELETION_INELIGIBLE: _to_plain(R.DELETION_INELIGIBLE),
    R.NON_EXISTENT: _to_non_existent,
}


def replicas_on(d: Draft, brokers: frozenset[int]) -> list[tuple[TopicPartition, int]]:
    """Kafka's replicasOnBrokers: every (partition, replica) hosted by one of `brokers`."""
    found = []
    for tp, info in d.scan():
        for r in info.assignment.replicas:
            if r in brokers:
                found.append((tp, r))
    found.sort()
    return found


def replicas_of(d: Draft, tps: Iterable[TopicPartition]) -> list[tuple[TopicPartition, int]]:
    out = []
    for tp in tps:
        info = d.info(tp)
        if info is not None:
            out.extend((tp, r) for r in info.assignment.replicas)
    return out
