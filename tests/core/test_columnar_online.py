"""Every New or Offline partition brought Online over the columns (columnar_online.elect_waiting)
gives exactly the state and the commands of the rule (partitions.trigger_online_state_change),
digest included, on random clusters: brokers coming back to a cluster that lost every replica of
some partitions, partitions without a state, refusals (noted for a re-read where the cached ISR
may explain them), unclean elections where a topic allows them, topics queued for deletion."""
from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import columnar_brokers, columnar_online
from controller_core import commands as C
from controller_core import events as E
from controller_core.partition_writes import PartitionWrites
from controller_core.state import ControllerConfig
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, assert_same, both_paths, broker, elected, tp
from .test_columnar_brokers import bounce_of_broker_1, healthy_clusters
from .test_columnar_failure import clusters
from .test_columnar_startup import both_ways as startup_both_ways
from .test_columnar_startup import comebacks


def both_ways(case):
    return startup_both_ways(case, columnar_online, "elect_waiting")


@settings(max_examples=250, deadline=None)
@given(comebacks())
def test_brokers_coming_back_elect_what_the_rule_elects(case):
    out = both_ways(case)
    if out is None:
        return
    fast, slow, _ = out
    assert_same(fast, slow)


def test_partitions_that_lost_every_replica_are_elected_or_initialized_over_the_columns_when_one_returns():
    """Broker 1 was down when this controller was elected: `a-0` (only on 1) stayed Offline,
    `b-0` (never written, only on 1) stayed New, `a-1` (only on 3, which stays down) stays
    refused. Broker 1's return elects `a-0` and initializes `b-0` over the columns; `a-1` is
    refused again, and no live replica is missing from its cached ISR, so no re-read."""
    topics = {"a": [[1], [3], [2]], "b": [[1]]}
    states = {tp("a", 0): LeaderIsr(1, 4, (1,), 1, 7), tp("a", 1): LeaderIsr(3, 2, (3,), 1, 2),
              tp("a", 2): LeaderIsr(2, 0, (2,), 1, 0)}
    out = both_ways((topics, states, (), [2], [1], [], False, []))
    assert out is not None
    fast, slow, taken = out
    assert taken == [True]
    assert_same(fast, slow)
    (write,) = [c for c in fast[1] if isinstance(c, C.WritePartitionStates)]
    # (the new controller, epoch 2, had already taken dead 1 out as a-0's leader: version 8)
    assert {w.tp: (w.leader_isr, w.expected_version) for w in write.writes} == {
        tp("a", 0): (LeaderIsr(1, 6, (1,), 2, 9), 8), tp("b", 0): (LeaderIsr(1, 0, (1,), 2, 0), -1)}
    lines = [(e.from_state, e.partitions, e.ok, e.detail) for c in fast[1] if isinstance(c, C.LogStateChanges)
             for e in c.entries if e.to_state == "OnlinePartition"]
    assert lines == [("OfflinePartition", (tp("a", 0),), True, ""),
                     ("OfflinePartition", (tp("a", 1),), False, "no eligible leader under the offline strategy (isr [3])"),
                     ("NewPartition", (tp("b", 0),), True, "")]
    assert not [c for c in fast[1] if isinstance(c, C.ReadPartitionStates)]


def test_a_refusal_a_live_replica_outside_the_cached_isr_may_explain_is_re_read_first():
    """`a-1` is on 1 and 3; its cached ISR is [3] and 3 stays down. When 1 returns, the rule
    would refuse on the cached ISR, but 1 may have rejoined it meanwhile: the whole decision
    waits for the state znode (ReadPartitionStates), over the columns as in the rule."""
    topics = {"a": [[1], [1, 3], [2]]}
    states = {tp("a", 0): LeaderIsr(1, 4, (1,), 1, 7), tp("a", 1): LeaderIsr(3, 2, (3,), 1, 2),
              tp("a", 2): LeaderIsr(2, 0, (2,), 1, 0)}
    out = both_ways((topics, states, (), [2], [1], [], False, []))
    fast, slow, taken = out
    assert taken == [True]
    assert_same(fast, slow)
    (read,) = [c for c in fast[1] if isinstance(c, C.ReadPartitionStates)]
    assert read.partitions == (tp("a", 1),) and not [c for c in fast[1] if isinstance(c, C.WritePartitionStates)]



def test_a_bounce_elects_its_waiting_partitions_over_the_columns_into_its_failures_writes(monkeypatch):
    """Broker 1 re-registers. Its failure, over the columns, elects 2 for t-1, shrinks t-2's ISR
    and leaves t-0 (only on 1) without a leader: three writes. Its startup then elects 1 for t-0
    over the columns too: that write merges into the failure's write of t-0 (its place, the
    version it expected, both intents), as `Draft.write_change` merges it under the rule."""
    state, bounce = bounce_of_broker_1()
    failures = []
    real = columnar_brokers.on_broker_failure
    monkeypatch.setattr(columnar_brokers, "on_broker_failure", lambda *a: failures.append(real(*a)) or failures[-1])
    fast, slow, taken = both_paths(columnar_online, "elect_waiting", lambda: step(state, bounce))
    assert failures[0] is True and taken == [True]
    assert_same(fast, slow)
    (write,) = [c for c in fast[1] if isinstance(c, C.WritePartitionStates)]
    assert isinstance(write.writes, PartitionWrites)  # both parts' columns, merged
    assert [(w.tp, w.leader_isr.leader, w.leader_isr.leader_epoch, w.leader_isr.isr, w.expected_version)
            for w in write.writes] == [(tp("t", 1), 2, 5, (2,), 7), (tp("t", 0), 1, 6, (1,), 7),
                                       (tp("t", 2), 2, 5, (2,), 7)]
    assert fast[0].pending[write.write_id].intents[tp("t", 0)] == (("shrink", 1), ("elect", "offline"))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_bounces_decide_over_the_columns_as_by_the_rule(data):
    """Random clusters (healthy ones and any shape), random brokers re-registering (a failure
    and a startup in one decision, maybe with others dying), replicas on failed log dirs or
    not: the waiting partitions' elections
    over the columns, after a failure decided over them or not, give the rule's state,
    commands and digest."""
    topics, states, configs, alive, _, unclean = data.draw(st.one_of(healthy_clusters(), clusters()), "cluster")
    bouncing = data.draw(st.lists(st.sampled_from(alive), min_size=1, max_size=2, unique=True), "bouncing")
    rest = [b for b in alive if b not in bouncing]
    dying = data.draw(st.lists(st.sampled_from(rest), max_size=1, unique=True), "dying") if rest else []
    config = ControllerConfig(broker_id=alive[0], auto_leader_rebalance_enable=False,
                              unclean_leader_election_enable=unclean)
    state, _ = elected(brokers=tuple(alive), topics=topics, states=states, config=config, topic_configs=configs)
    if state.pending or state.rechecking:
        return
    # replicas on failed log dirs (rules 4), on brokers that stay up
    pairs = sorted((t, b) for t, info in state.partitions.items() for b in info.assignment.replicas if b in rest)
    if pairs:
        kept = data.draw(st.lists(st.sampled_from(pairs), max_size=3, unique=True), "kept")
        state = attrs.evolve(state, replicas_on_offline_dirs=frozenset(kept))
    listing = tuple(broker(b, epoch=900 + b) if b in bouncing else broker(b) for b in alive if b not in dying)
    event = E.BrokersChanged(at=AT, brokers=listing)
    fast, slow, _ = both_paths(columnar_online, "elect_waiting", lambda: step(state, event))
    assert_same(fast, slow)
