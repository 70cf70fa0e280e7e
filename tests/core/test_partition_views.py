"""A release's LeaderAndIsr and UpdateMetadata gathered from the image's columns
(`PartitionViews`) are the requests the per-partition path builds, on random clusters:
partitions without a state, reassignments in flight (adding / removing replicas), topics queued
for deletion (leader -2 in UpdateMetadata only), partitions sent as new, and the `skip` / `only`
filters of a write's progress."""
from __future__ import annotations

import attrs
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import codec
from controller_core.request_batch import ALL, Outbox, _requests_from_columns, _requests_from_views
from controller_core.partition_views import PartitionViews, _row_tuples, distinct_rows
from controller_core.state import PartitionInfo
from controller_core.values import ReplicaAssignment

from .builders import elected, tp
from .test_columnar_failure import BROKERS, clusters


@st.composite
def releases(draw):
    topics, states, configs, alive, _, _ = draw(clusters())
    state, _ = elected(brokers=tuple(alive), topics=topics, states=states, topic_configs=configs)
    image = state.partitions
    everything = sorted(image.keys())
    for t in draw(st.lists(st.sampled_from(everything), max_size=3)):
        info = image[t]
        replicas = info.assignment.replicas
        adding = tuple(r for r in replicas if draw(st.booleans()))  # in replica order: the columns hold masks
        removing = tuple(r for r in replicas if r not in adding and draw(st.booleans()))
        image = image.set(t, PartitionInfo(ReplicaAssignment(replicas, adding, removing), info.leader_isr,
                                           info.state, info.replica_states))
    deleting = frozenset(draw(st.lists(st.sampled_from(sorted(topics)), max_size=2)))
    state = attrs.evolve(state, partitions=image, topics_to_delete=deleting)
    unknown = tp("nowhere", 0)  # a partition the image does not hold: dropped, as by the views path
    pick = st.lists(st.sampled_from(everything + [unknown]), unique=True)
    lai = tuple((b, tuple(tps), frozenset(draw(st.lists(st.sampled_from(tps), unique=True))) if tps else frozenset())
                for b in draw(st.lists(st.sampled_from(BROKERS), unique=True)) for tps in [draw(pick)])
    outbox = Outbox(leader_and_isr=lai, um_brokers=frozenset(draw(st.lists(st.sampled_from(BROKERS)))),
                    um_partitions=ALL if draw(st.booleans()) else tuple(draw(pick)))
    skip = frozenset(draw(st.lists(st.sampled_from(everything))))
    only = frozenset(draw(st.lists(st.sampled_from(everything)))) if draw(st.booleans()) else None
    return state, outbox, skip, only


def _requests(fill, state, outbox, skip, only, *extra):
    commands: list = []
    brokers = state.brokers
    live_brokers = tuple(brokers[b] for b in sorted(brokers.keys()))
    fill(commands, state, outbox, brokers, live_brokers, tuple(sorted(state.shutting_down)), skip, only, *extra)
    return commands


@settings(max_examples=80, deadline=None)
@given(releases())
def test_requests_gathered_from_the_columns_are_the_per_partition_requests(release):
    state, outbox, skip, only = release
    assert not state.partitions.odd  # (an odd image takes the per-partition path in emit_outbox)
    columns = _requests(_requests_from_columns, *release)
    views = _requests(_requests_from_views, *release, None)
    assert columns == views
    assert [type(c.partitions) for c in columns] == [PartitionViews] * len(columns)
    assert codec.digest(columns) == codec.digest(views)  # what the journal records
    assert [len(c.partitions) for c in columns] == [len(c.partitions) for c in views]


def test_a_partition_views_is_a_sequence_equal_to_its_tuple():
    pv = PartitionViews((tp("a", 0), tp("a", 1)), np.array([1, 2]), np.array([3, 4]), np.array([[1, 2], [2, -1]]),
                        np.array([5, 5]), np.array([7, 8]), np.array([[1, 2], [2, 1]]),
                        is_new=np.array([False, True]))
    views = pv.views()
    assert len(pv) == 2 and pv[1] is views[1] and list(pv) == list(views)
    assert views[1].isr == (2,) and views[1].replicas == (2, 1) and views[1].is_new and not views[0].is_new
    assert pv == views and views == pv and hash(pv) == hash(views)
    assert pv != views[:1] and pv != ()


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 6).flatmap(lambda width: st.lists(
    st.lists(st.one_of(st.integers(0, 9), st.integers(0, 2**31 - 1)), max_size=width).map(
        lambda ids, width=width: ids + [-1] * (width - len(ids))), max_size=40).map(
    lambda rows, width=width: np.array(rows, np.int32).reshape(len(rows), width))))
def test_row_tuples_are_the_rows_cut_each_distinct_row_made_once(matrix):
    """`_row_tuples` (how `PartitionViews` makes its replica and ISR lists) and `distinct_rows`
    (also the request bodies' replica sets): packed into one int64 key when the ids are small,
    compared as whole rows otherwise (ids up to 2**31 - 1)."""
    distinct, inverse = distinct_rows(matrix)
    assert distinct[inverse].tolist() == matrix.tolist()
    assert len({tuple(r) for r in distinct.tolist()}) == len(distinct)
    rows = _row_tuples(matrix)
    assert rows == [tuple(r for r in row if r != -1) for row in matrix.tolist()]
    made: dict = {}
    for t in rows:
        assert made.setdefault(t, t) is t  # equal rows are the same tuple
