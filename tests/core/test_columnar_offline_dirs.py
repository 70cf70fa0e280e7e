"""Replicas kept on failed log dirs (rules 4, `replicas_on_offline_dirs`) and the columnar
decisions: a broker failure, the elections of waiting partitions and a controlled shutdown
decide over the columns with the kept replicas masked out of their own partitions' elections,
and give the rules' state, commands and digest, on random clusters with random kept replicas."""
from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import columnar_brokers, columnar_online, columnar_shutdown
from controller_core import commands as C
from controller_core import events as E
from controller_core.state import ControllerConfig
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, assert_same, both_paths, broker, elected, of_type, run, tp
from .test_columnar_brokers import healthy_clusters as healthy_failures
from .test_columnar_shutdown import clusters as shutdowns
from .test_columnar_startup import both_ways as comeback_both_ways
from .test_columnar_startup import comebacks


def _kept(draw, state, brokers):
    """Up to four `(partition, broker)` pairs of assigned replicas on `brokers`."""
    pairs = sorted((t, b) for t, info in state.partitions.items() for b in info.assignment.replicas if b in brokers)
    if not pairs:
        return frozenset()
    return frozenset(draw(st.lists(st.sampled_from(pairs), max_size=4, unique=True), "kept"))


def _with_kept(state, kept):
    return attrs.evolve(state, replicas_on_offline_dirs=kept)


@settings(max_examples=150, deadline=None)
@given(healthy_failures(), st.data())
def test_a_broker_failure_with_replicas_on_failed_dirs_decides_as_the_rules(cluster, data):
    topics, states, _, alive, dying, unclean_default = cluster
    config = ControllerConfig(broker_id=alive[0], auto_leader_rebalance_enable=False,
                              unclean_leader_election_enable=unclean_default)
    state, _ = elected(brokers=tuple(alive), topics=topics, states=states, config=config)
    if state.pending or state.rechecking:
        return
    state = _with_kept(state, _kept(data.draw, state, [b for b in alive if b not in dying]))
    event = E.BrokersChanged(at=AT, brokers=tuple(broker(b) for b in alive if b not in dying))
    fast, slow, _ = both_paths(columnar_brokers, "on_broker_failure", lambda: step(state, event))
    assert_same(fast, slow)


@settings(max_examples=150, deadline=None)
@given(comebacks(), st.data())
def test_elections_of_waiting_partitions_with_replicas_on_failed_dirs_decide_as_the_rules(case, data):
    up = case[3]
    out = comeback_both_ways(case, columnar_online, "elect_waiting",
                             before=lambda state: _with_kept(state, _kept(data.draw, state, up)))
    if out is None:
        return
    fast, slow, _ = out
    assert_same(fast, slow)


@settings(max_examples=150, deadline=None)
@given(shutdowns(), st.data())
def test_a_controlled_shutdown_with_replicas_on_failed_dirs_decides_as_the_rules(cluster, data):
    state, event = cluster
    if state.pending or state.rechecking:
        return
    state = _with_kept(state, _kept(data.draw, state, sorted(state.brokers.keys())))
    fast, slow, _ = both_paths(columnar_shutdown, "on_controlled_shutdown", lambda: step(state, event))
    assert_same(fast, slow)


def _cluster():
    """a-0 led by 1 with 2 in its ISR; b-0 led by 3, its replica on 2 kept on a failed dir."""
    topics = {"a": [[1, 2, 3]], "b": [[3, 2, 1]]}
    states = {tp("a", 0): LeaderIsr(1, 4, (1, 2, 3), 1, 7), tp("b", 0): LeaderIsr(3, 4, (3, 2, 1), 1, 7)}
    config = ControllerConfig(broker_id=2, auto_leader_rebalance_enable=False)
    state, _ = elected(brokers=(1, 2, 3), topics=topics, states=states, config=config)
    return state


