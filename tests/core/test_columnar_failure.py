"""The columnar broker-failure decision writes exactly what `step()` writes for the same
BrokersChanged, on random clusters: leaders and ISRs of every shape (empty ISRs, members that
are not assigned, dead leaders at election time), several brokers failing at once, unclean
election allowed or not, per topic."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import columnar_failure
from controller_core import commands as C
from controller_core import events as E
from controller_core import vector_election as V
from controller_core.columns import PARTITION_STATES, image_of
from controller_core.state import ControllerConfig
from controller_core.step import step
from controller_core.values import LeaderIsr

from .builders import AT, broker, elected, tp

BROKERS = (1, 2, 3, 4, 5, 6)


@st.composite
def clusters(draw):
    topics, states, configs = {}, {}, []
    for t in range(draw(st.integers(1, 4))):
        name = f"t{t}"
        parts = []
        for p in range(draw(st.integers(1, 8))):
            replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True))
            parts.append(replicas)
            if draw(st.integers(0, 9)) == 0:
                continue  # no state znode yet: a New partition
            isr = draw(st.lists(st.sampled_from(replicas + [draw(st.sampled_from(BROKERS))]), max_size=4, unique=True))
            leader = draw(st.sampled_from(isr + [-1] if isr else [-1]))
            states[tp(name, p)] = LeaderIsr(leader, draw(st.integers(0, 5)), tuple(isr), 1, draw(st.integers(0, 9)))
        topics[name] = parts
        if draw(st.booleans()):
            configs.append((name, (("unclean.leader.election.enable", draw(st.sampled_from(["true", "false"]))),)))
    alive = draw(st.lists(st.sampled_from(BROKERS), min_size=2, max_size=6, unique=True))
    dying = draw(st.lists(st.sampled_from(alive), min_size=1, max_size=len(alive) - 1, unique=True))
    unclean_default = draw(st.booleans())
    return topics, states, tuple(configs), sorted(alive), sorted(dying), unclean_default


@settings(max_examples=120, deadline=None)
@given(clusters())
def test_the_columnar_decision_writes_what_step_writes(cluster):
    topics, states, configs, alive, dying, unclean_default = cluster
    config = ControllerConfig(broker_id=alive[0], auto_leader_rebalance_enable=False,
                              unclean_leader_election_enable=unclean_default)
    state, _ = elected(brokers=tuple(alive), topics=topics, states=states, config=config, topic_configs=configs)
    if state.pending:
        return  # a write of the election is still unconfirmed (settle confirms them all)
    remaining = tuple(broker(b) for b in alive if b not in dying)
    after, commands = step(state, E.BrokersChanged(at=AT, brokers=remaining))
    reads = [c for c in commands if isinstance(c, C.ReadPartitionStates)]
    if reads:
        # step() confirms a refusal on the cached ISR against ZooKeeper first; here ZooKeeper
        # holds what the controller cached, so the decision is then the one made on the cache
        [read] = reads
        fresh = tuple((t, after.partitions[t].leader_isr) for t in read.partitions)
        after, commands = step(after, E.PartitionStatesRechecked(at=AT, read_id=read.read_id, states=fresh))
    writes = [w for c in commands if isinstance(c, C.WritePartitionStates) for w in c.writes]
    expected = {w.tp: (w.leader_isr.leader, w.leader_isr.leader_epoch, w.leader_isr.isr,
                       w.leader_isr.controller_epoch, w.expected_version) for w in writes}

    image = image_of(state.partitions)
    rows_tps = image.tps(np.arange(image.size))
    unclean = np.array([state.unclean_allowed(x.topic) for x in rows_tps], bool)
    live = frozenset(b.broker_id for b in remaining)
    got = columnar_failure.decide(image, frozenset(dying), live, state.epoch, unclean)
    decided = {}
    for k, row in enumerate(got.rows.tolist()):
        decided[image.tps(np.array([row]))[0]] = (int(got.leader[k]), int(got.leader_epoch[k]), V.row(got.isr, k),
                                                  int(got.controller_epoch[k]), int(got.expected_version[k]))
    assert decided == expected
    for k, row in enumerate(got.rows.tolist()):
        x = image.tps(np.array([row]))[0]
        assert PARTITION_STATES[got.pstate[k]] is after.partition(x).state
