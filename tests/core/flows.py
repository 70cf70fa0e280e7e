"""What the core's flow tests share: the events they send and the commands they look for."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.values import LeaderIsr, ReplicaAssignment

from .builders import AT, broker, leader_isr, of_type, tp


def brokers_changed(*ids, epochs=None):
    epochs = epochs or {}
    return E.BrokersChanged(at=AT, brokers=tuple(broker(b, epochs.get(b)) for b in ids))


def sent_to(commands, cls):
    return {c.broker_id: c for c in of_type(commands, cls)}


def topics_changed(names, **assignments):
    return E.TopicsChanged(at=AT, topics=frozenset(names), assignments=tuple(
        (t, tuple((p, ReplicaAssignment(tuple(r))) for p, r in enumerate(parts))) for t, parts in assignments.items()))


def stop_replica_done(commands, errors=()):
    events = []
    for c in of_type(commands, C.SendStopReplica):
        if c.delete:
            events.append(E.StopReplicaResponded(at=AT, broker_id=c.broker_id, delete=True,
                                                 partitions=c.partitions, errors=errors))
    return events


def reassign(*entries):
    return E.ReassignmentRequested(at=AT, exists=True, partitions=tuple((tp(t, p), tuple(r)) for t, p, r in entries))


def catch_up(state, t, p, isr, version_bump=1):
    li = leader_isr(state, t, p)
    return E.PartitionStatesObserved(at=AT, source="reassignment", states=(
        (tp(t, p), LeaderIsr(li.leader, li.leader_epoch, tuple(isr), li.controller_epoch, li.zk_version + version_bump)),))
