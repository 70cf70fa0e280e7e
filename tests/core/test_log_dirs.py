"""Failed log dirs: LogDirEventNotification and KAFKA_STORAGE_ERROR answers (Kafka 2.4's
onBrokerLogDirFailure and onReplicasBecomeOffline)."""
from __future__ import annotations

from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import PartitionState as PS
from controller_core.machines import ReplicaState as RS

from .builders import AT, elected, leader_isr, of_type, run, tp

STORAGE = "KAFKA_STORAGE_ERROR"


def cluster():
    return elected(topics={"t": [[1, 2, 3]], "u": [[2, 1]], "w": [[1]]})[0]


def test_a_log_dir_event_sends_the_broker_leader_and_isr_for_all_its_partitions():
    state, commands = run(cluster(), E.LogDirEventNotified(at=AT, brokers=(1, 9)))  # 9 is not live
    sent = {(c.broker_id, v.tp) for c in of_type(commands, C.SendLeaderAndIsr) for v in c.partitions}
    assert sent == {(1, tp("t", 0)), (1, tp("u", 0)), (1, tp("w", 0))}
    assert state.partitions == cluster().partitions  # nothing else changes until the broker answers


def test_replicas_reported_with_storage_errors_go_offline_and_lose_leadership():
    state, commands = run(cluster(), E.LeaderAndIsrResponded(at=AT, broker_id=1, errors=(
        (tp("t", 0), STORAGE), (tp("u", 0), STORAGE), (tp("w", 0), STORAGE))))
    t, u, w = leader_isr(state, "t", 0), leader_isr(state, "u", 0), leader_isr(state, "w", 0)
    assert (t.leader, t.isr) == (2, (2, 3))  # it led: elected elsewhere, out of the ISR
    assert (u.leader, u.isr) == (2, (2,))  # a follower: out of the ISR
    assert (w.leader, w.isr) == (-1, (1,)) and state.partitions[tp("w", 0)].state is PS.OFFLINE  # nobody else
    for topic in ("t", "u", "w"):
        assert state.partitions[tp(topic, 0)].replica_state(1) is RS.OFFLINE
    stopped = {v for c in of_type(commands, C.SendStopReplica) if c.broker_id == 1 for v in c.partitions}
    assert stopped == {tp("t", 0), tp("u", 0), tp("w", 0)}
    # the same report again changes nothing
    again, more = run(state, E.LeaderAndIsrResponded(at=AT, broker_id=1, errors=((tp("u", 0), STORAGE),)))
    assert again.partitions == state.partitions and of_type(more, C.WritePartitionStates) == []


def test_other_partition_errors_are_still_reported():
    _, commands = run(cluster(), E.LeaderAndIsrResponded(at=AT, broker_id=1, errors=(
        (tp("t", 0), "UNKNOWN_SERVER_ERROR"), (tp("u", 0), STORAGE))))
    assert any("UNKNOWN_SERVER_ERROR" in str(c) for c in commands)
