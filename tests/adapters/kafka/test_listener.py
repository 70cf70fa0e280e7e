"""Kafka's protocol on a live node's PLAINTEXT port, over real TCP: answers, unsupported
requests, garbage (hand-picked and generated with Hypothesis). The node runs in this process on
the real ZooKeeper; after every bad connection it must still answer the control channel and
Kafka clients, and its metadata cache must be unchanged.
"""
from __future__ import annotations

import asyncio
import logging
import struct

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.control import requests as Q
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.control.transport import ControlClient
from adapters.sim.cluster import wait_for
from adapters.kafka import protocol as K
from adapters.node import ClusterNode, NodeConfig
from adapters.zookeeper.session import ZkSession
from controller_core.values import ReplicaAssignment
from tests.sockets import exchange

FAST = {"zookeeper.session.timeout.ms": "4000", "auto.leader.rebalance.enable": "false",
        "replica.catch.up.delay.ms": "100"}


@pytest.fixture
async def node(zk_connect, tmp_path):
    admin = await ZkSession.connect(zk_connect)
    n = ClusterNode(NodeConfig(broker_id=1, zookeeper=zk_connect, journal_dir=str(tmp_path / "n1"),
                               rack="r1", settings=dict(FAST)))
    try:
        await n.start()
        await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment(
            {0: ReplicaAssignment((1,)), 1: ReplicaAssignment((1,))}), make_parents=True)
        await wait_for(lambda: _now(len(n.broker.metadata()["partitions"]) == 2), what="t in the cache")
        yield n
    finally:
        await n.close()
        await admin.close()


async def _now(value):
    return value


