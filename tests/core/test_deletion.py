"""Topic deletion (TopicDeletionRequested): every replica stopped and deleted, then the topic;
waiting for a down broker; unknown topics."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import ReplicaState as RS
from controller_core.step import step

from .builders import AT, elected, of_type, run, tp
from .flows import brokers_changed, stop_replica_done


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


def test_completing_a_deletion_logs_every_replica_leaving_deletion_successful():
    """Kafka's completeDeleteTopic moves each replica DeletionSuccessful -> NonExistent before
    forgetting the topic: the state-change log of the completing step says so for each one
    (recorded without building each partition's value per replica)."""
    given = elected(topics={"t": [[1, 2], [2, 3]], "keep": [[1]]}, brokers=(1, 2, 3))[0]
    state, commands = run(given, E.TopicDeletionsRequested(at=AT, topics=frozenset({"t"})))
    logs = []
    for event in stop_replica_done(commands):
        state, more = run(state, event)
        logs += [e for c in of_type(more, C.LogStateChanges) for e in c.entries]
    assert "t" not in state.topics
    moved = {(p, e.replica) for e in logs if (e.from_state, e.to_state, e.ok) == (
        RS.DELETION_SUCCESSFUL.value, RS.NON_EXISTENT.value, True) for p in e.partitions}
    assert moved == {(tp("t", 0), 1), (tp("t", 0), 2), (tp("t", 1), 2), (tp("t", 1), 3)}


def _deleted(rules=None):
    from controller_core.state import ControllerConfig
    config = ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False,
                              **({} if rules is None else {"rules": rules}))
    given = elected(topics={"t": [[1, 2], [2, 1]], "keep": [[1]]}, config=config)[0]
    state, commands = run(given, E.TopicDeletionsRequested(at=AT, topics=frozenset({"t"})))
    for event in stop_replica_done(commands):
        state, more = run(state, event)
    assert "t" not in state.topics and C.DeleteTopic(topic="t") in more
    return state


def _listing_with_t(assignment=((0, (1, 2)), (1, (2, 1)))):
    from controller_core.values import ReplicaAssignment
    return E.TopicsChanged(at=AT, topics=frozenset({"t", "keep"}),
                           assignments=(("t", tuple((p, ReplicaAssignment(r)) for p, r in assignment)),))


def test_a_listing_read_before_the_deleted_topics_znodes_were_removed_does_not_create_it_again():
    """The chaos soak (seed 9): a controller paused while completing a deletion got, on waking,
    a listing its watch had read before its own DeleteTopic ran; it took the topic for a new one,
    wrote leaders into the state znodes about to go and told the brokers to host it again. Until
    the writer reports the removal (TopicZnodesDeleted), such a listing names no new topic; after
    it, the topic in a listing is one an admin created anew."""
    state = _deleted()
    assert state.removing_topics == {"t"}
    stale, commands = run(state, _listing_with_t())
    assert "t" not in stale.topics and tp("t", 0) not in stale.partitions
    assert not of_type(commands, C.WritePartitionStates) and not of_type(commands, C.SendLeaderAndIsr)
    removed, commands = step(stale, E.TopicZnodesDeleted(at=AT, topic="t"))
    assert removed.removing_topics == frozenset() and commands == ()
    again, commands = run(removed, _listing_with_t(((0, (2, 1)),)))
    assert "t" in again.topics and again.partitions[tp("t", 0)].leader_isr.leader == 2
    assert of_type(commands, C.WritePartitionStates)


def test_journals_of_controllers_before_rules_3_re_create_the_topic_as_they_did():
    state = _deleted(rules=2)
    assert state.removing_topics == frozenset()
    again, commands = run(state, _listing_with_t())
    assert "t" in again.topics and of_type(commands, C.WritePartitionStates)
