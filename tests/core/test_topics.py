"""Topic creation and partition expansion (TopicsChanged), and the assignments refused."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.step import step
from controller_core.values import LeaderIsr, ReplicaAssignment

from .builders import AT, elected, leader_isr, of_type, run, tp
from .flows import sent_to, topics_changed


def test_topic_creation_with_a_replica_on_a_down_broker():
    given = elected(brokers=(1, 2), topics={})[0]
    state, commands = run(given, topics_changed({"u"}, u=[[3, 1], [2, 3]]))
    assert leader_isr(state, "u", 0) == LeaderIsr(1, 0, (1,), 2, 0)
    assert leader_isr(state, "u", 1) == LeaderIsr(2, 0, (2,), 2, 0)
    write = of_type(commands, C.WritePartitionStates)[0]
    assert {w.expected_version for w in write.writes} == {-1}  # creates
    lai = sent_to(commands, C.SendLeaderAndIsr)
    assert set(lai) == {1, 2} and all(p.is_new for p in lai[1].partitions)


def test_partition_expansion_adds_only_new_partitions():
    given = elected(topics={"t": [[1, 2]]})[0]
    state, commands = run(given, topics_changed({"t"}, t=[[1, 2], [2, 3], [3, 1]]))
    assert state.topics["t"].partition_count == 3
    assert leader_isr(state, "t", 2).leader == 3
    assert [w.tp for w in of_type(commands, C.WritePartitionStates)[0].writes] == [tp("t", 1), tp("t", 2)]


def test_bad_topic_assignments_are_rejected_with_a_reason_and_change_nothing():
    given = elected(topics={"t": [[1, 2]]})[0]
    cases = {
        "consecutive": topics_changed({"t", "u"}, u=[]),
        "duplicate": topics_changed({"t", "u"}, u=[[1, 1]]),
        "inconsistent": topics_changed({"t", "u"}, u=[[1, 2], [1]]),
        "invalid": topics_changed({"t", "u"}, u=[[-3]]),
        "empty": topics_changed({"t", "u"}, u=[[1], []]),
    }
    for name, event in cases.items():
        state, commands = step(given, event)
        assert state.topics == given.topics and state.partitions == given.partitions, name
        assert [type(c) for c in commands] == [C.RejectRequest], name
    gapped = E.TopicsChanged(at=AT, topics=frozenset({"t", "u"}), assignments=(
        ("u", ((0, ReplicaAssignment((1,))), (2, ReplicaAssignment((2,))))),))
    state, commands = step(given, gapped)
    assert "consecutive" in commands[0].reason and state.partitions == given.partitions