def test_a_failure_that_elects_away_from_the_failed_dir_stays_on_the_columns():
    """Broker 1 dies: a-0 is elected (2 leads), b-0 only shrinks. The replica on the failed dir
    is b-0's, which elects nothing: decided over the columns, as the rules decide."""
    state = _with_kept(_cluster(), frozenset({(tp("b", 0), 2)}))
    failure = E.BrokersChanged(at=AT, brokers=(broker(2), broker(3)))
    fast, slow, taken = both_paths(columnar_brokers, "on_broker_failure", lambda: step(state, failure))
    assert taken == [True]
    assert_same(fast, slow)
    (write,) = of_type(fast[1], C.WritePartitionStates)
    assert {w.tp: w.leader_isr.leader for w in write.writes} == {tp("a", 0): 2, tp("b", 0): 3}


def test_a_failure_that_elects_where_a_replica_is_on_a_failed_dir_passes_it_over_on_the_columns():
    """Broker 1 dies leading a-0 while a-0's replica on 2 is kept: 2 is passed over, 3 leads
    with the ISR [3], and 2 hears of it only as a replica of b-0's shrink would tell it: as the
    rule decides, over the columns."""
    state = _with_kept(_cluster(), frozenset({(tp("a", 0), 2)}))
    failure = E.BrokersChanged(at=AT, brokers=(broker(2), broker(3)))
    fast, slow, taken = both_paths(columnar_brokers, "on_broker_failure", lambda: step(state, failure))
    assert taken == [True]
    assert_same(fast, slow)
    (write,) = of_type(fast[1], C.WritePartitionStates)
    assert {w.tp: (w.leader_isr.leader, w.leader_isr.isr) for w in write.writes}[tp("a", 0)] == (3, (3,))


def test_a_refusal_on_the_columns_names_the_replica_on_a_failed_dir():
    """c-0 (on 1 and 2, ISR [1, 2]) loses its leader 1; 2 is live but on a failed dir: refused,
    and the log says why 2 was passed over, as the rule's line does."""
    topics = {"c": [[1, 2]], "d": [[2, 1]]}
    states = {tp("c", 0): LeaderIsr(1, 4, (1, 2), 1, 7), tp("d", 0): LeaderIsr(2, 4, (2, 1), 1, 7)}
    config = ControllerConfig(broker_id=2, auto_leader_rebalance_enable=False)
    state, _ = elected(brokers=(1, 2, 3), topics=topics, states=states, config=config)
    state = _with_kept(state, frozenset({(tp("c", 0), 2)}))
    failure = E.BrokersChanged(at=AT, brokers=(broker(2), broker(3)))
    fast, slow, taken = both_paths(columnar_brokers, "on_broker_failure", lambda: step(state, failure))
    assert taken == [True]
    assert_same(fast, slow)
    refusals = [e.detail for c in of_type(fast[1], C.LogStateChanges) for e in c.entries if not e.ok]
    assert refusals == ["no eligible leader under the offline strategy (isr [1, 2]); on a failed log dir: 2"]


def test_a_controlled_shutdown_moves_leadership_past_the_failed_dir_on_the_columns():
    """Broker 1 asks to stop leading a-0 while a-0's replica on 2 is kept: 3 takes over, 2 is
    not told of the election, over the columns as by the rule."""
    state = _with_kept(_cluster(), frozenset({(tp("a", 0), 2)}))
    request = E.ControlledShutdownRequested(at=AT, request_id=7, broker_id=1, broker_epoch=101)
    fast, slow, taken = both_paths(columnar_shutdown, "on_controlled_shutdown", lambda: run(state, request))
    assert taken == [True]
    assert_same(fast, slow)
    (write,) = of_type(fast[1], C.WritePartitionStates)
    assert {w.tp: w.leader_isr.leader for w in write.writes}[tp("a", 0)] == 3
    told = {c.broker_id for c in of_type(fast[1], C.SendLeaderAndIsr) if tp("a", 0) in {v.tp for v in c.partitions}}
    assert told == {1, 3}
