"""The in-memory shell's rule for partition-state writes and reads (replay/shell.py)."""
from __future__ import annotations

from controller_core import commands as C
from controller_core.values import NO_ZK_VERSION, LeaderIsr, TopicPartition
from replay.shell import PartitionStates

T0, T1, GONE = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("gone", 0)


def write(tp, expected, leader, epoch):
    return C.PartitionWrite(tp, LeaderIsr(leader, epoch, (leader,), 1, expected + 1), expected)


def test_a_write_lands_at_the_expected_version_and_conflicts_otherwise():
    zk = PartitionStates({T0: LeaderIsr(1, 0, (1, 2), 1, 3)}, topic_exists=lambda topic: topic == "t")
    outcome = zk.write(C.WritePartitionStates(write_id=7, writes=(
        write(T0, 3, 2, 1),                 # at the expected version: lands, at version 4
        write(T1, NO_ZK_VERSION, 1, 0),     # a new znode: lands, at version 0
        write(GONE, NO_ZK_VERSION, 1, 0),   # under a deleted topic: conflicts, nothing there
    )), at=5)
    assert outcome.write_id == 7 and outcome.conflicts == ((GONE, None),)
    assert zk.states[T0] == LeaderIsr(2, 1, (2,), 1, 4) and zk.states[T1].zk_version == 0
    stale = zk.write(C.WritePartitionStates(write_id=8, writes=(write(T0, 3, 1, 2),)), at=6)
    assert stale.conflicts == ((T0, zk.states[T0]),) and zk.states[T0].leader == 2


def test_a_read_answers_the_states_as_they_are():
    zk = PartitionStates({T0: LeaderIsr(1, 0, (1,), 1, 0)})
    answer = zk.read(C.ReadPartitionStates(read_id=3, partitions=(T0, T1)), at=9)
    assert answer.read_id == 3 and answer.states == ((T0, LeaderIsr(1, 0, (1,), 1, 0)), (T1, None))
