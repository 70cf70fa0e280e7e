"""The cluster-wide `unclean.leader.election.enable` (`/config/brokers/<default>`): Kafka 2.4's
UncleanLeaderElectionEnable, with the precedence topic override, dynamic default, static."""
from __future__ import annotations

import attrs

from controller_core import commands as C
from controller_core import events as E
from controller_core.machines import PartitionState as PS
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, broker, elected, leader_isr, of_type, run, tp


def default_changed(value):
    return E.BrokerDefaultConfigChanged(at=AT, unclean_leader_election_enable=value)


def offline_topics(**configs):
    """Topics t and u, replicas [1, 2], ISR [1] only; broker 1 then dies: both offline, 2 live."""
    states = {tp(t, 0): LeaderIsr(1, 5, (1,), 1, 3) for t in ("t", "u")}
    given = elected(topics={"t": [[1, 2]], "u": [[1, 2]]}, states=states,
                    topic_configs=tuple(configs.items()))[0]
    state, _ = run(given, E.BrokersChanged(at=AT, brokers=(broker(2), broker(3))))
    assert state.partitions[tp("t", 0)].state is PS.OFFLINE and state.partitions[tp("u", 0)].state is PS.OFFLINE
    return state


def test_turning_the_cluster_default_on_elects_offline_partitions_uncleanly_at_once():
    state, commands = run(offline_topics(), default_changed(True))
    assert leader_isr(state, "t", 0).leader == 2 and leader_isr(state, "t", 0).isr == (2,)
    assert leader_isr(state, "u", 0).leader == 2
    log = [e for c in of_type(commands, C.LogStateChanges) for e in c.entries if e.detail == "unclean leader election"]
    assert sorted(p for e in log for p in e.partitions) == [tp("t", 0), tp("u", 0)]


def test_a_topic_override_wins_over_the_cluster_default():
    state, _ = run(offline_topics(u=(("unclean.leader.election.enable", "false"),)), default_changed(True))
    assert leader_isr(state, "t", 0).leader == 2
    assert leader_isr(state, "u", 0).leader == -1 and state.partitions[tp("u", 0)].state is PS.OFFLINE


def test_the_dynamic_default_wins_over_the_static_setting_both_ways():
    static_on = ControllerConfig(broker_id=1, unclean_leader_election_enable=True)
    assert attrs.evolve(static_on, dynamic_unclean_leader_election_enable=False).unclean_default() is False
    assert attrs.evolve(static_on, dynamic_unclean_leader_election_enable=None).unclean_default() is True
    static_off = ControllerConfig(broker_id=1)
    assert attrs.evolve(static_off, dynamic_unclean_leader_election_enable=True).unclean_default() is True


def test_turning_it_off_or_repeating_it_elects_nothing():
    state, _ = run(offline_topics(), default_changed(False))
    assert leader_isr(state, "t", 0).leader == -1
    on, _ = run(state, default_changed(True))
    again, commands = step(on, default_changed(True))
    assert again == on and commands == ()


def test_a_node_that_is_not_the_controller_keeps_the_value_for_its_next_term():
    state, commands = step(initial_state(ControllerConfig(broker_id=1)), default_changed(True))
    assert commands == () and state.config.dynamic_unclean_leader_election_enable is True
    resigned, _ = step(state, E.ControllerResigned(at=AT, reason="test"))
    assert resigned.config.unclean_default() is True
