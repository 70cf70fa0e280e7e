"""The columnar partition image holds what the partitions map holds, copies only the chunks a
change touches, and the image of a map derived through a chain of changes equals the image
built from scratch."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import columns
from controller_core.columns import CHUNK, PartitionImage, derive, image_of
from controller_core.machines import PartitionState, ReplicaState
from controller_core.pmap import pmap
from controller_core.state import PartitionInfo
from controller_core.values import LeaderIsr, ReplicaAssignment, TopicPartition

BROKERS = list(range(1, 8))


def expected_row(info: PartitionInfo):
    a = info.assignment
    li = info.leader_isr
    return (None if li is None else (li.leader, li.leader_epoch, li.isr, li.controller_epoch, li.zk_version),
            a.replicas, tuple(r for r in a.replicas if r in a.adding), tuple(r for r in a.replicas if r in a.removing),
            info.state, tuple((r, s) for r, s in info.replica_states if r in a.replicas))


@st.composite
def infos(draw):
    replicas = draw(st.lists(st.sampled_from(BROKERS), max_size=6, unique=True))
    adding = tuple(r for r in replicas if draw(st.booleans())) if draw(st.booleans()) else ()
    removing = tuple(r for r in replicas if r not in adding and draw(st.booleans())) if adding else ()
    li = None
    if draw(st.booleans()):
        isr = draw(st.lists(st.sampled_from(BROKERS), max_size=5, unique=True))
        li = LeaderIsr(draw(st.sampled_from(BROKERS + [-1])), draw(st.integers(0, 1000)), tuple(isr),
                       draw(st.integers(0, 50)), draw(st.integers(-1, 1000)))
    states = tuple((r, draw(st.sampled_from(list(ReplicaState)[1:]))) for r in replicas if draw(st.booleans()))
    return PartitionInfo(ReplicaAssignment(tuple(replicas), adding, removing), li,
                         draw(st.sampled_from(list(PartitionState))), states)


tps = st.builds(TopicPartition, st.sampled_from(["a", "b", "topic-c"]), st.integers(0, 40))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(tps, infos(), max_size=60))
def test_an_image_reads_back_every_partition_of_its_map(parts):
    image = PartitionImage.build(pmap(parts))
    for tp, info in parts.items():
        assert image.read(tp) == expected_row(info)
    assert image.read(TopicPartition("absent", 0)) is None


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(tps, infos(), max_size=40), st.lists(st.tuples(tps, st.none() | infos()), max_size=20))
def test_a_derived_image_equals_the_image_built_from_scratch(parts, changes):
    base = pmap(parts)
    image_of(base)
    m = base.mutate()
    for tp, info in changes:
        if info is None:
            m.pop(tp, None)
        else:
            m[tp] = info
    after = m.finish()
    derive(after, base, [tp for tp, _ in changes])
    derived = image_of(after)
    for tp in set(parts) | {tp for tp, _ in changes}:
        info = after.get(tp)
        assert derived.read(tp) == (None if info is None else expected_row(info))


def test_a_one_partition_change_copies_one_chunk_and_shares_the_others():
    parts = {TopicPartition("t", p): PartitionInfo(ReplicaAssignment((1, 2, 3)), LeaderIsr(1, 0, (1, 2, 3), 1, 0),
                                                    PartitionState.ONLINE) for p in range(3 * CHUNK)}
    base = pmap(parts)
    image = image_of(base)
    tp = TopicPartition("t", 5)
    after = base.set(tp, PartitionInfo(ReplicaAssignment((1, 2, 3)), LeaderIsr(2, 1, (2, 3), 1, 1),
                                       PartitionState.ONLINE))
    derive(after, base, [tp])
    changed = image_of(after)
    assert changed.read(tp)[0] == (2, 1, (2, 3), 1, 1)
    assert image.read(tp)[0] == (1, 0, (1, 2, 3), 1, 0), "the earlier image did not change"
    row = changed.row(tp)
    shared = [changed.chunks[c] is image.chunks[c] for c in range(len(image.chunks))]
    assert shared.count(False) == 1 and not shared[row // CHUNK]


def test_a_partition_wider_than_the_image_widens_it():
    base = pmap({TopicPartition("t", 0): PartitionInfo(ReplicaAssignment((1, 2)), None, PartitionState.NEW)})
    image_of(base)
    wide = PartitionInfo(ReplicaAssignment((1, 2, 3, 4, 5, 6, 7), (5, 6, 7), (1, 2)),
                         LeaderIsr(3, 2, (3, 4, 1, 2, 5, 6, 7), 1, 4), PartitionState.ONLINE)
    tp = TopicPartition("u", 0)
    after = base.set(tp, wide)
    derive(after, base, [tp])
    image = image_of(after)
    assert image.width == 7
    assert image.read(tp) == expected_row(wide)
    assert image.read(TopicPartition("t", 0)) == expected_row(base[TopicPartition("t", 0)])


def test_the_memo_forgets_old_maps():
    for k in range(3 * columns._MEMO_SIZE):
        image_of(pmap({TopicPartition("t", k): PartitionInfo(ReplicaAssignment((1,)), None, PartitionState.NEW)}))
    assert len(columns._memo) <= columns._MEMO_SIZE
