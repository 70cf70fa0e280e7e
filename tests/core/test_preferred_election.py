"""Preferred-leader and admin elections, and the automatic leader rebalance."""
from controller_core import commands as C
from controller_core import events as E
from controller_core.state import ControllerConfig
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, elected, leader_isr, of_type, run, tp
from .flows import brokers_changed, reassign


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
