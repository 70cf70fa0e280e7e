"""The digest writes a large request's partitions and a large write command's writes from their
columns (digest._views_text, digest._writes_text), never making the `PartitionView`s or the
`PartitionWrite`s: the text must be the codec's, byte for byte, on any columns (topic names that
JSON escapes, empty and full ISRs, leaders -1 and -2, numbers past the digit table,
reassignments in flight, partitions sent as new, creates), with either JSON writer."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_core import codec
from controller_core import commands as C
from controller_core import digest as D
from controller_core.partition_views import Gathering, PartitionViews
from controller_core.partition_writes import PartitionWrites
from controller_core.values import BrokerInfo, LeaderIsr, TopicPartition

from adapters.journal.canonical import canonical as orjson_canonical

ENCODE = codec._field_encoder(C.SendUpdateMetadata, "partitions")
WRITERS = (codec.canonical_json, orjson_canonical)
INT32 = st.one_of(st.integers(0, 9), st.integers(9_990, 10_010), st.integers(-2, 2**31 - 1))


@st.composite
def columns(draw, min_rows=0, max_rows=30):
    n = draw(st.integers(min_rows, max_rows))
    width = draw(st.integers(0, 4))
    names = draw(st.lists(st.text(max_size=4), min_size=1, max_size=3))
    tps = tuple(TopicPartition(draw(st.sampled_from(names)), draw(INT32.filter(lambda v: v >= 0))) for _ in range(n))
    replicas = np.full((n, width), -1, np.int32)
    isr = np.full((n, width), -1, np.int32)
    adding = np.zeros((n, width), bool)
    removing = np.zeros((n, width), bool)
    for i in range(n):
        ids = draw(st.lists(st.integers(0, 2**31 - 2), max_size=width, unique=True))
        replicas[i, :len(ids)] = ids
        members = [r for r in ids if draw(st.booleans())]
        isr[i, :len(members)] = members
        for j in range(len(ids)):
            adding[i, j] = draw(st.booleans()) and draw(st.booleans())
            removing[i, j] = not adding[i, j] and draw(st.booleans()) and draw(st.booleans())

    def ints():
        return np.array([draw(INT32) for _ in range(n)], np.int32)

    moving = draw(st.booleans())
    is_new = np.array([draw(st.booleans()) for _ in range(n)], bool) if draw(st.booleans()) else None
    return PartitionViews(tps, ints(), ints(), isr, ints(), ints(), replicas,
                          adding if moving else None, removing if moving else None, is_new)


@settings(max_examples=150, deadline=None)
@given(columns())
def test_the_text_written_from_the_columns_is_the_codecs(views):
    for canonical in WRITERS:
        assert D._views_text(views, canonical) == canonical(ENCODE(views))


@settings(max_examples=10, deadline=None)
@given(columns(max_rows=6), st.integers(600, 1500))
def test_a_large_requests_digest_written_from_its_columns_is_the_reference(few, rows):
    """Past the size where the digest writes from the columns: a request of `rows` partitions,
    the drawn rows repeated, shared by two brokers' UpdateMetadata and beside other commands."""
    if not len(few):
        return
    take = np.arange(rows) % len(few)

    def pick(a):
        return None if a is None else a[take]

    big = PartitionViews(tuple(few.tps[k] for k in take.tolist()), few.leader[take], few.leader_epoch[take],
                         few.isr[take], few.controller_epoch[take], few.zk_version[take], few.replicas[take],
                         pick(few.adding), pick(few.removing), pick(few.is_new))
    brokers = (BrokerInfo(1, "a", 1, 1), BrokerInfo(2, "b", 1, 1))
    requests = [C.SendUpdateMetadata(broker_id=b, broker_epoch=1, controller_epoch=1, partitions=big,
                                     live_brokers=brokers) for b in (1, 2)]
    timer = C.ScheduleTimer(name="rebalance", delay_ms=1)
    reference = codec.reference_digest(requests)  # (makes the views of `big`, not of `fresh` below)
    reference_other = codec.reference_digest(requests + [timer])
    for canonical in WRITERS:
        digester = codec.digester(canonical)
        assert digester.views_from_columns
        fresh = PartitionViews(big.tps, big.leader, big.leader_epoch, big.isr, big.controller_epoch,
                               big.zk_version, big.replicas, big.adding, big.removing, big.is_new)
        commands = [C.SendUpdateMetadata(broker_id=b, broker_epoch=1, controller_epoch=1, partitions=fresh,
                                         live_brokers=brokers) for b in (1, 2)]
        assert digester.digest(commands) == reference
        assert fresh._views is None  # written from the columns, the views never made
        assert digester.digest(commands + [timer]) == reference_other  # (the generic path)
        assert fresh._views is None


