"""The seeds' flows on values: given a state, when an event arrives, then these commands and
this state. `run` plays the runtime's part of making the partition-state writes succeed."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import PartitionState as PS
from controller_core.machines import ReplicaState as RS
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr, PartitionView, ReplicaAssignment

from .builders import AT, broker, elected, leader_isr, of_type, run, settle, tp


def brokers_changed(*ids, epochs=None):
    epochs = epochs or {}
    return E.BrokersChanged(at=AT, brokers=tuple(broker(b, epochs.get(b)) for b in ids))


def sent_to(commands, cls):
    return {c.broker_id: c for c in of_type(commands, cls)}


# -- failover -------------------------------------------------------------------------------


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


# -- broker failure and return (seed 000, section 3) -----------------------------------------


def test_broker_failure_moves_leaders_bumps_epochs_and_shrinks_isr():
    state, _ = elected(topics={"t": [[1, 2, 3], [2, 3, 1]]})
    state, commands = step(state, brokers_changed(2, 3))
    write = of_type(commands, C.WritePartitionStates)[0]
    assert {w.tp: w.leader_isr for w in write.writes} == {
        tp("t", 0): LeaderIsr(2, 1, (2, 3), 2, 1),  # leader moved, epoch + 1
        tp("t", 1): LeaderIsr(2, 1, (2, 3), 2, 1),  # follower left the ISR, epoch + 1 (Kafka 2.4)
    }
    # nothing goes to brokers before the writes land
    assert not of_type(commands, C.SendLeaderAndIsr)
    state, released = step(state, E.PartitionStatesWritten(
        at=AT, write_id=write.write_id, versions=((tp("t", 0), 1), (tp("t", 1), 1))))
    lai = sent_to(released, C.SendLeaderAndIsr)
    assert set(lai) == {2, 3}  # never to the dead broker
    assert [p.tp for p in lai[2].partitions] == [tp("t", 0), tp("t", 1)]
    assert set(sent_to(released, C.SendUpdateMetadata)) == {2, 3}
    assert state.partitions[tp("t", 0)].state is PS.ONLINE
    assert state.partitions[tp("t", 1)].replica_state(1) is RS.OFFLINE
    assert not state.pending


def test_partition_without_live_in_sync_replica_goes_offline_and_keeps_its_last_isr_member():
    state, _ = elected(topics={"t": [[1, 2]]}, states={tp("t", 0): LeaderIsr(1, 5, (1,), 1, 3)})
    state, commands = run(state, brokers_changed(2, 3))
    assert state.partitions[tp("t", 0)].state is PS.OFFLINE
    assert leader_isr(state, "t", 0) == LeaderIsr(-1, 6, (1,), 2, 4)


def test_unclean_election_only_when_the_topic_allows_it():
    given = elected(topics={"t": [[1, 2]]}, states={tp("t", 0): LeaderIsr(1, 5, (1,), 1, 3)})[0]
    state, _ = run(given, brokers_changed(2, 3))
    assert state.partitions[tp("t", 0)].state is PS.OFFLINE
    state, commands = run(state, E.TopicConfigsChanged(at=AT, configs=(("t", (("unclean.leader.election.enable", "true"),)),)))
    assert leader_isr(state, "t", 0).leader == 2 and leader_isr(state, "t", 0).isr == (2,)
    log = [e for c in of_type(commands, C.LogStateChanges) for e in c.entries if e.detail == "unclean leader election"]
    assert [e.partitions for e in log] == [(tp("t", 0),)]


def test_broker_return_brings_replicas_online_and_elects_offline_partitions():
    given = elected(topics={"t": [[1]]})[0]
    state, _ = run(given, brokers_changed(2, 3))
    assert state.partitions[tp("t", 0)].state is PS.OFFLINE
    state, commands = run(state, brokers_changed(1, 2, 3, epochs={1: 500}))
    assert state.partitions[tp("t", 0)].state is PS.ONLINE
    assert leader_isr(state, "t", 0).leader == 1
    assert state.partitions[tp("t", 0)].replica_state(1) is RS.ONLINE
    assert sent_to(commands, C.SendLeaderAndIsr)[1].broker_epoch == 500


def test_bounced_broker_is_failed_then_started():
    given = elected(topics={"t": [[1, 2, 3]]})[0]
    state, commands = run(given, brokers_changed(1, 2, 3, epochs={1: 999}))
    assert state.brokers[1].epoch == 999
    assert leader_isr(state, "t", 0).leader == 2  # it lost leadership while "down"
    assert state.partitions[tp("t", 0)].replica_state(1) is RS.ONLINE


def test_same_listing_is_a_no_op():
    given = elected(topics={"t": [[1, 2, 3]]})[0]
    state, commands = step(given, brokers_changed(1, 2, 3))
    assert commands == () and state == given


# -- topics (seed 000, 003) ------------------------------------------------------------------


def topics_changed(names, **assignments):
    return E.TopicsChanged(at=AT, topics=frozenset(names), assignments=tuple(
        (t, tuple((p, ReplicaAssignment(tuple(r))) for p, r in enumerate(parts))) for t, parts in assignments.items()))


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


# -- topic deletion ---------------------------------------------------------------------------


def stop_replica_done(commands, errors=()):
    events = []
    for c in of_type(commands, C.SendStopReplica):
        if c.delete:
            events.append(E.StopReplicaResponded(at=AT, broker_id=c.broker_id, delete=True,
                                                 partitions=c.partitions, errors=errors))
    return events


def test_topic_deletion_stops_and_deletes_every_replica_then_removes_the_topic():
    given = elected(topics={"t": [[1, 2]], "keep": [[1]]})[0]
    state, commands = run(given, E.TopicDeletionsRequested(at=AT, topics=frozenset({"t"})))
    assert {c.broker_id for c in of_type(commands, C.SendStopReplica) if c.delete} == {1, 2}
    um = of_type(commands, C.SendUpdateMetadata)[0]
    assert any(p.tp == tp("t", 0) and p.leader == -2 for p in um.partitions)
    for event in stop_replica_done(commands):
        state, more = run(state, event)
    assert "t" not in state.topics and tp("t", 0) not in state.partitions
    assert C.DeleteTopic(topic="t") in more
    assert "keep" in state.topics


def test_topic_deletion_waits_for_a_down_broker_and_resumes_when_it_returns():
    given = elected(topics={"t": [[1, 2]]})[0]
    state, _ = run(given, brokers_changed(1, 3))
    state, commands = run(state, E.TopicDeletionsRequested(at=AT, topics=frozenset({"t"})))
    assert state.partitions[tp("t", 0)].replica_state(2) is RS.DELETION_INELIGIBLE
    assert "t" in state.topics_ineligible_for_deletion
    for event in stop_replica_done(commands):
        state, _ = run(state, event)
    assert "t" in state.topics  # not done: replica 2 is still there
    state, commands = run(state, brokers_changed(1, 2, 3, epochs={2: 700}))
    assert any(c.broker_id == 2 and c.delete for c in of_type(commands, C.SendStopReplica))
    for event in stop_replica_done(commands):
        state, more = run(state, event)
    assert "t" not in state.topics


def test_deleting_an_unknown_topic_removes_the_request():
    given = elected(topics={"t": [[1]]})[0]
    state, commands = step(given, E.TopicDeletionsRequested(at=AT, topics=frozenset({"nope"})))
    assert C.DeleteTopicDeletionRequests(topics=("nope",)) in commands
    assert state.topics == given.topics


# -- reassignment (seed 000, section 2) ------------------------------------------------------


def reassign(*entries):
    return E.ReassignmentRequested(at=AT, exists=True, partitions=tuple((tp(t, p), tuple(r)) for t, p, r in entries))


def catch_up(state, t, p, isr, version_bump=1):
    li = leader_isr(state, t, p)
    return E.PartitionStatesObserved(at=AT, source="reassignment", states=(
        (tp(t, p), LeaderIsr(li.leader, li.leader_epoch, tuple(isr), li.controller_epoch, li.zk_version + version_bump)),))


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


# -- preferred election and rebalance ---------------------------------------------------------


def test_preferred_election_from_the_znode_moves_leadership_back():
    given = elected(topics={"t": [[1, 2, 3]]}, states={tp("t", 0): LeaderIsr(2, 4, (1, 2, 3), 1, 2)})[0]
    state, commands = run(given, E.PreferredElectionRequested(at=AT, exists=True, partitions=(tp("t", 0),)))
    assert leader_isr(state, "t", 0) == LeaderIsr(1, 5, (1, 2, 3), 2, 3)
    assert C.DeletePreferredElectionRequest() in commands


def test_preferred_election_not_needed_is_not_a_write():
    given = elected(topics={"t": [[1, 2, 3]]})[0]
    state, commands = step(given, E.PreferredElectionRequested(at=AT, exists=True, partitions=(tp("t", 0),)))
    assert commands == (C.DeletePreferredElectionRequest(),)


def test_leader_election_request_replies_per_partition():
    given = elected(topics={"t": [[1, 2, 3]]}, states={tp("t", 0): LeaderIsr(2, 4, (1, 2, 3), 1, 2)})[0]
    state, commands = run(given, E.LeaderElectionRequested(at=AT, request_id=7, election_type="preferred",
                                                          partitions=(tp("t", 0), tp("zz", 1))))
    reply = of_type(commands, C.ReplyLeaderElection)[0]
    assert reply.request_id == 7
    assert dict(reply.results)[tp("t", 0)] is None
    assert dict(reply.results)[tp("zz", 1)].startswith("UNKNOWN_TOPIC_OR_PARTITION")


def test_admin_unclean_election_ignores_the_topic_config():
    given = elected(topics={"t": [[1, 2]]}, states={tp("t", 0): LeaderIsr(1, 5, (1,), 1, 3)})[0]
    state, _ = run(given, brokers_changed(2, 3))
    state, commands = run(state, E.LeaderElectionRequested(at=AT, request_id=1, election_type="unclean", partitions=None))
    assert leader_isr(state, "t", 0).leader == 2
    assert dict(of_type(commands, C.ReplyLeaderElection)[0].results) == {tp("t", 0): None}


def test_auto_rebalance_reelects_preferred_leaders_past_the_threshold():
    config = ControllerConfig(broker_id=1, auto_leader_rebalance_enable=True, leader_imbalance_per_broker_percentage=10)
    states = {tp("t", p): LeaderIsr(2, 1, (1, 2), 1, 1) for p in range(3)}
    given = elected(topics={"t": [[1, 2]] * 3}, states=states, config=config)[0]
    state, commands = run(given, E.TimerFired(at=AT, name="auto-leader-rebalance"))
    assert all(leader_isr(state, "t", p).leader == 1 for p in range(3))
    assert C.ScheduleTimer(name="auto-leader-rebalance", delay_ms=300_000) in commands


def test_auto_rebalance_is_skipped_while_reassignments_run():
    config = ControllerConfig(broker_id=1, auto_leader_rebalance_enable=True)
    given = elected(brokers=(1, 2, 3, 4), topics={"t": [[1, 2], [1, 2]]},
                    states={tp("t", 0): LeaderIsr(2, 1, (1, 2), 1, 1), tp("t", 1): LeaderIsr(1, 1, (1, 2), 1, 1)},
                    config=config)[0]
    state, _ = run(given, reassign(("t", 1, [3, 4])))
    state, commands = run(state, E.TimerFired(at=AT, name="auto-leader-rebalance"))
    assert leader_isr(state, "t", 0).leader == 2
    assert commands == [C.ScheduleTimer(name="auto-leader-rebalance", delay_ms=300_000)]


# -- controlled shutdown (seed 000, section 3.4) ----------------------------------------------


def test_controlled_shutdown_moves_leadership_and_replies_once_written():
    given = elected(topics={"t": [[1, 2, 3], [2, 1, 3]], "single": [[1]]})[0]
    state, commands = step(given, E.ControlledShutdownRequested(at=AT, request_id=5, broker_id=1, broker_epoch=101))
    assert not of_type(commands, C.ReplyControlledShutdown)  # waits for the writes
    state, released = settle(state, commands)
    reply = of_type(released, C.ReplyControlledShutdown)[0]
    assert reply == C.ReplyControlledShutdown(request_id=5, broker_id=1, error=None, partitions_remaining=())
    assert leader_isr(state, "t", 0) == LeaderIsr(2, 1, (2, 3), 2, 1)
    assert leader_isr(state, "t", 1).isr == (2, 3)  # follower left the ISR
    assert leader_isr(state, "single", 0).leader == 1  # unreplicated partitions stay
    assert (1, False) in [(c.broker_id, c.delete) for c in of_type(released, C.SendStopReplica)]
    assert 1 in state.shutting_down


def test_controlled_shutdown_with_a_stale_broker_epoch_is_refused():
    given = elected(topics={"t": [[1, 2]]})[0]
    state, commands = step(given, E.ControlledShutdownRequested(at=AT, request_id=5, broker_id=1, broker_epoch=3))
    assert state == given
    assert of_type(commands, C.ReplyControlledShutdown)[0].error.startswith("STALE_BROKER_EPOCH")


def test_controlled_shutdown_on_a_non_controller_says_so():
    given = elected(topics={"t": [[1, 2]]})[0]
    inactive, _ = step(given, E.ControllerResigned(at=AT, reason="moved"))
    state, commands = step(inactive, E.ControlledShutdownRequested(at=AT, request_id=5, broker_id=1, broker_epoch=101))
    assert state == inactive and commands[0].error.startswith("NOT_CONTROLLER")


# -- fencing and write outcomes ---------------------------------------------------------------


def test_fenced_controller_resigns_and_forgets_everything():
    given = elected(topics={"t": [[1, 2]]})[0]
    state, commands = step(given, E.ControllerFenced(at=AT, reason="epoch moved"))
    assert commands == (C.Resign(reason="epoch moved"),)
    assert not state.active and not state.partitions


def test_inactive_node_ignores_cluster_events():
    given = elected(topics={"t": [[1, 2]]})[0]
    inactive, _ = step(given, E.ControllerResigned(at=AT, reason="session expired"))
    for event in (brokers_changed(2), E.TimerFired(at=AT, name="auto-leader-rebalance")):
        assert step(inactive, event) == (inactive, ())


def test_version_conflict_is_re_decided_on_fresh_data():
    given = elected(topics={"t": [[1, 2, 3]]})[0]
    state, commands = step(given, brokers_changed(2, 3))
    write = of_type(commands, C.WritePartitionStates)[0]
    # the leader shrank the ISR to (1, 3) just before our write: znode now at version 1
    fresh = LeaderIsr(1, 0, (1, 3), 1, 1)
    state, commands = step(state, E.PartitionStatesWritten(at=AT, write_id=write.write_id,
                                                           conflicts=((tp("t", 0), fresh),)))
    retry = of_type(commands, C.WritePartitionStates)[0]
    assert retry.writes[0].expected_version == 1
    assert retry.writes[0].leader_isr == LeaderIsr(3, 1, (3,), 2, 2)  # 2 is out of the ISR now
    assert not of_type(commands, C.SendLeaderAndIsr)  # requests follow the retry
    state, released = settle(state, commands)
    assert [p.leader for c in of_type(released, C.SendLeaderAndIsr) for p in c.partitions] == [3, 3]


def test_state_written_by_a_newer_controller_is_not_touched():
    given = elected(topics={"t": [[1, 2, 3]]}, states={tp("t", 0): LeaderIsr(1, 3, (1, 2, 3), 9, 4)})[0]
    state, commands = step(given, brokers_changed(2, 3))
    assert not of_type(commands, C.WritePartitionStates)
    failures = [e for c in of_type(commands, C.LogStateChanges) for e in c.entries if not e.ok]
    assert failures and "newer" in failures[0].detail


def test_isr_change_notification_updates_cache_and_tells_every_broker():
    given = elected(topics={"t": [[1, 2, 3]]})[0]
    li = leader_isr(given, "t", 0)
    shrunk = LeaderIsr(1, li.leader_epoch, (1, 2), li.controller_epoch, li.zk_version + 1)
    state, commands = step(given, E.PartitionStatesObserved(at=AT, states=((tp("t", 0), shrunk),)))
    assert leader_isr(state, "t", 0) == shrunk
    assert set(sent_to(commands, C.SendUpdateMetadata)) == {1, 2, 3}
    # a stale read changes nothing
    stale = LeaderIsr(1, li.leader_epoch, (1,), li.controller_epoch, li.zk_version)
    assert step(state, E.PartitionStatesObserved(at=AT, states=((tp("t", 0), stale),))) == (state, ())


def test_events_during_a_write_wait_for_its_outcome_and_a_conflict_is_redecided_first():
    given = elected(topics={"t": [[2, 1, 3]]})[0]
    state, commands = step(given, brokers_changed(2, 3))  # 1 dies: shrink it out of t-0's ISR
    write = of_type(commands, C.WritePartitionStates)[0]
    back = brokers_changed(1, 2, 3, epochs={1: 555})
    state, commands = step(state, back)  # 1 is back before the write lands: that waits
    assert commands == () and state.deferred == (back,)
    assert 1 not in state.brokers
    # the leader had re-added 1 first, so the write conflicts; it is re-decided on ZooKeeper's
    # content with what the controller knows at that point (1 is dead), as Kafka would
    fresh = LeaderIsr(2, 0, (2, 1, 3), 1, 1)
    state, commands = step(state, E.PartitionStatesWritten(at=AT, write_id=write.write_id,
                                                           conflicts=((tp("t", 0), fresh),)))
    retry = of_type(commands, C.WritePartitionStates)
    assert [w.leader_isr.isr for w in retry[0].writes] == [(2, 3)]
    assert retry[0].writes[0].expected_version == fresh.zk_version
    assert state.deferred == (back,)
    # once the retry lands, the broker's return is decided: 1 is told to follow again
    state, commands = step(state, E.PartitionStatesWritten(at=AT, write_id=retry[0].write_id,
                                                           versions=((tp("t", 0), 2),)))
    assert state.deferred == () and state.brokers[1].epoch == 555
    assert state.partitions[tp("t", 0)].replica_state(1) is RS.ONLINE
    assert 1 in sent_to(commands, C.SendLeaderAndIsr)


def test_requests_decided_for_a_broker_that_restarted_meanwhile_are_dropped():
    given = elected(topics={"t": [[2, 1, 3]]})[0]
    state, commands = step(given, brokers_changed(2, 3))  # 1 dies; its StopReplica waits for the write
    write = of_type(commands, C.WritePartitionStates)[0]
    state, _ = step(state, brokers_changed(1, 2, 3, epochs={1: 555}))  # 1 restarts meanwhile
    state, released = step(state, E.PartitionStatesWritten(
        at=AT, write_id=write.write_id, versions=((tp("t", 0), leader_isr(state, "t", 0).zk_version),)))
    assert not [c for c in released if getattr(c, "broker_id", None) == 1 and isinstance(c, C.SendStopReplica)]


def test_failover_accepts_a_topic_whose_partitions_were_reassigned_to_different_factors():
    state, _ = elected(topics={"events": [[1, 2], [2, 3], [3, 1, 2]]})
    assert state.topics["events"].partition_count == 3
    assert leader_isr(state, "events", 2).leader == 3


def test_a_large_write_sends_the_requests_of_what_landed_while_the_rest_is_written():
    given = elected(topics={"t": [[1, 2, 3], [1, 3, 2], [1, 2, 3], [1, 3, 2]]})[0]
    state, commands = step(given, brokers_changed(2, 3))  # broker 1 led all four
    (write,) = of_type(commands, C.WritePartitionStates)
    assert not of_type(commands, C.SendLeaderAndIsr)
    first = (tp("t", 0), tp("t", 1))
    state, early = step(state, E.PartitionStatesWritten(at=AT, write_id=write.write_id, landed=first, final=False))
    assert {v.tp for c in of_type(early, C.SendLeaderAndIsr) for v in c.partitions} == set(first)
    assert {v.tp for c in of_type(early, C.SendUpdateMetadata) for v in c.partitions} == set(first)
    assert not of_type(early, C.SendStopReplica) and state.pending  # the write is still in flight
    later = brokers_changed(2, 3, 4)
    state, deferred = step(state, later)
    assert deferred == () and state.deferred == (later,)
    # t-2 conflicts (its leader... a newer state): the final outcome releases only t-3
    fresh = LeaderIsr(2, 0, (2, 3), 1, 1)
    state, final = step(state, E.PartitionStatesWritten(at=AT, write_id=write.write_id,
                                                        conflicts=((tp("t", 2), fresh),)))
    sent = [v.tp for c in of_type(final, C.SendLeaderAndIsr) for v in c.partitions]
    assert tp("t", 3) in sent and not set(first) & set(sent) and tp("t", 2) not in sent
    assert of_type(final, C.WritePartitionStates)  # t-2 re-decided on the fresh state


def test_a_deletion_whose_state_write_conflicts_still_removes_every_partition_from_the_brokers_caches():
    """Found by the chaos soak (seed 1): two partitions of a deleted topic stayed in four brokers'
    metadata caches, because their leader wrote an ISR change while the controller wrote the
    deletion's ISR shrink; the UpdateMetadata with leader -2 held back with the conflict was
    never sent. The retry now carries it."""
    state = elected(brokers=(1, 2, 3), topics={"t": [[1, 2, 3], [2, 3, 1]]})[0]
    state, sent = step(state, E.TopicDeletionsRequested(at=AT, topics=frozenset({"t"})))
    sent = list(sent)
    (write,) = of_type(sent, C.WritePartitionStates)
    # t-0 lands; t-1 conflicts: its leader shrank the ISR meanwhile (the znode is one version ahead)
    state, more = step(state, E.PartitionStatesWritten(at=AT, write_id=write.write_id,
                                                       conflicts=((tp("t", 1), LeaderIsr(2, 0, (2, 3), 1, 1)),)))
    sent += more
    for retry in of_type(more, C.WritePartitionStates):
        state, more = step(state, E.PartitionStatesWritten(at=AT, write_id=retry.write_id))
        sent += more
    for stop in list(of_type(sent, C.SendStopReplica)):
        state, more = step(state, E.StopReplicaResponded(at=AT, broker_id=stop.broker_id, delete=stop.delete,
                                                         partitions=stop.partitions, errors=()))
        sent += more
    assert any(isinstance(c, C.DeleteTopic) for c in sent)
    dropped = {p.tp for c in of_type(sent, C.SendUpdateMetadata) for p in c.partitions if p.leader == -2}
    assert dropped == {tp("t", 0), tp("t", 1)}


def test_a_stale_listing_of_the_reassignment_znode_neither_rejects_nor_deletes_a_newer_request():
    """Found by the chaos soak: the znode's watch fires on each of the controller's own rewrites;
    a listing read before a rewrite and decided after it was taken for a new request ("already
    done"), and the empty plan it produced deleted the znode unconditionally, losing the request
    an admin had written meanwhile."""
    given = elected(brokers=(1, 2, 3, 4), topics={"t": [[1, 2, 3], [1, 2, 3]]})[0]
    plan = ((tp("t", 0), (2, 3, 4)), (tp("t", 1), (2, 3, 4)))
    state, _ = run(given, E.ReassignmentRequested(at=AT, exists=True, partitions=plan, zk_version=0))
    state, commands = run(state, catch_up(state, "t", 0, [1, 2, 3, 4]))  # t-0 done: the plan is rewritten
    (rewrite,) = of_type(commands, C.WriteReassignmentPlan)
    assert rewrite == C.WriteReassignmentPlan(partitions=plan[1:], expected_version=0)
    assert state.plan_zk_version == 1
    # the watch had read version 0 before the rewrite: that listing is an echo, not a request
    stale, commands = step(state, E.ReassignmentRequested(at=AT, exists=True, partitions=plan, zk_version=0))
    assert commands == () and stale == state
    state, commands = run(state, catch_up(state, "t", 1, [1, 2, 3, 4]))  # the last one: delete version 1
    assert of_type(commands, C.WriteReassignmentPlan) == [C.WriteReassignmentPlan(partitions=(), expected_version=1)]
    # a new request written right then (ZooKeeper refused the delete: BadVersion) is carried out
    state, commands = run(state, E.ReassignmentRequested(at=AT, exists=True, partitions=((tp("t", 0), (1, 2, 3)),),
                                                         zk_version=2))
    assert not of_type(commands, C.RejectRequest) and tp("t", 0) in state.reassigning


def test_a_deletion_queued_over_a_half_done_reassignment_completes_after_failover():
    """Found by the ten-minute chaos soak: a topic's deletion was queued while one of its
    partitions was being reassigned, then the controller failed. The new controller does not
    resume a reassignment of a topic being deleted, so nothing would ever make the deletion
    eligible again; the topic and its markers stayed forever. The deletion goes ahead instead
    (it removes the unfinished assignment with the topic)."""
    moving = ReplicaAssignment((4, 1, 2, 3), adding=(4,), removing=(3,))
    snap = E.ClusterSnapshot(
        brokers=tuple(broker(b) for b in (1, 2, 3, 4)),
        topics=(("t", ((0, moving), (1, ReplicaAssignment((1, 2, 3))))),),
        partition_states=((tp("t", 0), LeaderIsr(1, 3, (1, 2, 3), 1, 4)), (tp("t", 1), LeaderIsr(1, 0, (1, 2, 3), 1, 0))),
        topics_to_delete={"t"},
    )
    config = ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False)
    state, commands = settle(*step(initial_state(config), E.ControllerElected(at=AT, epoch=2, epoch_zk_version=1,
                                                                                snapshot=snap)))
    assert tp("t", 0) not in state.reassigning and "t" not in state.topics_ineligible_for_deletion
    stops = [c for c in of_type(commands, C.SendStopReplica) if c.delete]
    assert {r for c in stops for r in [c.broker_id]} == {1, 2, 3, 4}
    for c in stops:
        state, more = run(state, E.StopReplicaResponded(at=AT, broker_id=c.broker_id, delete=True,
                                                        partitions=c.partitions, errors=()))
        commands += more
    assert "t" not in state.topics and of_type(commands, C.DeleteTopic)
