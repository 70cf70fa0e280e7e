"""A new controller's image built as columns from its snapshot (`columnar_load.load`) is the
image of the per-partition build (`failover._build`, the specification), and `step()` on
ControllerElected gives the same state and commands (and digests) either way, on random
snapshots: rejected topics, partitions without a state, states of unknown partitions, dead
leaders and replicas, reassignments in flight (some in an order the columns cannot hold),
topics to delete, states listed in or out of order. The last tests break the columnar build on
purpose and check that the comparison notices."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import codec, columnar_load, failover
from controller_core import events as E
from controller_core.columns import PartitionImage
from controller_core.snapshot_states import SnapshotStates
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr, ReplicaAssignment, TopicPartition

from .builders import AT, assert_same, broker, settle

BROKERS = (1, 2, 3, 4, 5, 6)


@st.composite
def assignments(draw, valid: bool):
    """A topic's ((partition, ReplicaAssignment), ...); `valid=False` may break it as an admin's
    hand-edit would (validate_assignment rejects it), or not."""
    n = draw(st.integers(1, 6))
    parts = []
    for p in range(n):
        replicas = tuple(draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True)))
        adding = removing = ()
        if len(replicas) > 1 and draw(st.integers(0, 4)) == 0:  # a reassignment in flight
            adding = tuple(draw(st.lists(st.sampled_from(replicas), max_size=len(replicas) - 1, unique=True)))
            rest = [r for r in replicas if r not in adding]
            removing = tuple(draw(st.lists(st.sampled_from(rest), max_size=len(rest), unique=True)))
            if draw(st.booleans()):  # the columns list them in assignment order: an odd partition if not
                adding = tuple(r for r in replicas if r in adding)
                removing = tuple(r for r in replicas if r in removing)
        if parts and draw(st.integers(0, 2)) == 0:  # the very value of an earlier partition, as
            parts.append((p, parts[draw(st.integers(0, len(parts) - 1))][1]))  # shared_assignment shares them
            continue
        parts.append((p, ReplicaAssignment(replicas, adding, removing)))
    if not valid:
        how = draw(st.sampled_from(["empty", "duplicate", "negative", "gap", "none", "order", "fine", "dup-id"]))
        k = draw(st.integers(0, n - 1))
        p, ra = parts[k]
        if how == "empty":
            parts[k] = (p, ReplicaAssignment(()))
        elif how == "duplicate":
            parts[k] = (p, ReplicaAssignment(ra.replicas + ra.replicas[:1]))
        elif how == "negative":
            parts[k] = (p, ReplicaAssignment(ra.replicas + (-3,)))
        elif how == "gap":
            parts[k] = (p + n, ra)
        elif how == "none":
            parts = []
        elif how == "order":  # valid, but listed out of order: the columns decline, the walk decides
            parts = parts[::-1]
        elif how == "dup-id":  # a partition listed twice (the walk keeps the last)
            parts.append((p, ReplicaAssignment(tuple(reversed(ra.replicas)))))
    return tuple(parts)


@st.composite
def snapshots(draw):
    alive = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=len(BROKERS), unique=True))
    n_topics = draw(st.integers(0, 4))
    names = draw(st.permutations([f"t{i}" for i in range(n_topics)]))  # listed in any order
    topics, states = [], []
    for name in names:
        parts = draw(assignments(valid=draw(st.integers(0, 4)) != 0))
        earlier = [ra for _, ps in topics for _, ra in ps]
        if earlier and draw(st.integers(0, 3)) == 0:  # another topic's very values (rejected or not)
            parts = tuple((p, earlier[draw(st.integers(0, len(earlier) - 1))]) for p, _ in parts)
        topics.append((name, parts))
        for p, ra in parts:
            if not ra.replicas or draw(st.integers(0, 7)) == 0:
                continue  # no state znode: a New partition
            isr = tuple(draw(st.lists(st.sampled_from(ra.replicas + (draw(st.sampled_from(BROKERS)),)),
                                      max_size=4, unique=True)))
            leader = draw(st.sampled_from(isr + (-1,) if isr else (-1,)))
            states.append((TopicPartition(name, p), LeaderIsr(leader, draw(st.integers(0, 5)), isr,
                                                              draw(st.integers(0, 3)), draw(st.integers(0, 9)))))
    if draw(st.integers(0, 5)) == 0:
        states.append((TopicPartition("gone", 0), LeaderIsr(1, 0, (1,), 1, 0)))  # a state without a topic
    order = draw(st.sampled_from(["sorted", "listed", "shuffled"]))
    if order == "sorted":
        states.sort()
    elif order == "shuffled":
        random.Random(draw(st.integers(0, 99))).shuffle(states)
    to_delete = frozenset(draw(st.lists(st.sampled_from([n for n, _ in topics] + ["nope"]), max_size=2)))
    snap = E.ClusterSnapshot(
        brokers=tuple(broker(b) for b in sorted(alive)),
        topics=tuple(topics),
        # as pairs, or as the election adapter reads them: columns, each distinct content once
        partition_states=SnapshotStates.of(states) if draw(st.booleans()) else tuple(states),
        topics_to_delete=to_delete,
        malformed_topics=(("bad", "not json"),) if draw(st.integers(0, 5)) == 0 else (),
    )
    return snap, draw(st.integers(2, 4))


def _live(snap) -> frozenset[int]:
    return frozenset(b.broker_id for b in snap.brokers)


def _same_image(fast: PartitionImage, spec: dict) -> None:
    image = PartitionImage.build(spec)
    assert dict(fast.items()) == dict(image.items())
    assert list(fast) == list(image)  # rows in the same (partition) order
    assert fast.width == image.width and fast.size == image.size and fast.count == image.count
    assert not fast.odd and fast.in_order and image.in_order
    for name in ("present", "has_state", "leader", "leader_epoch", "controller_epoch", "zk_version", "replicas",
                 "isr", "adding", "removing", "moving", "pstate", "rstate"):
        assert (fast.column(name) == image.column(name)).all(), name
    assert codec.encode_state(_state(fast)) == codec.encode_state(_state(image))


def _state(image):
    return initial_state(ControllerConfig(broker_id=1)).__class__(config=ControllerConfig(broker_id=1), partitions=image)


def both_ways(snap, epoch):
    config = ControllerConfig(broker_id=min(b.broker_id for b in snap.brokers), auto_leader_rebalance_enable=False)
    event = E.ControllerElected(at=AT, epoch=epoch, epoch_zk_version=epoch - 1, snapshot=snap)
    fast = step(initial_state(config), event)
    columnar_load.ENABLED = False
    try:
        slow = step(initial_state(config), event)
    finally:
        columnar_load.ENABLED = True
    return fast, slow


def _plain(snap) -> bool:
    """Whether the columns must take this snapshot (nothing the module docstring lets them decline)."""
    names = [t for t, _ in snap.topics]
    for _, parts in snap.topics:
        ids = [p for p, _ in parts]
        if ids != list(range(len(ids))) and failover.validate_assignment(dict(parts), same_factor=False) is None:
            return False  # valid, listed out of order
        for _, ra in parts:
            if ra.adding != tuple(r for r in ra.replicas if r in ra.adding) or \
                    ra.removing != tuple(r for r in ra.replicas if r in ra.removing):
                return False
    return len(set(names)) == len(names)


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_the_columns_load_the_image_the_per_partition_build_makes(case):
    snap, _ = case
    live = _live(snap)
    loaded = columnar_load.load(snap.topics, snap.partition_states, live)
    topics, built, rejected = failover._build(snap, live)
    if _plain(snap):
        assert loaded is not None
    if loaded is None:
        return
    assert loaded.topics == topics and list(loaded.topics) == list(topics)
    assert loaded.rejected == rejected
    _same_image(loaded.image, built)


@settings(max_examples=200, deadline=None)
@given(snapshots())
def test_controller_elected_decides_the_same_with_and_without_the_columnar_load(case):
    assert_same(*both_ways(*case))


@pytest.mark.parametrize("form", ["pairs", "columns"])
def test_a_large_healthy_snapshot_is_loaded_as_columns_and_decided_the_same(form):
    """Several chunks, states listed in order (the election adapter's order): the fast lookup,
    and with the reader's columns no state read one by one."""
    names = [f"topic-{t:03d}" for t in range(30)]
    topics, states = [], []
    for t, name in enumerate(names):
        parts = []
        for p in range(100):
            replicas = tuple(1 + (t + p + k) % 5 for k in range(3))
            parts.append((p, ReplicaAssignment(replicas)))
            states.append((TopicPartition(name, p), LeaderIsr(replicas[(p % 7 == 0) * 1], 3, replicas, 1, 4 + p % 3)))
        topics.append((name, tuple(parts)))
    partition_states = SnapshotStates.of(states) if form == "columns" else tuple(states)
    snap = E.ClusterSnapshot(brokers=tuple(broker(b) for b in (1, 2, 4, 5)), topics=tuple(reversed(topics)),
                             partition_states=partition_states)
    assert columnar_load._states_in_order(sorted(snap.topics), snap.partition_states, 3000)[0] is not None
    if form == "columns":
        assert len(partition_states.contents) < 100
        assert columnar_load._state_columns(sorted(snap.topics), partition_states, 3000) is not None
    loaded = columnar_load.load(snap.topics, snap.partition_states, _live(snap))
    assert loaded is not None and len(loaded.image.chunks) == 3
    _same_image(loaded.image, failover._build(snap, _live(snap))[1])
    assert_same(*both_ways(snap, 2))


# -- the comparison has teeth: a broken columnar build is noticed ----------------------------------

_EXAMPLE = E.ClusterSnapshot(
    brokers=(broker(1), broker(2)),
    topics=(("c", ((0, ReplicaAssignment((1, 2))),)),
            ("b", ((0, ReplicaAssignment((1, 3))), (1, ReplicaAssignment((2, 1), (2,), ())))),
            ("a", ((0, ReplicaAssignment((3, 2))), (1, ReplicaAssignment((1, 1)))))),
    partition_states=((TopicPartition("b", 0), LeaderIsr(3, 1, (3, 1), 1, 2)),
                      (TopicPartition("a", 0), LeaderIsr(2, 0, (2,), 1, 0))),
)


@pytest.mark.parametrize("breakage", ["replica-states", "partition-states", "keep-rejected", "row-order", "isr"])
def test_a_broken_columnar_load_is_noticed(monkeypatch, breakage):
    """Each breakage makes a different image; all but the row order (a layout, which no decision
    reads: they sort) also change the decision."""
    live = _live(_EXAMPLE)
    if breakage == "replica-states":  # dead replicas read Online
        monkeypatch.setattr(columnar_load, "_R_INELIGIBLE", columnar_load._R_ONLINE)
    elif breakage == "partition-states":  # a dead leader's partition reads Online
        monkeypatch.setattr(columnar_load, "_OFFLINE", columnar_load._ONLINE)
    elif breakage == "keep-rejected":  # the spec's verdict ignored
        monkeypatch.setattr(columnar_load, "validate_assignment", lambda *a, **k: "no")
    elif breakage == "row-order":  # rows as listed, not in partition order
        monkeypatch.setattr(columnar_load, "sorted", lambda xs, key=None: list(xs), raising=False)
    elif breakage == "isr":  # the ISR matrix's rows off by one
        real = columnar_load._packed
        calls = []

        def packed(flat, lens, width):
            calls.append(width)
            m = real(flat, lens, width)
            return np.roll(m, 1, axis=0) if len(calls) % 2 == 0 else m  # (replicas, then the ISR)

        monkeypatch.setattr(columnar_load, "_packed", packed)
    loaded = columnar_load.load(_EXAMPLE.topics, _EXAMPLE.partition_states, live)
    topics, built, rejected = failover._build(_EXAMPLE, live)
    with pytest.raises(AssertionError):
        assert loaded is not None
        assert loaded.topics == topics and loaded.rejected == rejected
        _same_image(loaded.image, built)
    if breakage != "row-order":
        with pytest.raises(AssertionError):
            assert_same(*both_ways(_EXAMPLE, 2))


# -- what follows the load: the image's row index and the requests' rows ----------------------------

@settings(max_examples=60, deadline=None)
@given(snapshots(), st.data())
def test_the_life_after_a_columnar_load_is_the_life_after_the_walk(case, data):
    """The writes land, a topic is created, a broker dies: the same decisions either way (the
    loaded image's row index takes new partitions beside the rows it was built with)."""
    snap, epoch = case
    fast, slow = both_ways(snap, epoch)
    assert_same(fast, slow)
    dies = data.draw(st.sampled_from(BROKERS), label="dies")
    states = []
    for (state, commands) in (fast, slow):
        state, _ = settle(state, commands)
        names = frozenset(t for t, _ in snap.topics) | {"new"}
        created = E.TopicsChanged(at=AT, topics=names, assignments=(("new", ((0, ReplicaAssignment((1, 2))),
                                                                             (1, ReplicaAssignment((2, 3))))),))
        state, c1 = settle(*step(state, created))
        alive = tuple(b for b in snap.brokers if b.broker_id != dies)
        state, c2 = settle(*step(state, E.BrokersChanged(at=AT, brokers=alive)))
        states.append((state, c1, c2))
    (fs, f1, f2), (ss, s1, s2) = states
    assert f1 == s1 and f2 == s2
    assert codec.digest(list(f1) + list(f2)) == codec.digest(list(s1) + list(s2))
    assert fs == ss and codec.encode_state(fs) == codec.encode_state(ss)


def test_a_loaded_images_row_index_grows_without_touching_the_images_before():
    snap = E.ClusterSnapshot(brokers=(broker(1), broker(2)), topics=(("a", ((0, ReplicaAssignment((1, 2))),)),),
                             partition_states=((TopicPartition("a", 0), LeaderIsr(1, 0, (1, 2), 1, 0)),))
    image = columnar_load.load(snap.topics, snap.partition_states, _live(snap)).image
    info = image[TopicPartition("a", 0)]
    grown = image.set(TopicPartition("b", 0), info)
    assert TopicPartition("b", 0) not in image and image.index.get(TopicPartition("b", 0)) is None
    assert grown[TopicPartition("b", 0)] == info and grown.index[TopicPartition("b", 0)] == 1
    assert dict(grown.index) == {TopicPartition("a", 0): 0, TopicPartition("b", 0): 1}
    assert grown.index.base is image.index.base  # the dict is shared, never written
    assert image.in_order and not grown.in_order  # (a row appended: whole-cluster decisions sort)
    again = grown.set(TopicPartition("a", 0), info._replace(leader_isr=info.leader_isr.with_version(5)))
    assert again.index.get(TopicPartition("a", 0)) == 0 and len(again.index) == 2
    assert again == PartitionImage.build({TopicPartition("a", 0): again[TopicPartition("a", 0)],
                                          TopicPartition("b", 0): info})


@settings(max_examples=40, deadline=None)
@given(st.integers(1100, 3000), st.integers(0, 2**32))
def test_a_large_request_s_rows_are_the_index_s_and_kept_only_for_that_index(n, seed):
    from controller_core import partition_views
    from controller_core.partition_views import ImageRows

    rng = random.Random(seed)
    topics = tuple((f"t{t}", tuple((p, ReplicaAssignment((1, 2))) for p in range(100))) for t in range(n // 100 + 1))
    image = columnar_load.load(topics, (), frozenset((1, 2))).image
    keys = image.keys()
    tps = []
    for k in rng.choices(range(len(keys)), k=rng.randint(1100, len(keys))):
        how = rng.randrange(10)
        if how == 0:
            tps.append(TopicPartition(keys[k].topic, keys[k].partition))  # equal, another object
        elif how == 1:
            tps.append(TopicPartition("unknown", k))
        else:
            tps.append(keys[k])
    tps = tuple(tps)
    expected = [image.index.get(tp, -1) for tp in tps]
    assert ImageRows(image).rows_of(tps).tolist() == expected
    # kept for the next release over the same index ...
    kept = partition_views._recalled_rows(tps, image.index)
    assert kept is not None and kept.tolist() == expected and not kept.flags.writeable
    assert ImageRows(image).rows_of(tps) is kept
    # ... not for an equal tuple (another object), nor for an image that gained a partition
    # (another index: found again there, and kept for that index)
    assert partition_views._recalled_rows(tuple(list(tps)), image.index) is None
    grown = image.set(TopicPartition("zz-new", 0), image[keys[0]])
    assert grown.index is not image.index
    assert partition_views._recalled_rows(tps, grown.index) is None
    assert ImageRows(grown).rows_of(tps).tolist() == expected
    assert partition_views._recalled_rows(tps, grown.index) is not None
    # a hint is used as given when its length fits, else ignored
    hinted = ImageRows(image, {id(tps): np.arange(len(tps))})
    assert hinted.rows_of(tps).tolist() == list(range(len(tps)))
    stale = ImageRows(image, {id(tps): np.arange(len(tps) - 1)})
    assert stale.rows_of(tps).tolist() == expected


def test_a_whole_cluster_release_without_hints_sends_the_same_requests(monkeypatch):
    """The rows a failover's batch notes (Draft.row_hints) only spare lookups: without them the
    requests are the same."""
    from controller_core.request_batch import RequestBatch

    names = [f"t{t:02d}" for t in range(20)]
    topics = tuple((name, tuple((p, ReplicaAssignment(tuple(1 + (t + p + k) % 4 for k in range(3))))
                                for p in range(80))) for t, name in enumerate(names))
    snap = E.ClusterSnapshot(brokers=tuple(broker(b) for b in (1, 2, 3, 4)), topics=topics,
                             partition_states=tuple((TopicPartition(name, p), LeaderIsr(ra.replicas[0], 0, ra.replicas, 1, 0))
                                                    for name, parts in topics for p, ra in parts))
    config = ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False)
    event = E.ControllerElected(at=AT, epoch=2, epoch_zk_version=1, snapshot=snap)
    hinted = step(initial_state(config), event)
    used = []
    real = RequestBatch.noted_rows
    monkeypatch.setattr(RequestBatch, "noted_rows", lambda self, outbox: used.append(real(self, outbox)) or [])
    plain = step(initial_state(config), event)
    assert used and len(used[0]) == 5  # four LeaderAndIsr and the UpdateMetadata had their rows
    assert_same(hinted, plain)