async def ask(port: int, frame: bytes) -> bytes:
    """One request on a fresh connection; its response (after the length prefix)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(frame)
        (n,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
        return await asyncio.wait_for(reader.readexactly(n), 10)
    finally:
        writer.close()


def responses(data: bytes) -> list[bytes]:
    out = []
    while len(data) >= 4:
        (n,) = struct.unpack(">i", data[:4])
        if len(data) < 4 + n:
            break
        out.append(data[4:4 + n])
        data = data[4 + n:]
    return out


async def still_serving(node: ClusterNode) -> None:
    """A Kafka client and the control channel both get answers."""
    got = await ask(node.port, K.request_frame(K.API_METADATA, 9, 11, {"Topics": None}))
    correlation_id, body = K.parse_response(K.API_METADATA, 9, got)
    assert correlation_id == 11 and [t["Name"] for t in body["Topics"]] == ["t"]
    client = ControlClient("127.0.0.1", node.port)
    try:
        answer = await client.request(Q.METADATA, {"topics": ["t"]}, timeout=10)
    finally:
        await client.close()
    assert set(answer["partitions"]) == {"t-0", "t-1"}


async def test_metadata_over_tcp_from_the_brokers_cache(node):
    frame = K.request_frame(K.API_METADATA, 9, 3, {"Topics": [{"Name": "t"}, {"Name": "nosuch"}, {"Name": "a/b"}]})
    payload = await ask(node.port, frame)
    _, body = K.parse_response(K.API_METADATA, 9, payload)
    assert body["ControllerId"] == 1 and len(body["ClusterId"]) == 22
    assert body["Brokers"] == [{"NodeId": 1, "Host": "127.0.0.1", "Port": node.port, "Rack": "r1"}]
    t, nosuch, bad = body["Topics"]
    assert [(p["PartitionIndex"], p["LeaderId"], p["ReplicaNodes"], p["IsrNodes"], p["ErrorCode"])
            for p in t["Partitions"]] == [(0, 1, [1], [1], 0), (1, 1, [1], [1], 0)]
    assert all(p["LeaderEpoch"] == node.broker.metadata()["partitions"][f"t-{p['PartitionIndex']}"]["leader_epoch"]
               for p in t["Partitions"])
    assert (nosuch["ErrorCode"], nosuch["Partitions"]) == (K.UNKNOWN_TOPIC_OR_PARTITION, [])
    assert bad["ErrorCode"] == K.INVALID_TOPIC_EXCEPTION


async def test_the_kept_all_topics_answer_follows_update_metadata(node):
    every = K.request_frame(K.API_METADATA, 9, 4, {"Topics": None})

    async def names():
        _, body = K.parse_response(K.API_METADATA, 9, await ask(node.port, every))
        return [t["Name"] for t in body["Topics"]]

    assert await names() == ["t"] and await names() == ["t"]  # the second from the kept encoding
    await node.zk.create(zkpaths.topic("u"), zkdata.encode_topic_assignment({0: ReplicaAssignment((1,))}))
    await wait_for(lambda: _now(len(node.broker.metadata()["partitions"]) == 3), what="u in the cache")
    assert await names() == ["t", "u"]


async def test_unsupported_requests_are_answered_and_the_connection_stays_open(node):
    newer = struct.pack(">hhi", K.API_API_VERSIONS, 7, 21) + b"\x00\x00future"
    produce = struct.pack(">hhi", 0, 8, 22) + b"\x00\x00"
    fetch_too_new = struct.pack(">hhi", K.API_METADATA, 99, 23) + b"\x00\x00"
    then_valid = K.request_frame(K.API_API_VERSIONS, 2, 24, {})
    data = b"".join(struct.pack(">i", len(p)) + p for p in (newer, produce, fetch_too_new)) + then_valid
    raw = await exchange(node.port, data, wait=1)
    assert not raw.endswith(b"<closed>")
    first, second, third, fourth = responses(raw)
    _, body = K.parse_response(K.API_API_VERSIONS, 0, first)  # KIP-511: v0 answer
    assert body["ErrorCode"] == K.UNSUPPORTED_VERSION and {k["ApiKey"] for k in body["ApiKeys"]} == set(K.SERVED)
    assert second == struct.pack(">ih", 22, K.UNSUPPORTED_VERSION)
    assert third == struct.pack(">ih", 23, K.UNSUPPORTED_VERSION)
    correlation_id, body = K.parse_response(K.API_API_VERSIONS, 2, fourth)
    assert correlation_id == 24 and body["ErrorCode"] == 0


async def test_malformed_frames_close_the_connection_with_one_log_line(node, caplog):
    valid = K.request_frame(K.API_METADATA, 9, 5, {"Topics": None})
    cases = {
        "negative length": struct.pack(">i", -5) + b"\x00" * 8,
        "oversized": struct.pack(">i", K.MAX_REQUEST_BYTES + 1) + b"\x00\x03",
        "shorter than a header": struct.pack(">i", 4) + b"\x00\x03\x00\x09",
        "no Kafka api": struct.pack(">i", 10) + struct.pack(">hhi", 999, 0, 1) + b"\x00\x00",
        "truncated body": valid[:4] + valid[4:-3].ljust(len(valid) - 4, b"\xff"),
        "string past the end": struct.pack(">i", 10) + struct.pack(">hhi", 18, 0, 1) + b"\x7f\xff",
        "cut off mid-frame": valid[:-2],
    }
    before = node.broker.metadata()
    for name, data in cases.items():
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kctl.kafka"):
            raw = await _half_closed(node.port, data) if name == "cut off mid-frame" \
                else await exchange(node.port, data, wait=2)
        assert raw == b"<closed>", (name, raw)
        lines = [r for r in caplog.records if r.name == "kctl.kafka"]
        assert len(lines) == 1 and "closing connection" in lines[0].getMessage(), (name, lines)
        await still_serving(node)
    assert node.broker.metadata() == before


async def _half_closed(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        writer.write_eof()
        received = await asyncio.wait_for(reader.read(), 5)
        return received + b"<closed>"
    finally:
        writer.close()


frames = st.sampled_from([K.request_frame(k, v, 9, {}) for k, (_, lo, hi) in K.SERVED.items()
                          for v in (lo, hi)])


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(garbage=st.binary(min_size=1, max_size=64).map(lambda b: struct.pack(">i", len(b)) + b)
       | st.tuples(frames, st.integers(0, 200), st.binary(max_size=12)).map(lambda x: x[0][:x[1]] + x[2])
       | st.binary(min_size=5, max_size=40).filter(lambda b: b[4] != 0xC7))
async def test_generated_garbage_on_the_kafka_listener(node, garbage):
    """Random frames, truncated and padded valid requests: the node answers or closes, never
    crashes, and keeps serving with its cache unchanged."""
    before = node.broker.metadata()
    await _half_closed(node.port, garbage)
    await still_serving(node)
    assert node.broker.metadata() == before
    assert node.crashed is None
