"""Whole-cluster questions asked of a state, answered over the columns of the partition image.

Who asks: the metrics collector (Kafka's OfflinePartitionsCount, PreferredReplicaImbalanceCount,
UnderReplicatedPartitions, ReplicasToDeleteCount, ReplicasIneligibleToDeleteCount) on every
scrape, and the replay's audits. `cluster_counts_by_rules` is the readable definition, one
partition at a time; `cluster_counts` gives the same numbers with a few array operations
(tests/core/test_queries.py checks both on random states).
"""
from __future__ import annotations

import numpy as np

from . import vector_election as V
from .columns import P_CODE, PAD
from .machines import PartitionState, ReplicaState

_OFFLINE = P_CODE[PartitionState.OFFLINE]


def cluster_counts_by_rules(state) -> tuple[int, int, int, int, int]:
    """Kafka's definitions (KafkaController.updateMetrics), over one immutable state:
    offline = partitions whose leader is not a live (or shutting-down) broker, -1 included, or
    that have no leader state and are OfflinePartition; imbalance = partitions with a leader
    state whose leader is not the first replica (while a reassignment adds that replica: whether
    it is in the ISR); both leave out topics queued for deletion; under-replicated = ISR shorter
    than the assignment. Replicas to delete count the replicas of queued topics that are not
    ReplicaDeletionSuccessful, ineligible ones those that are ReplicaDeletionIneligible.
    Returns (offline, imbalance, under_replicated, to_delete, ineligible)."""
    live = frozenset(state.brokers.keys())
    deleting = state.topics_to_delete
    offline = imbalance = under = 0
    offline_state = PartitionState.OFFLINE
    for tp, info in state.partitions.items():
        li = info.leader_isr
        if li is not None and len(li.isr) < len(info.assignment.replicas):
            under += 1
        if deleting and tp.topic in deleting:
            continue
        if li is None:
            if info.state is offline_state:
                offline += 1
            continue
        if li.leader not in live:
            offline += 1
        a = info.assignment
        preferred = a.replicas[0]
        if a.adding and preferred in a.adding:
            # Kafka's rule for a reassignment adding the preferred replica: it counts once that
            # replica has joined the ISR, whoever leads
            imbalance += preferred in li.isr
        elif li.leader != preferred:
            imbalance += 1
    return (offline, imbalance, under) + _deletion_counts(state)


def _deletion_counts(state) -> tuple[int, int]:
    to_delete = ineligible = 0
    for topic in state.topics_to_delete:
        for info in state.partitions.get_many(list(state.partitions_of(topic))):
            if info is None:
                continue
            for r in info.assignment.replicas:
                s = info.replica_state(r)
                if s is not ReplicaState.DELETION_SUCCESSFUL:
                    to_delete += 1
                if s is ReplicaState.DELETION_INELIGIBLE:
                    ineligible += 1
    return to_delete, ineligible


def cluster_counts(state) -> tuple[int, int, int, int, int]:
    """`cluster_counts_by_rules`, over the columns."""
    image = state.partitions
    if image.odd or not image.count:
        return cluster_counts_by_rules(state)
    present = image.column("present")
    has = image.column("has_state")
    replicas = image.column("replicas")
    isr = image.column("isr")
    if ((replicas[:, 0] == PAD) & present).any():
        return cluster_counts_by_rules(state)  # an empty assignment: the rules say what happens
    leader = image.column("leader")
    n_replicas = (replicas != PAD).sum(axis=1)
    n_isr = (isr != PAD).sum(axis=1)
    under = int((present & has & (n_isr < n_replicas)).sum())
    counted = present.copy()
    if state.topics_to_delete:
        index = image.index
        rows = [index[tp] for topic in state.topics_to_delete for tp in state.partitions_of(topic) if tp in index]
        counted[np.array(rows, np.intp)] = False
    led = counted & has
    offline = int((counted & ~has & (image.column("pstate") == _OFFLINE)).sum())
    offline += int((led & ~V.member(leader[:, None], frozenset(state.brokers.keys()))[:, 0]).sum())
    preferred = replicas[:, :1]
    adding_preferred = image.column("moving") & image.column("adding")[:, 0]
    joined = V.contained(preferred, isr)[:, 0]
    imbalance = int((led & adding_preferred & joined).sum() + (led & ~adding_preferred & (leader != preferred[:, 0])).sum())
    return (offline, imbalance, under) + _deletion_counts(state)
