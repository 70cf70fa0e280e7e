"""PreferredReplicaImbalanceCount follows Kafka 2.4's rule for partitions whose preferred replica
is being added by a reassignment (KafkaController.updateMetrics)."""
from __future__ import annotations

import attrs

from adapters.observability.metrics import cluster_counts
from controller_core.values import LeaderIsr, ReplicaAssignment
from tests.core.builders import elected, tp


def with_partition(state, assignment, li):
    info = state.partitions[tp("t", 0)]
    return attrs.evolve(state, partitions=state.partitions.set(tp("t", 0), info._replace(
        assignment=assignment, leader_isr=li)))


def test_a_preferred_replica_being_added_counts_only_once_it_is_in_the_isr():
    state = elected(brokers=(1, 2, 3, 4), topics={"t": [[1, 2]]})[0]
    moving = ReplicaAssignment((3, 4, 1, 2), adding=(3, 4), removing=(1, 2))
    assert cluster_counts(with_partition(state, moving, LeaderIsr(1, 1, (1, 2), 1, 1))).imbalance == 0
    assert cluster_counts(with_partition(state, moving, LeaderIsr(1, 1, (1, 2, 3), 1, 2))).imbalance == 1
    # without a reassignment: the leader is not the first replica
    assert cluster_counts(with_partition(state, ReplicaAssignment((2, 1)), LeaderIsr(1, 1, (1, 2), 1, 1))).imbalance == 1
    assert cluster_counts(with_partition(state, ReplicaAssignment((1, 2)), LeaderIsr(1, 1, (1, 2), 1, 1))).imbalance == 0
