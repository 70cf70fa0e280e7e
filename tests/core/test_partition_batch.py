"""PartitionBatch (partition_batch.py) fills a request's partitions as the dict `tp -> is_new` it
replaces did: first additions in order, each partition once, `is_new` once set stays set; a
block given whole and distinct is kept as given, with its rows while nothing follows it."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core.partition_batch import PartitionBatch, by_broker
from controller_core.values import TopicPartition

TPS = [TopicPartition(t, p) for t in "ab" for p in range(4)]

adds = st.tuples(st.just("add"), st.sampled_from(TPS), st.booleans())
extends = st.tuples(st.just("extend"), st.lists(st.sampled_from(TPS), max_size=6), st.just(False))
blocks = st.tuples(st.just("block"), st.lists(st.sampled_from(TPS), max_size=6, unique=True), st.just(False))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(adds, extends, blocks), max_size=8))
def test_the_same_partitions_order_and_flags_as_the_dict_it_replaces(ops):
    batch, model = PartitionBatch(), {}
    for kind, what, is_new in ops:
        if kind == "add":
            batch.add(what, is_new)
            model[what] = model.get(what, False) or is_new
        else:
            rows = np.arange(len(what)) if kind == "block" else None
            batch.extend(list(what), distinct=kind == "block", rows=rows)
            for tp in what:
                model.setdefault(tp, False)
    assert batch.tps() == tuple(model)
    assert batch.new() == frozenset(tp for tp, new in model.items() if new)
    assert len(batch) == len(model) and bool(batch) == bool(model)


def test_a_block_keeps_its_rows_until_something_else_is_added():
    batch = PartitionBatch()
    batch.extend(TPS[:3], distinct=True, rows=np.array([7, 8, 9]))
    assert batch.rows().tolist() == [7, 8, 9] and batch.tps() == tuple(TPS[:3])
    batch.add(TPS[1], is_new=True)  # already there: no new partition, the rows still hold
    assert batch.rows().tolist() == [7, 8, 9] and batch.new() == {TPS[1]}
    batch.add(TPS[5])
    assert batch.rows() is None and batch.tps() == tuple(TPS[:3]) + (TPS[5],)


def test_rows_that_do_not_fit_the_block_are_not_kept():
    batch = PartitionBatch()
    batch.extend(TPS[:3], distinct=True, rows=np.array([1, 2]))
    assert batch.rows() is None


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([0, 1_000, 70_000, 2 ** 40]), st.sampled_from([6, 40]),
       st.lists(st.lists(st.tuples(st.integers(0, 40), st.booleans()), max_size=5), max_size=40))
def test_by_broker_groups_rows_in_the_order_a_walk_meets_the_brokers(base, top, rows):
    """`by_broker` (the whole-cluster decisions' LeaderAndIsr batches) gives what a walk over
    the rows and each row's replicas gives: brokers in first-met order, each with its rows
    (twice where a row names a broker twice, as a tiled matrix does). Few brokers or many,
    ids close together or far apart (the log's keys): each of its three ways."""
    width = max([len(r) for r in rows] + [1])
    reps = np.full((len(rows), width), -1, np.int64)
    sent = np.zeros((len(rows), width), bool)
    walked: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        for j, (b, s) in enumerate(row):
            b = base + b * (top // 6) + (b if base == 2 ** 40 else 0) * 2 ** 20
            reps[i, j], sent[i, j] = b, s
            if s:
                walked.setdefault(b, []).append(i)
    assert [(b, r.tolist()) for b, r in by_broker(reps, sent)] == list(walked.items())
