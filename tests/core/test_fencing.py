"""Fencing and write outcomes: a fenced controller resigns, conflicts are re-decided on fresh
data, events wait behind a pending write, partial writes release what landed."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import ReplicaState as RS
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr, ReplicaAssignment

from .builders import AT, broker, elected, leader_isr, of_type, run, settle, tp
from .flows import brokers_changed, catch_up, sent_to


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


def test_a_large_write_released_in_parts_sends_the_same_requests_with_its_rows_kept_or_found_again(monkeypatch):
    """The rows of a parked decision's requests are kept for its later releases
    (partition_views.remember_rows): the requests are the same as when each release finds them
    in the index again, including a part with a conflict in the final outcome."""
    from controller_core import partition_views

    topics = {f"t{t}": [[1, 2, 3], [1, 3, 2], [1, 3, 4]] * 150 for t in range(3)}  # 1,350 led by 1
    given = elected(brokers=(1, 2, 3, 4), topics=topics)[0]

    def released():
        state, commands = step(given, brokers_changed(2, 3, 4))
        (write,) = of_type(commands, C.WritePartitionStates)
        tps = [w.tp for w in write.writes]
        out = []
        for part in (tps[:400], tps[400:800], tps[800:1200]):
            state, sent = step(state, E.PartitionStatesWritten(at=AT, write_id=write.write_id, landed=tuple(part),
                                                                final=False))
            out.append(sent)
        conflict = tps[-1]
        state, sent = step(state, E.PartitionStatesWritten(
            at=AT, write_id=write.write_id, conflicts=((conflict, LeaderIsr(2, 9, (2, 3), 1, 7)),)))
        out.append(sent)
        return state, out

    recalled = []
    real = partition_views._recalled_rows
    monkeypatch.setattr(partition_views, "_recalled_rows",
                        lambda tps, index: recalled.append(real(tps, index) is not None) or real(tps, index))
    kept_state, kept = released()
    assert all(of_type(sent, C.SendLeaderAndIsr) for sent in kept)
    # the requests of 1,024 partitions or more, broker 3's LeaderAndIsr and the UpdateMetadata:
    # their rows came with the decision (columnar_brokers knew them), recalled in all four parts
    assert sum(recalled) == 4 + 4
    monkeypatch.setattr(partition_views, "_REMEMBERED", 10**9)  # nothing kept, nothing recalled
    partition_views._REQUEST_ROWS.clear()
    again_state, again = released()
    assert kept == again and kept_state == again_state


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
