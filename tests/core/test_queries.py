"""The whole-cluster counts over the columns equal the counts by the rules, partition by
partition, on random states: leaders dead or absent, ISRs shorter than the assignment,
reassignments adding the preferred replica, topics queued for deletion."""
from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import queries
from controller_core.pmap import pmap
from controller_core.state import ControllerConfig, ControllerState, TopicInfo

from .builders import broker
from .test_columns import BROKERS, infos
from controller_core.values import TopicPartition


@st.composite
def states(draw):
    parts = {}
    topics = {}
    for t in ("a", "b", "c")[:draw(st.integers(1, 3))]:
        n = draw(st.integers(1, 6))
        topics[t] = TopicInfo(n)
        for p in range(n):
            info = draw(infos())
            if info.assignment.replicas:
                parts[TopicPartition(t, p)] = info
    live = draw(st.lists(st.sampled_from(BROKERS), max_size=5, unique=True))
    deleting = frozenset(draw(st.lists(st.sampled_from(sorted(topics)), max_size=2, unique=True)))
    return ControllerState(config=ControllerConfig(broker_id=1), active=True, brokers=pmap({b: broker(b) for b in live}),
                           topics=pmap(topics), partitions=pmap(parts), topics_to_delete=deleting)


@settings(max_examples=200, deadline=None)
@given(states())
def test_the_counts_over_the_columns_are_the_counts_by_the_rules(state):
    assert queries.cluster_counts(state) == queries.cluster_counts_by_rules(state)


@settings(max_examples=100, deadline=None)
@given(states())
def test_the_columns_answer_without_the_rules_when_every_partition_fits_them(state):
    state = attrs.evolve(state, partitions=pmap({tp: info for tp, info in state.partitions.items()
                                                 if tp not in state.partitions.odd}))
    called = []
    real = queries.cluster_counts_by_rules
    queries.cluster_counts_by_rules = lambda s: called.append(s) or real(s)
    try:
        got = queries.cluster_counts(state)
    finally:
        queries.cluster_counts_by_rules = real
    assert called == [] or not state.partitions.count
    assert got == real(state)
