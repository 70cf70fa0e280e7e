"""Partition reassignment (ReassignmentRequested): OAR + RAR, catching up, completion, halts,
rejections, and resumption after a failover."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import ReplicaState as RS
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr, ReplicaAssignment

from .builders import AT, broker, elected, leader_isr, of_type, run, settle, tp
from .flows import brokers_changed, catch_up, reassign, sent_to


def test_reassignment_123_to_234_goes_through_oar_plus_rar_and_ends_like_kafka():
    given = elected(brokers=(1, 2, 3, 4), topics={"t": [[1, 2, 3]]})[0]
    start_epoch = leader_isr(given, "t", 0).leader_epoch
    # phase A: RS = OAR + RAR with AR/RR persisted, leader epoch bumped, new replica started
    state, commands = run(given, reassign(("t", 0, [2, 3, 4])))
    ra = state.partitions[tp("t", 0)].assignment
    assert ra == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert C.WriteTopicAssignment(topic="t", partitions=((0, ra),)) in commands
    assert C.WatchPartitionStates(partitions=(tp("t", 0),)) in commands
    assert leader_isr(state, "t", 0).leader_epoch == start_epoch + 1
    assert state.partitions[tp("t", 0)].replica_state(4) is RS.NEW
    assert any(p.is_new for p in sent_to(commands, C.SendLeaderAndIsr)[4].partitions)
    # waiting: ISR not yet complete
    state, commands = run(state, catch_up(state, "t", 0, [1, 2, 3]))
    assert tp("t", 0) in state.reassigning
    # phase B: 4 joins the ISR
    state, commands = run(state, catch_up(state, "t", 0, [1, 2, 3, 4]))
    li = leader_isr(state, "t", 0)
    assert li.leader == 2  # 1 is not a target: first live in-ISR target
    assert li.isr == (2, 3, 4)  # 1 left the ISR
    assert li.leader_epoch == start_epoch + 3  # bump (A1), election (B3), ISR shrink (B4)
    assert state.partitions[tp("t", 0)].assignment == ReplicaAssignment((2, 3, 4))
    assert C.WriteTopicAssignment(topic="t", partitions=((0, ReplicaAssignment((2, 3, 4))),)) in commands
    assert C.WriteReassignmentPlan(partitions=()) in commands  # the admin znode goes away
    assert C.UnwatchPartitionStates(partitions=(tp("t", 0),)) in commands
    stops = [(c.broker_id, c.delete) for c in of_type(commands, C.SendStopReplica)]
    assert (1, False) in stops and (1, True) in stops
    assert state.partitions[tp("t", 0)].replica_state(1) is RS.NON_EXISTENT
    assert not state.reassigning and state.reassignment_plan == ()


def test_reassignment_halts_while_a_target_is_offline_and_resumes_when_it_returns():
    given = elected(brokers=(1, 2, 3, 4), topics={"t": [[1, 2, 3]]})[0]
    state, _ = run(given, brokers_changed(1, 2, 3))
    state, commands = run(state, reassign(("t", 0, [2, 3, 4])))
    assert tp("t", 0) in state.reassigning
    assert not any(c.broker_id == 4 for c in of_type(commands, C.SendLeaderAndIsr))
    assert not any(isinstance(c, C.WriteReassignmentPlan) for c in commands)  # the znode stays
    state, commands = run(state, brokers_changed(1, 2, 3, 4, epochs={4: 900}))
    assert any(c.broker_id == 4 for c in of_type(commands, C.SendLeaderAndIsr))
    state, commands = run(state, catch_up(state, "t", 0, [1, 2, 3, 4]))
    assert state.partitions[tp("t", 0)].assignment == ReplicaAssignment((2, 3, 4))


def test_bad_reassignments_are_rejected_and_removed_from_the_znode():
    given = elected(brokers=(1, 2, 3), topics={"t": [[1, 2]]})[0]
    cases = [
        (("t", 5, [1, 2]), "unknown topic or partition"),
        (("x", 0, [1, 2]), "unknown topic or partition"),
        (("t", 0, []), "empty replica list"),
        (("t", 0, [1, 1]), "duplicate replicas"),
        (("t", 0, [1, 77]), "unknown broker(s) [77]"),
        (("t", 0, [1, -2]), "invalid broker id"),
    ]
    for entry, reason in cases:
        state, commands = step(given, reassign(entry))
        rejects = of_type(commands, C.RejectRequest)
        assert len(rejects) == 1 and reason in rejects[0].reason, entry
        assert C.WriteReassignmentPlan(partitions=()) in commands
        assert state.partitions == given.partitions
    state, commands = step(given, E.ReassignmentRequested(at=AT, exists=True, problem="not JSON"))
    assert C.WriteReassignmentPlan(partitions=()) in commands and "not JSON" in of_type(commands, C.RejectRequest)[0].reason


def test_a_request_with_thousands_of_bad_entries_is_one_rejection():
    given = elected(brokers=(1, 2, 3), topics={"t": [[1, 2]]})[0]
    state, commands = step(given, reassign(*(("ghost", p, [1, 2]) for p in range(15_000))))
    (reject,) = of_type(commands, C.RejectRequest)
    assert reject.reason.startswith("15000 rejected: ghost-0: unknown topic or partition;")
    assert reject.reason.endswith("and 14995 more") and reject.reason.count("ghost-") == 5
    assert C.WriteReassignmentPlan(partitions=()) in commands and state.partitions == given.partitions


def test_a_bad_entry_does_not_stop_the_good_ones():
    given = elected(brokers=(1, 2, 3), topics={"t": [[1, 2]]})[0]
    state, commands = run(given, reassign(("t", 0, [2, 3]), ("t", 9, [1])))
    assert state.reassignment_plan == ((tp("t", 0), (2, 3)),)
    assert C.WriteReassignmentPlan(partitions=((tp("t", 0), (2, 3)),)) in commands


def test_reassignment_resumes_after_failover_from_the_topic_znode():
    snap_state, commands = step(initial_state(ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False)), E.ControllerElected(
        at=AT, epoch=5, epoch_zk_version=4, snapshot=E.ClusterSnapshot(
            brokers=tuple(broker(b) for b in (1, 2, 3, 4)),
            topics=(("t", ((0, ReplicaAssignment((2, 3, 4, 1), (4,), (1,))),)),),
            partition_states=((tp("t", 0), LeaderIsr(1, 3, (1, 2, 3, 4), 4, 9)),))))
    state, commands = settle(snap_state, commands)
    assert state.partitions[tp("t", 0)].assignment == ReplicaAssignment((2, 3, 4))
    assert leader_isr(state, "t", 0).leader == 2


def test_a_broker_known_only_by_the_replicas_it_holds_is_a_valid_target():
    """Broker 9 is not registered and this controller never saw it, but it holds a replica of
    t-1 (read from the image's replica column): a reassignment onto it waits for it, as one onto
    a broker the cluster has never known is refused."""
    given = elected(brokers=(1, 2, 3), topics={"t": [[1, 2], [2, 9]]})[0]
    assert 9 not in given.seen_brokers and 9 not in given.brokers
    _, commands = step(given, reassign(("t", 0, [9, 1])))
    assert not of_type(commands, C.RejectRequest)
    _, commands = step(given, reassign(("t", 0, [8, 1])))
    assert "unknown broker(s) [8]" in of_type(commands, C.RejectRequest)[0].reason


def test_a_topic_assignment_rewrite_lists_every_partition_with_its_own_assignment():
    """The topic znode is rewritten whole when one of its partitions is reassigned: every
    partition with its assignment as it stands, in partition order (the written assignments
    are read from the image's replica columns, not from each partition's value)."""
    given = elected(brokers=(1, 2, 3, 4), topics={"t": [[1, 2, 3], [2, 3, 4], [3, 4, 1], [4, 1, 2]]})[0]
    state, commands = run(given, reassign(("t", 2, [1, 2, 4])))
    (written,) = [c for c in of_type(commands, C.WriteTopicAssignment) if c.topic == "t"]
    assert [p for p, _ in written.partitions] == [0, 1, 2, 3]
    assert written.partitions == tuple((p, state.partitions[tp("t", p)].assignment) for p in range(4))
    assert written.partitions[2][1] == ReplicaAssignment((1, 2, 4, 3), (2,), (3,))  # RS = RAR + OAR, AR, RR
    assert written.partitions[0][1] == ReplicaAssignment((1, 2, 3))