@settings(max_examples=10, deadline=None)
@given(columns(min_rows=1, max_rows=6), st.integers(1_100, 1_600), st.data())
def test_a_releases_requests_share_their_rows_texts_and_keep_the_reference_digest(few, size, data):
    """The requests of one release gathered from the same columns (one `ImageRows`): every
    partition in UpdateMetadata (leader -2 for a topic being deleted), each broker's share in
    LeaderAndIsr (some sent as new), one LeaderAndIsr holding a partition UpdateMetadata lacks
    (written on its own). The digest takes rows' texts from the largest request; it must be the
    reference, with either writer."""
    take = np.arange(size) % len(few)
    image = {name: None if getattr(few, name) is None else getattr(few, name)[take]
             for name in ("leader", "leader_epoch", "isr", "controller_epoch", "zk_version", "replicas", "adding",
                          "removing")}
    tps = [TopicPartition(f"t{k % 7}", k) for k in range(size)]  # (distinct partitions, as an image's rows)
    source = Gathering(size)

    def views(rows, leader=None, is_new=None):
        rows = np.asarray(rows, np.intp)
        pick = {k: None if v is None else v[rows] for k, v in image.items()}
        return PartitionViews(tuple(tps[k] for k in rows.tolist()), leader if leader is not None else pick["leader"],
                              pick["leader_epoch"], pick["isr"], pick["controller_epoch"], pick["zk_version"],
                              pick["replicas"], pick["adding"], pick["removing"], is_new, source=(source, rows))

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), "seed"))  # (large draws, made by numpy)
    missing = int(rng.integers(size))
    everyone = np.array([k for k in range(size) if k != missing])
    deleting = (everyone % 7 == 3) & rng.integers(0, 2, len(everyone)).astype(bool)
    um = views(everyone, leader=np.where(deleting, -2, image["leader"][everyone]).astype(np.int32))
    requests = []
    for b in (1, 2, 3):
        share = np.sort(rng.choice(everyone, int(rng.integers(520, 900)), replace=False))
        new = rng.integers(0, 2, len(share)).astype(bool) if rng.integers(2) else None
        requests.append(C.SendLeaderAndIsr(broker_id=b, broker_epoch=1, controller_epoch=1,
                                           partitions=views(share, is_new=new), live_leaders=()))
    requests.append(C.SendLeaderAndIsr(broker_id=4, broker_epoch=1, controller_epoch=1,
                                       partitions=views(np.r_[everyone[:600], missing]), live_leaders=()))
    brokers = (BrokerInfo(1, "a", 1, 1), BrokerInfo(2, "b", 1, 1))
    requests += [C.SendUpdateMetadata(broker_id=b, broker_epoch=1, controller_epoch=1, partitions=um,
                                      live_brokers=brokers) for b in (1, 2)]
    timer = C.ScheduleTimer(name="rebalance", delay_ms=1)
    reference, reference_other = codec.reference_digest(requests), codec.reference_digest(requests + [timer])
    for canonical in WRITERS:
        digester = codec.digester(canonical)
        for request in requests:
            request.partitions._views = None  # (written from the columns again)
        assert digester.digest(requests) == reference
        assert digester.digest(requests + [timer]) == reference_other  # (the generic path)


def test_a_partition_number_that_is_not_an_int_is_left_to_the_codec():
    views = PartitionViews((TopicPartition("t", True),), np.array([1]), np.array([0]), np.array([[1]]),
                           np.array([1]), np.array([0]), np.array([[1]]))
    assert D._views_text(views, codec.canonical_json) is None


def test_the_digest_checks_its_layout_on_a_probe_and_keeps_the_codecs_path_if_it_differs():
    assert codec.digester().views_from_columns
    wrong = D.Digester(lambda c, memo: {}, codec.canonical_json,
                       lambda cls, name: (lambda v: [[0]]) if name == "partitions" else codec._field_encoder(cls, name))
    assert not wrong.views_from_columns



