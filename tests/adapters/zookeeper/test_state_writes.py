"""The partition-state hot path's bulk codecs, held to the general ones (no server needed):
`ZkSession._state_chunks` builds the same multi-op bytes as `_multi_request` over Op values,
`_full_paths` accepts and refuses what `_abs` does, and `_parse_state_writes` reads the same
versions as `_parse_multi` (or hands the reply to it). The same path against a real ZooKeeper:
tests/adapters/zookeeper/test_session.py and tests/adapters/controller/test_zkwriter.py."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from adapters.zookeeper import wire as W
from adapters.zookeeper.session import CONTROLLER_EPOCH_PATH, Check, Create, SetData, ZkSession
from adapters.zookeeper.values import ACL_OPEN
from adapters.zookeeper.wire import _acl_vector


def _session(chroot: str) -> ZkSession:
    """A ZkSession with no connection: only its encoding is used."""
    zk = ZkSession.__new__(ZkSession)
    zk._chroot = chroot
    zk._acl_bytes = _acl_vector(ACL_OPEN)
    return zk


segments = st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=8)
good_paths = st.lists(segments, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))
data = st.one_of(st.binary(max_size=300), st.none())
writes = st.lists(st.tuples(good_paths, data, st.integers(-1, 2**31 - 1)), max_size=30,
                  unique_by=lambda w: w[0])


@given(writes, st.sampled_from(["", "/chroot", "/a/b"]), st.one_of(st.none(), st.integers(0, 2**31 - 1)),
       st.integers(1, 7), st.integers(1, 2000))
def test_state_chunks_are_the_general_multi_encoding(items, chroot, epoch_version, chunk_ops, max_bytes):
    zk = _session(chroot)
    paths = [p for p, _, _ in items]
    values = [d for _, d, _ in items]
    expected = [e for _, _, e in items]
    store = [None] * len(items)
    got = list(zk._state_chunks(epoch_version, paths, store, expected, range(len(items)), values,
                                lambda vs: list(vs), chunk_ops, max_bytes))
    assert store == values  # encoded into the data column
    assert [i for members, _ in got for i in members] == list(range(len(items)))  # each write once, in order
    for members, body in got:
        assert 1 <= len(members) <= chunk_ops
        ops = [Create(paths[i], values[i]) if expected[i] == -1 else SetData(paths[i], values[i], expected[i])
               for i in members]
        if epoch_version is not None:
            ops.insert(0, Check(CONTROLLER_EPOCH_PATH, epoch_version))
        assert body == zk._multi_request(ops).body
    # the operations of a chunk go over the byte limit only when one operation alone does
    framing = len(zk._multi_request([] if epoch_version is None else [Check(CONTROLLER_EPOCH_PATH, 0)]).body)
    for members, body in got:
        if len(members) > 1:
            assert len(body) - framing <= max_bytes


def test_state_chunks_of_a_retry_round_take_any_indices():
    zk = _session("/c")
    paths = [f"/s/{i}" for i in range(10)]
    data = [b"%d" % i for i in range(10)]
    got = list(zk._state_chunks(3, paths, data, [1] * 10, [7, 2, 5], data, None, 2, 1 << 20))
    assert [members for members, _ in got] == [[7, 2], [5]]
    assert got[0][1] == zk._multi_request([Check(CONTROLLER_EPOCH_PATH, 3), SetData("/s/7", b"7", 1),
                                           SetData("/s/2", b"2", 1)]).body


paths_any = st.lists(st.text(st.sampled_from("/a\n.\x00b"), max_size=6), max_size=8)


@given(paths_any, st.sampled_from(["", "/chroot"]))
def test_full_paths_accept_and_refuse_what_abs_does(paths, chroot):
    zk = _session(chroot)
    try:
        expected = [zk._abs(p).encode() for p in paths]
    except ValueError:
        with pytest.raises(ValueError):
            zk._full_paths(paths)
    else:
        assert zk._full_paths(paths) == expected


def test_full_paths_are_not_fooled_by_a_newline_inside_a_path():
    # "/a\n/b" would count as two paths that start with "/", hiding "x", which does not
    zk = _session("/chroot")
    with pytest.raises(ValueError):
        zk._full_paths(["/a\n/b", "x"])


# -- replies ------------------------------------------------------------------------------------

stats = st.tuples(*(st.integers(-(2**63), 2**63 - 1) for _ in range(4)), *(st.integers(-(2**31), 2**31 - 1) for _ in range(3)),
                  st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1),
                  st.integers(-(2**63), 2**63 - 1))


def _result(kind: str, stat=None, code: int = 0) -> bytes:
    if kind == "check":
        return W._MULTI_HEADER.pack(W._CHECK, False, 0)
    if kind == "set":
        return W._MULTI_HEADER.pack(W._SET_DATA, False, 0) + W._STAT.pack(*stat)
    if kind == "create":
        return W._MULTI_HEADER.pack(W._CREATE2, False, 0) + W._ustr("/p") + W._STAT.pack(*stat)
    return W._MULTI_HEADER.pack(-1, False, -1) + W._INT.pack(code)


@given(st.booleans(), st.lists(stats, min_size=1, max_size=20), st.binary(max_size=100), st.binary(max_size=100))
def test_state_reply_reads_the_versions_the_general_parser_reads(checked, set_stats, before, after):
    body = (_result("check") if checked else b"") + b"".join(_result("set", s) for s in set_stats)
    body += W._MULTI_HEADER.pack(-1, True, -1)
    buf = bytearray(before + body + after)  # other frames around it in the read buffer
    parsed = W._parse_state_writes(buf, len(before))
    general = W._parse_multi(buf, len(before))
    assert type(parsed) is W._StateVersions
    assert parsed.versions == [stat.version for stat in general[1 if checked else 0:]]


@given(st.lists(st.one_of(st.tuples(st.just("set"), stats), st.tuples(st.just("create"), stats),
                          st.tuples(st.just("error"), st.sampled_from([0, -2, -101, -103, -110]))),
                min_size=1, max_size=10),
       st.binary(max_size=50))
def test_any_other_reply_is_read_by_the_general_parser(results, after):
    body = b"".join(_result(kind, value) if kind != "error" else _result(kind, code=value) for kind, value in results)
    body += W._MULTI_HEADER.pack(-1, True, -1)
    buf = bytearray(body + after)
    parsed = W._parse_state_writes(buf, 0)
    if all(kind == "set" for kind, _ in results):
        assert parsed.versions == [stat[4] for _, stat in results]
    else:
        assert parsed == W._parse_multi(buf, 0)


def test_the_version_is_read_from_its_place_in_the_stat():
    stat = (1, 2, 3, 4, 77, 5, 6, 7, 8, 9, 10)  # czxid, mzxid, ctime, mtime, version, ...
    body = _result("check") + _result("set", stat) + W._MULTI_HEADER.pack(-1, True, -1)
    assert W._parse_state_writes(body, 0).versions == [77]
