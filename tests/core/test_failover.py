"""A new controller takes over (ControllerElected): what it tells the brokers first, and the
elections and ISR shrinks it owes the partitions whose leaders died meanwhile."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import PartitionState as PS
from controller_core.machines import ReplicaState as RS
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr, PartitionView, ReplicaAssignment

from .builders import AT, broker, elected, leader_isr, of_type, tp


def test_failover_sends_update_metadata_before_anything_else():
    state, commands = step(
        initial_state(ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False)),
        E.ControllerElected(at=AT, epoch=3, epoch_zk_version=2, snapshot=E.ClusterSnapshot(
            brokers=(broker(1), broker(2)),
            topics=(("t", ((0, ReplicaAssignment((1, 2))),)),),
            partition_states=((tp("t", 0), LeaderIsr(1, 4, (1, 2), 2, 7)),))))
    first_non_um = next(i for i, c in enumerate(commands) if not isinstance(c, C.SendUpdateMetadata))
    assert first_non_um == 2 and all(isinstance(c, C.SendUpdateMetadata) for c in commands[:2])
    um = commands[0]
    assert um.partitions == (PartitionView(tp("t", 0), 1, 4, (1, 2), 2, 7, (1, 2)),)
    assert state.active and state.epoch == 3 and state.epoch_zk_version == 2
    assert state.partitions[tp("t", 0)].state is PS.ONLINE


def test_failover_elects_partitions_whose_leader_is_dead_and_takes_dead_replicas_out_of_isr():
    state, commands = elected(brokers=(2, 3), topics={"t": [[1, 2, 3]]})
    # Kafka's order: the replica state machine starts first, so the dead leader leaves the ISR
    # (no leader, epoch 1), then the partition state machine elects (epoch 2); one write.
    assert leader_isr(state, "t", 0) == LeaderIsr(2, 2, (2, 3), 2, 1)
    writes = of_type(commands, C.WritePartitionStates)
    assert len(writes) == 1 and writes[0].writes[0].expected_version == 0
    assert state.partitions[tp("t", 0)].replica_state(1) is RS.OFFLINE