@st.composite
def write_columns(draw, min_rows=0, max_rows=30):
    """`PartitionWrites` columns as `Draft.write_rows` fills them (creates: expected -1)."""
    n = draw(st.integers(min_rows, max_rows))
    width = draw(st.integers(1, 4))
    names = draw(st.lists(st.text(max_size=4), min_size=1, max_size=3))
    tps = [TopicPartition(draw(st.sampled_from(names)), draw(INT32.filter(lambda v: v >= 0))) for _ in range(n)]
    isr = np.full((n, width), -1, np.int32)
    for i in range(n):
        members = draw(st.lists(st.integers(0, 2**31 - 2), max_size=width, unique=True))
        isr[i, :len(members)] = members

    def ints():
        return np.array([draw(INT32) for _ in range(n)], np.int32)

    return PartitionWrites(tps, ints(), ints(), isr, ints(), ints(), ints())


@settings(max_examples=150, deadline=None)
@given(write_columns())
def test_a_write_commands_text_written_from_the_columns_is_the_codecs(writes):
    command = C.WritePartitionStates(write_id=3, writes=writes)
    built = C.WritePartitionStates(write_id=3, writes=tuple(
        C.PartitionWrite(tp, LeaderIsr(*row), x) for tp, row, x in zip(
            writes.tps, zip(writes.leader.tolist(), writes.leader_epoch.tolist(),
                            [tuple(r for r in row if r != -1) for row in writes.isr.tolist()],
                            writes.controller_epoch.tolist(), writes.zk_version.tolist()),
            writes.expected.tolist())))
    for canonical in WRITERS:
        digester = codec.digester(canonical)
        assert digester.writes_from_columns
        assert digester._write_states_text(command) == canonical(codec.encode_command(built))
    assert command == built and built == command and hash(command) == hash(built)


@settings(max_examples=10, deadline=None)
@given(write_columns(min_rows=1, max_rows=4), st.integers(600, 1200))
def test_a_large_write_commands_digest_is_the_reference_and_makes_no_write_value(few, rows):
    take = np.arange(rows) % len(few)

    def big():
        return PartitionWrites([few.tps[k] for k in take.tolist()], few.leader[take], few.leader_epoch[take],
                               few.isr[take], few.controller_epoch[take], few.zk_version[take], few.expected[take])

    log = C.LogStateChanges(cause="x", entries=())
    reference = codec.reference_digest([log, C.WritePartitionStates(write_id=1, writes=big())])
    for canonical in WRITERS:
        writes = big()
        assert codec.digester(canonical).digest([log, C.WritePartitionStates(write_id=1, writes=writes)]) == reference
        assert writes._writes is None  # written from the columns


@settings(max_examples=100, deadline=None)
@given(write_columns(), write_columns(), st.data())
def test_writes_followed_by_more_merge_a_partition_written_twice_as_write_change_does(first, later, data):
    """`PartitionWrites.then` (a bounce: the failure's writes, then the startup's): the first
    writes in their order, each partition written again taking the later state but keeping its
    first write's place, expected version and stored version; the other later writes after them.
    The ISR matrices may differ in width."""
    def distinct(w):  # (a decision writes a partition once per part)
        keep = np.array([w.tps.index(tp) == i for i, tp in enumerate(w.tps)], bool)
        return PartitionWrites([tp for tp, k in zip(w.tps, keep) if k], w.leader[keep], w.leader_epoch[keep],
                               w.isr[keep], w.controller_epoch[keep], w.zk_version[keep], w.expected[keep])
    if first.tps:  # some of the later writes are of partitions the first wrote
        again = data.draw(st.lists(st.booleans(), min_size=len(later.tps), max_size=len(later.tps)), "again")
        later.tps = [data.draw(st.sampled_from(first.tps)) if a else tp for tp, a in zip(later.tps, again)]
    first, later = distinct(first), distinct(later)
    expected = {w.tp: w for w in first.writes()}
    for w in later.writes():
        was = expected.get(w.tp)
        if was is None:
            expected[w.tp] = w
        else:
            expected[w.tp] = C.PartitionWrite(w.tp, w.leader_isr._replace(zk_version=was.leader_isr.zk_version),
                                              was.expected_version)
    assert first.then(later).writes() == tuple(expected.values())
