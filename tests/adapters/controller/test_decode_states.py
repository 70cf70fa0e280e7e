"""A new controller's read of every state znode parses each distinct content once: the result is
the per-znode reader's, version for version, with missing and unreadable znodes as before; and
the snapshot's columns (`_decode_state_columns`) are the readable ones among those pairs."""
from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.controller.watches import _decode_state_columns, _decode_states
from controller_core.snapshot_states import SnapshotStates
from adapters.znodes import codec as zkdata
from controller_core.values import LeaderIsr, TopicPartition

_POOL = [zkdata.encode_partition_state(LeaderIsr(1, 3, (1, 2), 4, 0)),
         zkdata.encode_partition_state(LeaderIsr(2, 0, (2,), 1, 0)),
         b'{"controller_epoch":4,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2]}',  # Kafka's key order: the strict reader
         b'{"version":1,"leader":1,',  # damaged
         b'{"version":1,"leader":"x","leader_epoch":0,"controller_epoch":1,"isr":[]}']  # a wrong type


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.tuples(st.sampled_from(range(len(_POOL))), st.integers(0, 5))), max_size=40))
def test_each_state_is_what_the_per_znode_reader_gives(znodes):
    tps = [TopicPartition("t", p) for p in range(len(znodes))]
    paths = [f"/p/{p}" for p in range(len(znodes))]
    values = {path: (_POOL[k], SimpleNamespace(version=v)) for path, z in zip(paths, znodes) if z is not None
              for k, v in (z,)}
    missing: list = []
    out = _decode_states(tps, paths, values, missing)
    expected = []
    for tp, z in zip(tps, znodes):
        if z is None:
            expected.append((tp, None))
            continue
        try:
            expected.append((tp, zkdata.decode_partition_state(_POOL[z[0]], z[1], tp=tp)))
        except zkdata.ZnodeFormatError:
            expected.append((tp, None))
    assert out == tuple(expected)
    assert [type(li) for _, li in out] == [type(li) for _, li in expected]
    assert missing == [tp for tp, z in zip(tps, znodes) if z is None]
    columns_missing: list = []
    columns = _decode_state_columns(tps, paths, values, columns_missing)
    assert type(columns) is SnapshotStates and columns == tuple((tp, li) for tp, li in expected if li is not None)
    assert columns_missing == missing
    assert len(columns.contents) <= len({k for z in znodes if z is not None for k in z[:1]})  # each content once
