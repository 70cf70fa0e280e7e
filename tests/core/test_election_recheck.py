"""An election is never refused on an ISR the controller has not caught up with.

The race: a partition leader writes a larger ISR to ZooKeeper, and its ISR change notification
is still queued behind the request that needs it (a preferred election, a controlled shutdown,
a broker failure). Kafka reads every state before it elects; the core re-reads the states it
would refuse on and decides the same event again on what ZooKeeper holds.
"""
from __future__ import annotations

from controller_core import codec
from controller_core import commands as C
from controller_core import events as E
from controller_core.state import ControllerConfig
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, broker, elected, of_type, settle, tp

T0 = tp("t", 0)
STALE = LeaderIsr(1, 3, (1,), 2, 4)  # what the controller cached: 2 had dropped out
FRESH = LeaderIsr(1, 3, (1, 2), 2, 5)  # what leader 1 wrote since: 2 is back in sync


def _cluster(brokers=(1, 2), config=None):
    state, _ = elected(brokers=brokers, topics={"t": [[2, 1]]}, states={T0: STALE}, config=config)
    assert state.partitions[T0].leader_isr == STALE
    return state


def _preferred(state):
    return step(state, E.PreferredElectionRequested(at=AT, exists=True, partitions=(T0,), zk_version=7))


def test_a_preferred_election_on_a_stale_isr_re_reads_instead_of_refusing():
    state, commands = _preferred(_cluster())
    assert commands == (C.ReadPartitionStates(read_id=state.recheck_id, partitions=(T0,)),)
    assert state.rechecking and state.partitions[T0].leader_isr == STALE


def test_the_re_read_state_elects_the_preferred_replica_and_removes_the_request():
    state, _ = _preferred(_cluster())
    state, commands = step(state, E.PartitionStatesRechecked(at=AT, read_id=state.recheck_id, states=((T0, FRESH),)))
    [write] = of_type(commands, C.WritePartitionStates)
    [pw] = write.writes
    assert (pw.tp, pw.leader_isr.leader, pw.leader_isr.leader_epoch, pw.leader_isr.isr, pw.expected_version) == \
        (T0, 2, 4, (1, 2), 5)
    assert not of_type(commands, C.RejectRequest)
    state, commands = settle(state, commands)
    assert C.DeletePreferredElectionRequest(expected_version=7) in commands
    assert state.partitions[T0].leader_isr.leader == 2 and not state.rechecking


def test_a_refusal_that_zookeeper_confirms_is_final():
    state, _ = _preferred(_cluster())
    state, commands = step(state, E.PartitionStatesRechecked(at=AT, read_id=state.recheck_id, states=((T0, STALE),)))
    [reject] = of_type(commands, C.RejectRequest)
    assert "no eligible leader under the preferred strategy (isr [1])" in reject.reason
    assert C.DeletePreferredElectionRequest(expected_version=7) in commands
    assert not of_type(commands, C.ReadPartitionStates) and not state.rechecking


def test_a_refusal_that_does_not_depend_on_the_isr_needs_no_read():
    # the preferred replica is not alive: no ISR can make it eligible
    state, commands = _preferred(_cluster(brokers=(1,)))
    assert not of_type(commands, C.ReadPartitionStates)
    assert of_type(commands, C.RejectRequest) and not state.rechecking


def test_events_that_arrive_during_the_read_wait_and_are_decided_after_it():
    state, _ = _preferred(_cluster(brokers=(1, 2, 3)))
    gone = tuple(broker(b) for b in (1, 2))
    state, commands = step(state, E.BrokersChanged(at=AT, brokers=gone))
    assert commands == () and len(state.deferred) == 1
    state, commands = step(state, E.PartitionStatesRechecked(at=AT, read_id=state.recheck_id, states=((T0, FRESH),)))
    assert of_type(commands, C.WritePartitionStates)  # the election, decided first
    state, _ = settle(state, commands)
    assert not state.deferred and 3 not in dict(state.brokers.items())


def test_a_leader_election_request_and_a_controlled_shutdown_confirm_too():
    state, commands = step(_cluster(), E.LeaderElectionRequested(at=AT, request_id=9, election_type="preferred",
                                                                 partitions=(T0,)))
    assert of_type(commands, C.ReadPartitionStates) and not of_type(commands, C.ReplyLeaderElection)
    state, commands = settle(*step(state, E.PartitionStatesRechecked(at=AT, read_id=state.recheck_id,
                                                                     states=((T0, FRESH),))))
    [reply] = of_type(commands, C.ReplyLeaderElection)
    assert reply.results == ((T0, None),)

    # leader 1 shuts down; the cached ISR has no other member, ZooKeeper's has 2
    state = _cluster()
    state, commands = step(state, E.ControlledShutdownRequested(at=AT, request_id=4, broker_id=1, broker_epoch=101))
    assert of_type(commands, C.ReadPartitionStates) and not of_type(commands, C.ReplyControlledShutdown)
    state, commands = step(state, E.PartitionStatesRechecked(at=AT, read_id=state.recheck_id, states=((T0, FRESH),)))
    [pw] = of_type(commands, C.WritePartitionStates)[0].writes
    assert (pw.leader_isr.leader, pw.leader_isr.isr) == (2, (2,))


def test_an_offline_election_after_a_broker_failure_confirms_too():
    state = _cluster()
    state, commands = step(state, E.BrokersChanged(at=AT, brokers=(broker(2),)))
    assert of_type(commands, C.ReadPartitionStates) == [C.ReadPartitionStates(read_id=state.recheck_id, partitions=(T0,))]
    state, commands = step(state, E.PartitionStatesRechecked(at=AT, read_id=state.recheck_id, states=((T0, FRESH),)))
    [pw] = of_type(commands, C.WritePartitionStates)[0].writes
    assert (pw.leader_isr.leader, pw.leader_isr.isr, pw.expected_version) == (2, (2,), 5)


def test_a_stale_answer_is_ignored():
    state, _ = _preferred(_cluster())
    same, commands = step(state, E.PartitionStatesRechecked(at=AT, read_id=state.recheck_id + 1, states=((T0, FRESH),)))
    assert same is state and commands == ()


def test_resigning_during_the_read_answers_the_waiting_request():
    state, _ = step(_cluster(), E.LeaderElectionRequested(at=AT, request_id=9, election_type="preferred",
                                                          partitions=(T0,)))
    state, commands = step(state, E.ControllerResigned(at=AT, reason="session expired"))
    [reply] = of_type(commands, C.ReplyLeaderElection)
    assert reply.request_id == 9 and "NOT_CONTROLLER" in reply.results[0][1]
    assert not state.rechecking


def test_states_of_older_journals_keep_the_rule_they_were_decided_with():
    state, _ = _preferred(_cluster())  # a state waiting for a read: v3 round-trips it
    assert codec.decode_state(codec.encode_state(state)) == state
    old = codec.encode_state(_cluster())
    old["v"] = 2
    del old["rechecking"], old["recheck_id"], old["config"]["rules"]
    del old["config"]["dynamic_unclean_leader_election_enable"]
    decoded = codec.decode_state(old)
    assert decoded.config.rules == 1
    _, commands = _preferred(decoded)
    assert of_type(commands, C.RejectRequest) and not of_type(commands, C.ReadPartitionStates)
    assert ControllerConfig(broker_id=1).rules >= 2  # (3 keeps the re-read)
