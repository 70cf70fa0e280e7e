"""A new controller's start of the state machines filled from the columns gives exactly the
state and commands of the walk in `failover.on_elected`, on random snapshots: healthy clusters,
where the columnar path must decide, and any cluster (partitions without a state, dead brokers,
ISR members that are not assigned, leaders that are not live), where it must leave the draft
untouched for the walk. Commands are compared with their digest, which the journal records."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import codec, columnar_failover
from controller_core import events as E
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, snapshot, tp
from .test_columnar_failure import BROKERS, clusters


@st.composite
def healthy_clusters(draw):
    """Every partition has a state whose leader is live and whose ISR is assigned; every broker
    holding a replica is alive."""
    alive = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=len(BROKERS), unique=True))
    topics, states = {}, {}
    for t in range(draw(st.integers(1, 4))):
        name = f"t{t}"
        parts = []
        for p in range(draw(st.integers(1, 8))):
            replicas = draw(st.lists(st.sampled_from(alive), min_size=1, max_size=4, unique=True))
            parts.append(replicas)
            isr = draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True))
            states[tp(name, p)] = LeaderIsr(draw(st.sampled_from(isr)), draw(st.integers(0, 5)), tuple(isr),
                                            draw(st.integers(0, 3)), draw(st.integers(0, 9)))
        topics[name] = parts
    return topics, states, (), sorted(alive), [], False


def both_ways(cluster, epoch=2):
    topics, states, configs, alive, dying, unclean_default = cluster
    config = ControllerConfig(broker_id=alive[0], auto_leader_rebalance_enable=False,
                              unclean_leader_election_enable=unclean_default)
    event = E.ControllerElected(at=AT, epoch=epoch, epoch_zk_version=epoch - 1, snapshot=snapshot(
        tuple(b for b in alive if b not in dying), topics, states, topic_configs=configs))
    taken = []
    real = columnar_failover.start_machines

    def spy(d):
        taken.append(real(d))
        return taken[-1]

    columnar_failover.start_machines = spy
    try:
        fast = step(initial_state(config), event)
    finally:
        columnar_failover.start_machines = real
    columnar_failover.ENABLED = False
    try:
        slow = step(initial_state(config), event)
    finally:
        columnar_failover.ENABLED = True
    return fast, slow, taken


def assert_same(fast, slow):
    (fs, fc), (ss, sc) = fast, slow
    assert fc == sc
    assert codec.digest(fc) == codec.digest(sc)
    assert fs == ss
    assert codec.encode_state(fs) == codec.encode_state(ss)


@settings(max_examples=100, deadline=None)
@given(healthy_clusters(), st.integers(2, 4))
def test_a_healthy_cluster_is_started_over_the_columns_as_the_walk_starts_it(cluster, epoch):
    fast, slow, taken = both_ways(cluster, epoch)
    assert taken == [True]
    assert_same(fast, slow)


@settings(max_examples=100, deadline=None)
@given(clusters())
def test_any_cluster_gives_the_commands_of_the_walk(cluster):
    fast, slow, _ = both_ways(cluster)
    assert_same(fast, slow)
