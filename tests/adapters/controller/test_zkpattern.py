"""adapters/controller/zkpattern.py against a real ZooKeeper: Kafka 2.4's pattern (the failover benchmark's
peer) writes one epoch-checked two-op multi per partition with at most 10 in flight, reads one
getData per state with at most 10 in flight, and keeps the product's fencing and conflicts."""
from __future__ import annotations

import pytest

from adapters.znodes import codec as zkdata
from adapters.zookeeper import wire as zkwire
from adapters.zookeeper.session import CONTROLLER_EPOCH_PATH, Fenced, ZkSession
from adapters.controller.zkpattern import KAFKA_MAX_IN_FLIGHT, PATTERNS, pattern
from controller_core.values import LeaderIsr

N = 60


class Spy:
    """Wraps the connection's send, through which every request goes on the wire, to see the
    requests and how many are unanswered at once."""

    def __init__(self, zk: ZkSession):
        self.conn = zk._session.conn
        self.real = self.conn.send
        self.requests: list = []
        self.pending: list = []  # futures of requests sent and not answered (done once answered)
        self.peak = 0

    def send(self, request, xid=None):
        future = self.real(request, xid=xid)
        if isinstance(request, zkwire._Request):  # not the session's pings
            self.requests.append(request)
            self.pending = [f for f in self.pending if not f.done()] + [future]
            self.peak = max(self.peak, len(self.pending))
        return future

    def __enter__(self):
        self.conn.send = self.send
        return self

    def __exit__(self, *exc_info):
        del self.conn.send


def _state(leader: int) -> LeaderIsr:
    return LeaderIsr(leader, 1, (leader, 3), 4, 0)


async def _tree(zk: ZkSession) -> list[str]:
    await zk.create(CONTROLLER_EPOCH_PATH, b"4")
    paths = [f"/brokers/topics/t/partitions/{i}/state" for i in range(N)]
    await zk.write_partition_states(None, [(p, zkdata.encode_partition_state(_state(1)), -1) for p in paths])
    return paths


async def test_kafka_24_writes_one_fenced_two_op_multi_per_partition_ten_in_flight(zk_connect):
    zk = await ZkSession.connect(zk_connect)
    try:
        paths = await _tree(zk)
        with Spy(zk) as spy:
            versions, conflicts = await pattern("kafka-2.4").write_states(
                zk, 0, [(p, _state(2), 0) for p in paths], zkdata.encode_partition_state)
        assert conflicts == {} and versions == {p: 1 for p in paths}
        assert len(spy.requests) == N and all(r.opcode == zkwire._MULTI for r in spy.requests)
        # each: check /controller_epoch, then setData, then the end marker
        first = spy.requests[0].body
        assert first.count(zkwire._MULTI_HEADER.pack(zkwire._CHECK, False, -1)) == 1
        assert first.count(zkwire._MULTI_HEADER.pack(zkwire._SET_DATA, False, -1)) == 1
        assert spy.peak == KAFKA_MAX_IN_FLIGHT
        data, stat = await zk.get(paths[7])
        assert zkdata.decode_partition_state(data, stat.version).leader == 2
        # the product, for comparison: a few large multis, all at once
        with Spy(zk) as spy:
            await pattern("batched").write_states(zk, 0, [(p, _state(3), 1) for p in paths],
                                                  zkdata.encode_partition_state)
        assert len(spy.requests) == 1
    finally:
        await zk.close()


async def test_kafka_24_reads_one_get_data_per_state_ten_in_flight(zk_connect):
    zk = await ZkSession.connect(zk_connect)
    try:
        paths = await _tree(zk)
        with Spy(zk) as spy:
            values = await pattern("kafka-2.4").read_many(zk, paths)
        assert set(values) == set(paths) and all(v[1].version == 0 for v in values.values())
        assert len(spy.requests) == N and {r.opcode for r in spy.requests} == {zkwire._GET_DATA}
        assert spy.peak == KAFKA_MAX_IN_FLIGHT
        with Spy(zk) as spy:
            assert await pattern("batched").read_many(zk, paths) == values
        assert len(spy.requests) == 1 and spy.requests[0].opcode == zkwire._MULTI_READ
    finally:
        await zk.close()


async def test_kafka_24_is_fenced_and_reports_conflicts_like_the_product(zk_connect):
    zk = await ZkSession.connect(zk_connect)
    try:
        paths = await _tree(zk)
        someone = zkdata.encode_partition_state(_state(3))
        await zk.set(paths[5], someone, 0)  # another writer got there first
        versions, conflicts = await pattern("kafka-2.4").write_states(
            zk, 0, [(p, _state(2), 0) for p in paths], zkdata.encode_partition_state)
        assert conflicts == {paths[5]: (someone, 1)}
        assert set(versions) == set(paths) - {paths[5]}
        await zk.set(CONTROLLER_EPOCH_PATH, b"5")  # a new controller
        with pytest.raises(Fenced) as raised:
            await pattern("kafka-2.4").write_states(zk, 0, [(p, _state(4), 1) for p in paths[:20] if p != paths[5]],
                                                    zkdata.encode_partition_state)
        assert raised.value.current_version == 1 and raised.value.applied == {}
        data, stat = await zk.get(paths[0])
        assert stat.version == 1  # nothing was applied
    finally:
        await zk.close()


def test_patterns_are_named_and_an_unknown_one_is_refused():
    assert set(PATTERNS) == {"batched", "sequential", "kafka-2.4"}
    assert PATTERNS["batched"].progress and not PATTERNS["kafka-2.4"].progress
    with pytest.raises(ValueError, match="unknown ZooKeeper write pattern 'kafka-3'"):
        pattern("kafka-3")
