"""Garbage into a live node's control port: random bytes, oversized, truncated and malformed
frames, unknown request types, stale controller epochs and wrong broker epochs.

The node must keep serving (a valid request right after succeeds) and nothing may change on the
broker: its replicas, leader epochs and metadata cache are compared before and after. Nodes run
in this process on the real ZooKeeper; the garbage goes over real TCP.
"""
from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.control import requests as Q
from adapters.control import framing as wire
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.control.transport import ControlClient
from adapters.sim.cluster import partition_states, wait_for
from adapters.node import ClusterNode, NodeConfig
from adapters.zookeeper.session import ZkSession
from controller_core.values import PartitionView, ReplicaAssignment, TopicPartition

FAST = {"zookeeper.session.timeout.ms": "4000", "auto.leader.rebalance.enable": "false",
        "replica.catch.up.delay.ms": "100", "replica.lag.time.max.ms": "3000"}


class Target:
    """A broker that is not the controller, with replicas of topic t (some leaders)."""

    def __init__(self, node: ClusterNode, controller: ClusterNode):
        self.node = node
        self.controller = controller
        self.broker = node.broker

    def snapshot(self) -> tuple:
        b = self.broker
        return (b.replicas(), b.metadata(), b.controller_epoch, dict(b._leader_epochs))

    async def raw(self, data: bytes, *, close: bool = False) -> bytes:
        """Send bytes on a fresh connection; return what came back until the server closed it
        (or until 5 s of silence, for requests that get an answer and keep the connection)."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.node.port)
        try:
            writer.write(data)
            await writer.drain()
            if close:
                writer.write_eof()
            received = b""
            while True:
                try:
                    chunk = await asyncio.wait_for(reader.read(65536), 5)
                except asyncio.TimeoutError:
                    return received
                if not chunk:
                    return received + b"<closed>"
                received += chunk
                if _complete(received):
                    return received
        finally:
            writer.close()

    async def request(self, api: str, body: dict, node: ClusterNode | None = None) -> dict:
        client = ControlClient("127.0.0.1", (node or self.node).port)
        try:
            return await client.request(api, body, timeout=10)
        finally:
            await client.close()

    async def valid_request_succeeds(self) -> None:
        """An UpdateMetadata from the current controller epoch that repeats the cache: accepted
        ({}), and it changes nothing."""
        meta = self.broker.metadata()
        live = [[b.broker_id, b.host, b.port, b.rack] for b in self.broker.live_brokers().values()]
        answer = await self.request(Q.UPDATE_METADATA, {
            "controller_id": self.controller.broker_id, "controller_epoch": meta["controller_epoch"],
            "broker_epoch": self.node.broker_epoch, "partition_states": Q.views_body([]), "live_brokers": live,
            "shutting_down_brokers": []})
        assert answer == {}, answer


def _complete(data: bytes) -> bool:
    if len(data) < 4:
        return False
    (length,) = struct.unpack(">I", data[:4])
    return len(data) >= 4 + length


def _decode(data: bytes) -> wire.Frame:
    (frame,) = wire.FrameDecoder().feed(data)
    return frame


@pytest.fixture
async def target(zk_connect, tmp_path):
    admin = await ZkSession.connect(zk_connect)
    nodes = []
    try:
        for i in (1, 2, 3):
            node = ClusterNode(NodeConfig(broker_id=i, zookeeper=zk_connect, journal_dir=str(tmp_path / f"n{i}"),
                                          settings=dict(FAST)))
            await node.start()
            nodes.append(node)
        ctrl = await wait_for(lambda: _controller(nodes), what="a controller")
        other = next(n for n in nodes if n is not ctrl)
        b = other.broker_id
        rest = [n.broker_id for n in nodes if n.broker_id != b]
        await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment(
            {0: ReplicaAssignment((b, *rest)), 1: ReplicaAssignment((*rest, b))}), make_parents=True)
        await wait_for(lambda: _isr_full(admin, "t", 2, 3), what="t fully replicated")
        await wait_for(lambda: _now(len(other.broker.metadata()["partitions"]) == 2
                                    and all(len(p["isr"]) == 3 for p in other.broker.metadata()["partitions"].values())),
                       what="the target's metadata up to date")
        yield Target(other, ctrl)
    finally:
        for node in nodes:
            await node.close()
        await admin.close()


async def _controller(nodes):
    found = [n for n in nodes if n.active and n.loop.state.active]
    return found[0] if len(found) == 1 else None


async def _isr_full(admin, topic, partitions, size):
    states = await partition_states(admin, topic)
    return len(states) == partitions and all(len(li.isr) == size for li in states.values())


async def _now(value):
    return value


def frame(api: str, body, *, correlation_id: int = 7, flags_extra: int = 0) -> bytes:
    data = wire.encode_frame(api, correlation_id, body)
    if flags_extra:
        data = data[:6] + bytes([data[6] | flags_extra]) + data[7:]
    return data


def header(target: Target, *, controller_epoch: int | None = None, broker_epoch: int | None = None) -> dict:
    return {"controller_id": target.controller.broker_id,
            "controller_epoch": target.broker.controller_epoch if controller_epoch is None else controller_epoch,
            "broker_epoch": target.node.broker_epoch if broker_epoch is None else broker_epoch}


def states(*views: tuple) -> dict:
    """The wire form of partition states, each given as (topic, partition, controller epoch,
    leader, leader epoch, isr)."""
    return Q.views_body([PartitionView(TopicPartition(t, p), leader, le, tuple(isr), ce, 0, tuple(isr))
                         for t, p, ce, leader, le, isr in views])


def lead_everything(target: Target, leader_epoch: int = 1000) -> dict:
    """Partition states that would make the target the leader of every partition of t."""
    b = target.node.broker_id
    return states(*[("t", p, target.broker.controller_epoch, b, leader_epoch, [b]) for p in (0, 1)])


async def test_garbage_on_the_control_port_changes_nothing_and_the_node_keeps_serving(target):
    before = target.snapshot()
    valid = frame(Q.UPDATE_METADATA, {**header(target), "partition_states": states(), "live_brokers": [],
                                      "shutting_down_brokers": []})
    compressed_garbage = bytearray(frame("LeaderAndIsr", {"x": 1}, flags_extra=wire.FLAG_COMPRESSED))
    closes = {
        "random bytes": b"GET / HTTP/1.1\r\nHost: kctl\r\n\r\n",
        # not the magic: the Kafka listener takes it (adapters/kafka), and api key 257 is no Kafka api
        "bad magic": struct.pack(">I", 20) + b"\x01" * 20,
        "unsupported version": struct.pack(">IBB", 20, wire.MAGIC, 9) + b"\x00" * 18,
        "oversized frame": struct.pack(">I", 0xFFFF_FFF0) + bytes([wire.MAGIC, wire.VERSION]),
        "too short": struct.pack(">I", 3) + b"abc",
        "truncated frame": valid[: len(valid) // 2],
        "empty api name": struct.pack(">IBBBIB", 8, wire.MAGIC, wire.VERSION, 0, 1, 0),
        "unknown flag bits": frame(Q.LEADER_AND_ISR, {"x": 1}, flags_extra=0x40),
        "not JSON": valid[:4] + valid[4:-2] + b"\xff\xfe",
        "a JSON array": frame(Q.LEADER_AND_ISR, {}).replace(b"{}", b"[]"),
        "garbage zlib": bytes(compressed_garbage),
        "a response sent to a server": wire.encode_frame(Q.LEADER_AND_ISR, 1, {}, is_response=True),
    }
    for name, data in closes.items():
        answer = await target.raw(data, close=name == "truncated frame")
        assert answer.endswith(b"<closed>") and not answer[:-8], (name, answer)  # closed, nothing answered
        await target.valid_request_succeeds()
        assert target.snapshot() == before, name

    b = target.node.broker_id
    epoch = target.broker.controller_epoch
    answered = [
        ("unknown api", frame("Frobnicate", {"anything": [1, 2]}), "NOT_CONTROLLER"),
        ("stale controller epoch",
         frame(Q.LEADER_AND_ISR, {**header(target, controller_epoch=epoch - 1), "live_leaders": [],
                                  "partition_states": lead_everything(target)}), "STALE_CONTROLLER_EPOCH"),
        ("wrong broker epoch",
         frame(Q.LEADER_AND_ISR, {**header(target, broker_epoch=target.node.broker_epoch - 1), "live_leaders": [],
                                  "partition_states": lead_everything(target)}), "STALE_BROKER_EPOCH"),
        ("stale StopReplica",
         frame(Q.STOP_REPLICA, {**header(target, controller_epoch=epoch - 1), "delete_partitions": True,
                                "partitions": [["t", 0], ["t", 1]]}), "STALE_CONTROLLER_EPOCH"),
        ("stale UpdateMetadata (5 MB)",
         frame(Q.UPDATE_METADATA, {**header(target, controller_epoch=epoch - 1), "live_brokers": [],
                                   "shutting_down_brokers": [],
                                   "partition_states": states(*[("x" * 200 + str(p), p, 0, b, 1, [b])
                                                                for p in range(20_000)])}),
         "STALE_CONTROLLER_EPOCH"),
        ("malformed partition states",
         frame(Q.LEADER_AND_ISR, {**header(target), "live_leaders": [], "partition_states": "all of them"}),
         "INVALID_REQUEST"),
        ("missing controller epoch", frame(Q.LEADER_AND_ISR, {"partition_states": []}), "INVALID_REQUEST"),
        ("StopReplica without delete flag",
         frame(Q.STOP_REPLICA, {**header(target), "partitions": [["t", 0]]}), "INVALID_REQUEST"),
    ]
    for name, data, error in answered:
        response = _decode(await target.raw(data))
        assert response.is_response and response.correlation_id == 7, name
        assert response.body.get("error") == error, (name, response.body)
        await target.valid_request_succeeds()
        assert target.snapshot() == before, name

    # a replayed LeaderAndIsr from the current controller epoch: every partition refused (its
    # leader epoch is not above the broker's), nothing applied
    epochs = dict(target.broker._leader_epochs)
    replay = states(*[("t", tp.partition, epoch, b, e, [b]) for tp, e in epochs.items()])
    response = _decode(await target.raw(frame(Q.LEADER_AND_ISR, {**header(target), "live_leaders": [],
                                                                  "partition_states": replay})))
    assert sorted(e[2] for e in response.body["partition_errors"]) == ["STALE_CONTROLLER_EPOCH"] * 2
    assert target.snapshot() == before

    # the controller's own unknown-api answer, and the real controller still drives the broker
    answer = await target.request("Frobnicate", {}, node=target.controller)
    assert answer["error"] == "UNSUPPORTED"
    answer = await target.request(Q.ELECT_LEADERS, {"election_type": "preferred", "partitions": [["t", 0]]},
                                  node=target.controller)
    assert answer["error"] is None and answer["results"][0][2].startswith("ELECTION_NOT_NEEDED")
    admin = target.node.zk
    await admin.create(zkpaths.topic("u"), zkdata.encode_topic_assignment({0: ReplicaAssignment((b,))}))
    await wait_for(lambda: _now("u-0" in target.broker.replicas()), what="the controller's LeaderAndIsr for u-0")
    assert target.broker.replicas()["u-0"]["role"] == "leader"


# -- generated garbage ----------------------------------------------------------------------------

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=9), kids,
                                                                                    max_size=3), max_leaves=10)
apis = st.sampled_from(list(Q.APIS)) | st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1,
                                               max_size=12)
bodies = st.dictionaries(st.sampled_from(["controller_id", "controller_epoch", "broker_epoch", "partition_states",
                                          "live_brokers", "live_leaders", "partitions", "delete_partitions",
                                          "broker_id", "election_type"]) | st.text(max_size=5),
                         json_values, max_size=6)
MUTATING = {Q.LEADER_AND_ISR, Q.UPDATE_METADATA, Q.STOP_REPLICA}


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(garbage=st.binary(min_size=1, max_size=64) | st.tuples(apis, bodies, st.integers(0, 3)))
async def test_generated_garbage_on_the_control_port(target, garbage):
    before = target.snapshot()
    if isinstance(garbage, bytes):
        data = garbage
    else:
        api, body, stale = garbage
        if api in MUTATING:
            # whatever else the body holds, it comes from an older controller (or from none)
            body["controller_epoch"] = target.broker.controller_epoch - 1 - stale if stale < 3 else "x"
        data = wire.encode_frame(api, 3, body)
    await target.raw(data, close=True)
    await target.valid_request_succeeds()
    assert target.snapshot() == before
