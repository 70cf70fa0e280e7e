"""The partition and replica state machines of Kafka 2.4, kept as data.

Each target state lists the states it may be entered from (Kafka's `validPreviousStates`).
Transitions are checked against these tables and nothing else; the README's diagrams are drawn
from them too, so the documentation cannot drift from the code.
"""
from __future__ import annotations

import enum


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    """Never created, or deleted."""
    NEW = "NewPartition"
    """Assigned replicas exist in the topic znode but no leader has been elected yet."""
    ONLINE = "OnlinePartition"
    """A leader has been elected and written to the partition's state znode."""
    OFFLINE = "OfflinePartition"
    """The elected leader died (or the topic is being deleted); a new election is due."""

    def __str__(self) -> str:
        return self.value

    # Members are singletons, so identity hashing is correct; Enum's own __hash__ is a Python
    # function and showed up as a third of a 10,000-partition failover step.
    __hash__ = object.__hash__


class ReplicaState(enum.Enum):
    NON_EXISTENT = "NonExistentReplica"
    """Not assigned, or fully deleted."""
    NEW = "NewReplica"
    """Just assigned (creation or reassignment); it may only be a follower."""
    ONLINE = "OnlineReplica"
    """Started on a live broker; part of the assigned replicas."""
    OFFLINE = "OfflineReplica"
    """Its broker died or it was told to stop; removed from the ISR."""
    DELETION_STARTED = "ReplicaDeletionStarted"
    """StopReplica(delete=true) sent; waiting for the broker's answer."""
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    """The broker deleted the replica."""
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    """Deletion failed or the broker is down; retried when the broker returns."""

    def __str__(self) -> str:
        return self.value

    __hash__ = object.__hash__


P = PartitionState
R = ReplicaState

PARTITION_VALID_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
}

REPLICA_VALID_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
}


def partition_transition_ok(current: PartitionState, target: PartitionState) -> bool:
    return current in PARTITION_VALID_PREVIOUS[target]


def replica_transition_ok(current: ReplicaState, target: ReplicaState) -> bool:
    return current in REPLICA_VALID_PREVIOUS[target]


def mermaid(table: dict) -> str:
    """A Mermaid state diagram of one table, for the README (generated, never hand-written)."""
    lines = ["stateDiagram-v2"]
    for target in table:
        for previous in sorted(table[target], key=lambda s: s.value):
            lines.append(f"    {previous.value} --> {target.value}")
    return "\n".join(lines)
