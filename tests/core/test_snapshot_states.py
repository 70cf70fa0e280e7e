"""A snapshot's partition states as columns (`SnapshotStates`, what the election adapter reads)
are, to everything but the columnar load, the tuple of the same `(TopicPartition, LeaderIsr)`
pairs: they iterate, index, compare, hash, pickle and encode in the journal as that tuple."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import codec
from controller_core import events as E
from controller_core.snapshot_states import SnapshotStates
from controller_core.values import LeaderIsr, TopicPartition

from .builders import AT, broker

_small = st.integers(0, 3)


@st.composite
def state_pairs(draw):
    """Pairs with many equal contents (as after an election) and versions of their own."""
    n = draw(st.integers(0, 30))
    shared = draw(st.lists(st.tuples(st.integers(-1, 4), _small, st.lists(st.integers(1, 4), max_size=3, unique=True),
                                     _small), min_size=1, max_size=4))
    pairs = []
    for p in range(n):
        leader, epoch, isr, controller_epoch = draw(st.sampled_from(shared))
        pairs.append((TopicPartition(draw(st.sampled_from("ab")), p),
                      LeaderIsr(leader, epoch, tuple(isr), controller_epoch, draw(st.integers(0, 5)))))
    return tuple(pairs)


@settings(max_examples=200, deadline=None)
@given(state_pairs())
def test_the_columns_are_the_tuple_of_their_pairs(pairs):
    states = SnapshotStates.of(pairs)
    assert tuple(states) == pairs and list(states) == list(pairs)
    assert states == pairs and pairs == states and not (states != pairs)
    assert len(states) == len(pairs) and hash(states) == hash(pairs)
    assert [states[i] for i in range(len(pairs))] == list(pairs) and states[1:3] == pairs[1:3]
    assert all(type(li) is LeaderIsr for _, li in states)
    assert len(states.contents) == len({li[:4] for _, li in pairs})  # each distinct content once
    assert pickle.loads(pickle.dumps(states)) == pairs
    columns = E.ClusterSnapshot(brokers=(broker(1),), partition_states=states)
    plain = E.ClusterSnapshot(brokers=(broker(1),), partition_states=pairs)
    assert columns == plain and columns.partition_states is states
    elected = [E.ControllerElected(at=AT, epoch=2, epoch_zk_version=1, snapshot=s) for s in (columns, plain)]
    encoded = [codec.canonical_json(codec.encode_event(e)) for e in elected]
    assert encoded[0] == encoded[1]  # the journal holds the same record either way
    assert codec.decode_event(codec.encode_event(elected[0])) == elected[1]


def test_the_columns_are_immutable():
    states = SnapshotStates.of([(TopicPartition("a", 0), LeaderIsr(1, 0, (1, 2), 1, 3))])
    with pytest.raises(AttributeError):
        states.tps = ()
    with pytest.raises(ValueError):
        states.versions[0] = 4
    with pytest.raises(ValueError):
        states.content_of[0] = 1


def test_bad_columns_are_refused_when_made():
    tp = TopicPartition("a", 0)
    with pytest.raises(TypeError, match="a-0"):
        SnapshotStates.of([(tp, LeaderIsr(True, 0, (1,), 1, 0))])  # a bool would merge with the int 1
    with pytest.raises(TypeError, match="a-0"):
        SnapshotStates.of([(tp, LeaderIsr(1, 0, (1,), 1, "3"))])
    with pytest.raises(ValueError, match="content index"):
        SnapshotStates((tp,), (LeaderIsr(1, 0, (1,), 1, 0),), np.array([1]), np.array([0]))
    with pytest.raises(ValueError, match="1 partitions, 2 content indexes"):
        SnapshotStates((tp,), (LeaderIsr(1, 0, (1,), 1, 0),), np.array([0, 0]), np.array([0]))


def test_the_journal_encodes_columns_whose_contents_hold_an_odd_version_as_it_encodes_their_pairs():
    """The columns are encoded from the columns (`SnapshotStates.encoded`); a content whose own
    version is not an int (only hand-made values) still encodes as iterating gives it: the
    content's version where it equals the partition's, else the partition's."""
    tps = (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0))
    states = SnapshotStates(tps, (LeaderIsr(1, 0, (1, 2), 1, True), LeaderIsr(2, 3, (), 1, 0)), [0, 0, 1], [1, 4, 0])
    assert [li[4] for _, li in states] == [True, 4, 0] and type(list(states)[0][1][4]) is bool
    elected = [E.ControllerElected(at=AT, epoch=2, epoch_zk_version=1,
                                   snapshot=E.ClusterSnapshot(brokers=(broker(1),), partition_states=s))
               for s in (states, tuple(states))]
    assert codec.canonical_json(codec.encode_event(elected[0])) == codec.canonical_json(codec.encode_event(elected[1]))
    assert codec.encode_event(elected[0])["snapshot"]["partition_states"][0] == [["a", 0], [1, 0, [1, 2], 1, True]]
