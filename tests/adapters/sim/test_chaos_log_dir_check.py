"""The chaos soak's log-dir check (adapters/sim/chaos/faults.py `_still_online`), on a real
ZooKeeper: which replicas of a failed dir it still counts as leading or sharing an ISR."""
from __future__ import annotations

import random
from types import SimpleNamespace

from adapters.sim.chaos.faults import Claims, Faults
from adapters.znodes import codec as zkdata, paths as zkpaths
from controller_core.values import LeaderIsr, ReplicaAssignment


async def test_partitions_of_a_topic_queued_for_deletion_are_left_to_the_deletion(admin):
    """Kafka elects no partition of a topic queued for deletion (onReplicasBecomeOffline); its
    deletion waits for the failed dir's broker to restart. The seed-16 soak failed the check on
    such a topic, deleted 2.5 s before the failure."""
    for topic in ("kept", "going", "moved"):
        assignment = {0: ReplicaAssignment((2, 1)), 1: ReplicaAssignment((1, 2))}
        await admin.create(zkpaths.topic(topic), zkdata.encode_topic_assignment(assignment), make_parents=True)
        await admin.create(zkpaths.partition_state(topic, 0), zkdata.encode_partition_state(
            LeaderIsr(2, 1, (2, 1), 1, 0)), make_parents=True)
        await admin.create(zkpaths.partition_state(topic, 1), zkdata.encode_partition_state(
            LeaderIsr(1, 1, (1, 2), 1, 0)), make_parents=True)
    await admin.create(zkpaths.delete_topic("going"), b"", make_parents=True)
    await admin.set(zkpaths.topic("moved"), zkdata.encode_topic_assignment(
        {0: ReplicaAssignment((3, 1)), 1: ReplicaAssignment((1, 3))}))  # off broker 2 since
    fleet = SimpleNamespace(embedded=False, ensemble=None, config=SimpleNamespace(session_timeout_ms=6000))
    faults = Faults(fleet, admin, random.Random(1), Claims(1), lambda *a, **k: None, 1.0)
    failed_dir = [(t, p) for t in ("kept", "going", "moved") for p in (0, 1)]
    assert await faults._still_online(2, failed_dir) == ["kept-0 (leader)", "kept-1 (isr 1,2)"]
    assert await faults._still_online(2, failed_dir, leaders_only=True) == ["kept-0 (leader)"]
