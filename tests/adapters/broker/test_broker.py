"""The broker side of a node, behind a real ControlServer on loopback, against a real ZooKeeper:
fencing, replica transitions, the metadata cache and the leader's ISR writes."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from adapters.control import requests as Q
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.broker.broker import Broker
from adapters.control.transport import ControlClient, ControlServer
from adapters.zookeeper.session import ZkSession
from controller_core import commands as C
from controller_core.values import BrokerInfo, LeaderIsr, PartitionView, TopicPartition

HOST = "127.0.0.1"
ME = 1
LAG_MS = 600
CATCH_UP_MS = 200
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
async def zk(zk_connect):
    session = await ZkSession.connect(zk_connect)
    yield session
    await session.close()


# -- a broker behind a control server ------------------------------------------------------------


class Node:
    def __init__(self, broker: Broker, server: ControlServer, client: ControlClient):
        self.broker = broker
        self.server = server
        self.client = client

    async def leader_and_isr(self, *views, controller_epoch=1, broker_epoch=-1):
        c = C.SendLeaderAndIsr(broker_id=ME, broker_epoch=broker_epoch, controller_epoch=controller_epoch,
                               partitions=tuple(views), live_leaders=(BrokerInfo(ME, HOST, 1, -1),))
        return await self.client.request(Q.LEADER_AND_ISR, Q.leader_and_isr_body(c, 0), timeout=5)

    async def update_metadata(self, live, *views, controller_epoch=1, broker_epoch=-1, offline=None):
        brokers = tuple(BrokerInfo(b, HOST, 9000 + b, -1) for b in live)
        c = C.SendUpdateMetadata(broker_id=ME, broker_epoch=broker_epoch, controller_epoch=controller_epoch,
                                 partitions=tuple(views), live_brokers=brokers)
        body = Q.update_metadata_body(c, 0)
        if offline:
            body["offline_replicas"] = offline
        return await self.client.request(Q.UPDATE_METADATA, body, timeout=5)

    async def stop_replica(self, *tps, delete, controller_epoch=1, broker_epoch=-1):
        c = C.SendStopReplica(broker_id=ME, broker_epoch=broker_epoch, controller_epoch=controller_epoch,
                              delete=delete, partitions=tuple(tps))
        return await self.client.request(Q.STOP_REPLICA, Q.stop_replica_body(c, 0), timeout=5)

    def replica(self, tp: TopicPartition) -> dict | None:
        return self.broker.replicas().get(str(tp))


@pytest.fixture
async def node(zk):
    async def fallback(frame):
        return {"error": "NONE", "handled_by": "controller", "api": frame.api}

    broker = Broker(ME, zk, replica_lag_time_max_ms=LAG_MS, catch_up_delay_ms=CATCH_UP_MS, fallback=fallback)
    server = ControlServer(HOST, 0, broker.handle)
    await server.start()
    client = ControlClient(HOST, server.port)
    task = asyncio.create_task(broker.run())
    yield Node(broker, server, client)
    broker.close()
    await asyncio.wait_for(task, 5)
    await client.close()
    await server.close()


def view(tp=T0, leader=ME, epoch=0, isr=(1,), replicas=(1, 2, 3), zk_version=0, controller_epoch=1):
    return PartitionView(tp, leader, epoch, tuple(isr), controller_epoch, zk_version, tuple(replicas))


async def create_state(zk, tp: TopicPartition, leader_isr: LeaderIsr) -> None:
    await zk.create(zkpaths.partition_state(tp.topic, tp.partition), zkdata.encode_partition_state(leader_isr),
                    make_parents=True)


async def read_state(zk, tp: TopicPartition) -> LeaderIsr:
    data, stat = await zk.get(zkpaths.partition_state(tp.topic, tp.partition))
    return zkdata.decode_partition_state(data, stat.version)


async def notifications(zk) -> list[dict]:
    if await zk.exists(zkpaths.ISR_CHANGE_NOTIFICATION) is None:
        return []
    names = sorted(await zk.get_children(zkpaths.ISR_CHANGE_NOTIFICATION))
    return [json.loads((await zk.get(f"{zkpaths.ISR_CHANGE_NOTIFICATION}/{n}"))[0]) for n in names]


async def eventually(probe, timeout: float = 5.0, interval: float = 0.02):
    """Await `probe()` until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout} s (last value {value!r})")
        await asyncio.sleep(interval)


# -- replica transitions ---------------------------------------------------------------------------


async def test_leader_and_isr_makes_it_leader_or_follower(node):
    answer = await node.leader_and_isr(view(T0, epoch=2, isr=(1, 2), zk_version=4),
                                       view(T1, leader=2, epoch=7, isr=(2, 1)))
    assert answer == {"partition_errors": []}
    assert node.replica(T0) == {"role": "leader", "leader": 1, "leader_epoch": 2, "controller_epoch": 1,
                                "zk_version": 4, "isr": [1, 2], "replicas": [1, 2, 3], "log_end_offset": 0}
    assert node.replica(T1)["role"] == "follower" and node.replica(T1)["leader"] == 2
    assert node.broker.leader_epoch(T0) == 2 and node.broker.controller_epoch == 1
    metrics = node.broker.metrics()
    assert metrics["requests"] == {"LeaderAndIsr": 1}
    assert metrics["replicas"] == {"leader": 1, "follower": 1}


async def test_leader_epoch_must_increase_per_partition(node):
    assert await node.leader_and_isr(view(T0, epoch=3), view(T1, epoch=3)) == {"partition_errors": []}
    answer = await node.leader_and_isr(view(T0, epoch=3, isr=(1, 2)),  # replayed epoch
                                       view(T1, epoch=4, leader=2, isr=(2,)),
                                       view(TopicPartition("u", 0), epoch=0, replicas=(2, 3)))  # not ours
    assert answer == {"partition_errors": [["t", 0, "STALE_CONTROLLER_EPOCH"],
                                           ["u", 0, "UNKNOWN_TOPIC_OR_PARTITION"]]}
    assert node.replica(T0)["isr"] == [1] and node.replica(T0)["leader_epoch"] == 3
    assert node.replica(T1)["role"] == "follower" and node.replica(T1)["leader_epoch"] == 4
    assert node.replica(TopicPartition("u", 0)) is None
    answer = await node.leader_and_isr(view(T0, epoch=2, leader=2))  # lower epoch
    assert answer == {"partition_errors": [["t", 0, "STALE_CONTROLLER_EPOCH"]]}
    assert node.replica(T0)["role"] == "leader"
    assert node.broker.metrics()["partition_errors"] == {"STALE_CONTROLLER_EPOCH": 2, "UNKNOWN_TOPIC_OR_PARTITION": 1}


async def test_stop_replica_stops_then_deletes(node):
    await node.leader_and_isr(view(T0, epoch=5, leader=2, isr=(2, 1)), view(T1, epoch=1))
    assert await node.stop_replica(T0, delete=False) == {"partition_errors": []}
    assert node.replica(T0)["role"] == "stopped"
    # a stopped replica keeps its leader epoch: the same LeaderAndIsr again is still stale
    assert (await node.leader_and_isr(view(T0, epoch=5, leader=2)))["partition_errors"] == \
        [["t", 0, "STALE_CONTROLLER_EPOCH"]]
    unknown = TopicPartition("gone", 0)
    assert await node.stop_replica(T0, unknown, delete=True) == {"partition_errors": []}
    assert node.replica(T0) is None and node.replica(T1) is not None
    assert node.broker.leader_epoch(T0) == -1
    # deleted: a recreated topic starts again from leader epoch 0
    assert await node.leader_and_isr(view(T0, epoch=0)) == {"partition_errors": []}
    assert node.replica(T0)["role"] == "leader"


# -- fencing ---------------------------------------------------------------------------------------------


async def test_stale_controller_epoch_is_rejected_and_changes_nothing(node):
    assert await node.leader_and_isr(view(T0, epoch=1), controller_epoch=5) == {"partition_errors": []}
    assert await node.update_metadata([1, 2], view(T0, epoch=1), controller_epoch=5) == {}
    before = (node.broker.replicas(), node.broker.metadata())

    answer = await node.leader_and_isr(view(T0, epoch=2, leader=2), view(T1, epoch=0), controller_epoch=4)
    assert answer["error"] == "STALE_CONTROLLER_EPOCH"
    assert answer["partition_errors"] == [["t", 0, "STALE_CONTROLLER_EPOCH"], ["t", 1, "STALE_CONTROLLER_EPOCH"]]
    answer = await node.update_metadata([1], view(T0, epoch=2, leader=2), controller_epoch=4)
    assert answer["error"] == "STALE_CONTROLLER_EPOCH"
    answer = await node.stop_replica(T0, delete=True, controller_epoch=4)
    assert answer["error"] == "STALE_CONTROLLER_EPOCH"
    assert answer["partition_errors"] == [["t", 0, "STALE_CONTROLLER_EPOCH"]]

    assert (node.broker.replicas(), node.broker.metadata()) == before
    assert node.broker.controller_epoch == 5
    assert node.broker.metrics()["rejections"] == {"STALE_CONTROLLER_EPOCH": 3}
    # a newer controller is accepted and raises the epoch seen
    assert await node.leader_and_isr(view(T0, epoch=2, leader=2), controller_epoch=6) == {"partition_errors": []}
    assert node.broker.controller_epoch == 6


async def test_stale_broker_epoch_is_rejected(node):
    node.broker.set_broker_epoch(100)
    answer = await node.leader_and_isr(view(T0), broker_epoch=99)
    assert answer["error"] == "STALE_BROKER_EPOCH" and node.replica(T0) is None
    assert (await node.update_metadata([1], broker_epoch=99))["error"] == "STALE_BROKER_EPOCH"
    assert (await node.stop_replica(T0, delete=False, broker_epoch=99))["error"] == "STALE_BROKER_EPOCH"
    assert node.broker.metadata()["brokers"] == []
    # -1 (unknown) and the current epoch are accepted; so is a newer one, as in Kafka (the
    # controller may see a re-registration before the node tells its broker)
    assert await node.leader_and_isr(view(T0, epoch=0), broker_epoch=-1) == {"partition_errors": []}
    assert await node.leader_and_isr(view(T0, epoch=1), broker_epoch=100) == {"partition_errors": []}
    assert await node.leader_and_isr(view(T0, epoch=2), broker_epoch=101) == {"partition_errors": []}
    assert node.broker.metrics()["rejections"] == {"STALE_BROKER_EPOCH": 3}


async def test_other_apis_go_to_the_fallback_and_bad_bodies_are_answered(node, zk):
    answer = await node.client.request(Q.CONTROLLED_SHUTDOWN, {"broker_id": 1, "broker_epoch": 5}, timeout=5)
    assert answer == {"error": "NONE", "handled_by": "controller", "api": "ControlledShutdown"}
    answer = await node.client.request(Q.LEADER_AND_ISR, {"controller_id": 0}, timeout=5)
    assert answer["error"] == "INVALID_REQUEST" and "controller_epoch" in answer["message"]
    lonely = Broker(2, zk)
    server = ControlServer(HOST, 0, lonely.handle)
    await server.start()
    try:
        async with ControlClient(HOST, server.port) as client:
            answer = await client.request(Q.ELECT_LEADERS, {"election_type": "PREFERRED", "partitions": None})
        assert answer["error"] == "UNSUPPORTED"
    finally:
        await server.close()


# -- the metadata cache ----------------------------------------------------------------------------


async def test_update_metadata_merges_partitions_and_replaces_brokers(node):
    await node.update_metadata([1, 2, 3], view(T0, isr=(1, 2)), view(T1, leader=2, isr=(2,)), controller_epoch=3)
    await node.update_metadata([3, 1], view(T0, leader=3, epoch=1, isr=(3,)), controller_epoch=3)
    assert node.broker.metadata() == {
        "broker_id": 1,
        "controller_epoch": 3,
        "brokers": [1, 3],
        "partitions": {
            "t-0": {"leader": 3, "leader_epoch": 1, "isr": [3], "replicas": [1, 2, 3]},
            "t-1": {"leader": 2, "leader_epoch": 0, "isr": [2], "replicas": [1, 2, 3]},
        },
    }
    # leader -2: the topic is being deleted and leaves the cache, as in Kafka
    await node.update_metadata([1, 3], view(T0, leader=-2, epoch=1), view(T1, leader=-2), controller_epoch=3)
    assert node.broker.metadata()["partitions"] == {}


async def test_replicas_listed_offline_reach_the_kafka_metadata_answer_until_a_request_clears_them(node):
    """UpdateMetadata's offline_replicas (a failed log dir of a live broker) are offline replicas
    in Kafka's Metadata answer, beside those of brokers that are not live, in the whole answer
    and in the per-topic kept encodings; the next request carrying the partition says anew."""
    from adapters.kafka import metadata as M

    def offline_of(snap):
        answer = M.metadata_response(snap, {"Topics": None}, 9, "c")
        kept = M.TopicEncodings().encoded(snap.topics(), snap.brokers, 9, lambda entry: entry, snap.offline)
        assert [t["Partitions"] for t in kept] == [t["Partitions"] for t in answer["Topics"]]
        return {(t["Name"], p["PartitionIndex"]): p["OfflineReplicas"] for t in answer["Topics"] for p in t["Partitions"]}

    await node.update_metadata([1, 2], view(T0, isr=(1,)), view(T1, isr=(1, 2)),
                               offline=[["t", 0, [2]]])  # broker 3 is not live; 2's replica of t-0 failed
    assert offline_of(M.snapshot(node.broker)) == {("t", 0): [2, 3], ("t", 1): [3]}
    await node.update_metadata([1, 2], view(T1, epoch=1, isr=(1,)))  # another partition: t-0 unchanged
    assert offline_of(M.snapshot(node.broker)) == {("t", 0): [2, 3], ("t", 1): [3]}
    await node.update_metadata([1, 2, 3], view(T0, epoch=1, isr=(1, 3)))  # broker 2 restarted: none listed
    assert offline_of(M.snapshot(node.broker)) == {("t", 0): [], ("t", 1): []}


async def test_a_new_registrations_first_update_metadata_replaces_the_partitions(node):
    """A broker away while t-1's topic was deleted (paused past its session, re-registered) never
    got the leader -2 that removes it; the controller's UpdateMetadata for its new registration
    lists every partition, and nothing else stays (the chaos soak found t-1 served for good)."""
    node.broker.set_broker_epoch(100)
    await node.update_metadata([1, 2], view(T0), view(T1, leader=2, isr=(2,)), broker_epoch=100)
    await node.update_metadata([1, 2], view(T0, epoch=1), broker_epoch=100)  # same registration: merged
    assert sorted(node.broker.metadata()["partitions"]) == ["t-0", "t-1"]
    node.broker.set_broker_epoch(140)
    await node.update_metadata([1, 2], view(T0, epoch=2), broker_epoch=140)  # a new one: replaced
    assert node.broker.metadata()["partitions"] == {
        "t-0": {"leader": 1, "leader_epoch": 2, "isr": [1], "replicas": [1, 2, 3]}}
    await node.update_metadata([1, 2], view(T1, leader=2, isr=(2,)), broker_epoch=140)  # merged again
    assert sorted(node.broker.metadata()["partitions"]) == ["t-0", "t-1"]
    await node.update_metadata([1, 2], view(T0, epoch=3))  # -1 (unknown): merged, as before
    assert sorted(node.broker.metadata()["partitions"]) == ["t-0", "t-1"]


async def test_a_large_update_metadata_is_seen_whole_or_not_at_all(node):
    """The broker yields while it applies a big UpdateMetadata; what a reader sees meanwhile (the
    Kafka listener answers Metadata from the cache, and keeps its answer per generation) is the
    cache before or after the request, never half of it."""
    from adapters.broker.broker import YIELD_EVERY

    tps = [TopicPartition("big", p) for p in range(3 * YIELD_EVERY)]
    await node.update_metadata([1, 2], *(view(tp, leader=1) for tp in tps), controller_epoch=3)
    seen = []
    done = asyncio.Event()

    async def read():
        while not done.is_set():
            cache = node.broker._meta_partitions
            seen.append((node.broker.metadata_generation, sum(1 for tp in tps if cache[tp].leader == 2)))
            await asyncio.sleep(0)

    reader = asyncio.create_task(read())
    await node.update_metadata([1, 2], *(view(tp, leader=2, epoch=1) for tp in tps), controller_epoch=3)
    done.set()
    await reader
    before = seen[0][0]
    assert {moved for _, moved in seen} <= {0, len(tps)}
    assert all(moved == (len(tps) if gen > before else 0) for gen, moved in seen)
    assert sum(1 for tp in tps if node.broker._meta_partitions[tp].leader == 2) == len(tps)


async def test_metadata_request_answers_the_cache_over_the_channel_and_changes_nothing(node):
    await node.update_metadata([1, 2], view(T0, isr=(1, 2)), controller_epoch=3)
    whole = node.broker.metadata()
    assert await node.client.request(Q.METADATA, {}, timeout=5) == whole
    assert await node.client.request(Q.METADATA, {"topics": None}, timeout=5) == whole
    assert (await node.client.request(Q.METADATA, {"topics": ["other"]}, timeout=5))["partitions"] == {}
    answer = await node.client.request(Q.METADATA, {"topics": "t"}, timeout=5)
    assert answer["error"] == "INVALID_REQUEST" and "topics" in answer["message"]
    assert node.broker.metadata() == whole and node.broker.controller_epoch == 3


# -- the leader's ISR -------------------------------------------------------------------------------


async def test_live_followers_join_the_isr_after_the_catch_up_delay(node, zk):
    for tp in (T0, T1):
        await create_state(zk, tp, LeaderIsr(1, 4, (1,), 2))
    started = time.monotonic()
    # the state was written by controller epoch 2; this request comes from epoch 3
    await node.leader_and_isr(view(T0, epoch=4, isr=(1,), replicas=(1, 2), controller_epoch=2),
                              view(T1, epoch=4, isr=(1,), replicas=(1, 2), controller_epoch=2), controller_epoch=3)
    await node.update_metadata([1, 2], controller_epoch=3)

    async def joined():
        states = [await read_state(zk, tp) for tp in (T0, T1)]
        return states if all(s.isr == (1, 2) for s in states) else None

    states = await eventually(joined)
    assert time.monotonic() - started >= CATCH_UP_MS / 1000
    # the expected version was used, and leader, leader epoch and controller epoch are kept
    assert states == [LeaderIsr(1, 4, (1, 2), 2, 1), LeaderIsr(1, 4, (1, 2), 2, 1)]
    # both partitions changed together: one notification
    notes = await eventually(lambda: notifications(zk))
    assert notes == [{"version": 1, "partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}]
    names = await zk.get_children(zkpaths.ISR_CHANGE_NOTIFICATION)
    assert [len(zkpaths.isr_change_sequence(n)) for n in names] == [10]
    assert node.replica(T0)["isr"] == [1, 2] and node.replica(T0)["zk_version"] == 1
    metrics = node.broker.metrics()
    assert (metrics["isr_expands"], metrics["isr_writes"], metrics["isr_notifications"]) == (2, 2, 1)
    # nothing more happens: no rewrite, no second notification
    await asyncio.sleep(CATCH_UP_MS / 1000 * 2)
    assert (await read_state(zk, T0)).zk_version == 1 and len(await notifications(zk)) == 1


async def test_a_follower_that_goes_away_is_dropped_but_the_isr_never_empties(node, zk):
    await create_state(zk, T0, LeaderIsr(1, 0, (1, 2, 3), 1))
    await node.leader_and_isr(view(T0, isr=(1, 2, 3)))
    await node.update_metadata([1, 2, 3])
    await asyncio.sleep(0.05)
    gone_at = time.monotonic()
    await node.update_metadata([1])  # brokers 2 and 3 died
    state = await eventually(lambda: _isr_is(zk, T0, (1,)), timeout=LAG_MS / 1000 + 5)
    assert time.monotonic() - gone_at >= LAG_MS / 1000
    assert state == LeaderIsr(1, 0, (1,), 1, 1)
    assert await eventually(lambda: notifications(zk)) == \
        [{"version": 1, "partitions": [{"topic": "t", "partition": 0}]}]
    await node.update_metadata([])  # even a metadata without the leader itself
    await asyncio.sleep(2 * LAG_MS / 1000)
    assert await read_state(zk, T0) == LeaderIsr(1, 0, (1,), 1, 1)  # the leader stays, nothing rewritten
    assert node.broker.metrics()["isr_shrinks"] == 1


async def _isr_is(zk, tp, isr):
    state = await read_state(zk, tp)
    return state if state.isr == isr else None


async def test_a_returning_follower_before_the_lag_time_stays(node, zk):
    await create_state(zk, T0, LeaderIsr(1, 0, (1, 2), 1))
    await node.leader_and_isr(view(T0, isr=(1, 2), replicas=(1, 2)))
    await node.update_metadata([1, 2])
    await node.update_metadata([1])
    await asyncio.sleep(LAG_MS / 1000 / 3)
    await node.update_metadata([1, 2])
    await asyncio.sleep(LAG_MS / 1000)
    assert await read_state(zk, T0) == LeaderIsr(1, 0, (1, 2), 1, 0)


async def test_bad_version_with_a_newer_leader_epoch_stops_leading(node, zk):
    await create_state(zk, T0, LeaderIsr(1, 0, (1,), 1))
    await node.leader_and_isr(view(T0, isr=(1,), replicas=(1, 2)))
    await node.update_metadata([1, 2])
    # before the follower has caught up, the controller moves leadership to broker 2
    controller_write = LeaderIsr(2, 1, (2,), 1)
    await zk.set(zkpaths.partition_state("t", 0), zkdata.encode_partition_state(controller_write), 0)
    await eventually(lambda: _async(node.broker.metrics()["isr_write_conflicts"] == 1))
    assert node.replica(T0)["role"] == "follower" and node.replica(T0)["leader_epoch"] == 0
    assert await read_state(zk, T0) == controller_write.with_version(1)  # untouched
    await asyncio.sleep(3 * CATCH_UP_MS / 1000)  # no blind retry
    assert node.broker.metrics()["isr_write_conflicts"] == 1 and node.broker.metrics()["isr_writes"] == 0
    assert await notifications(zk) == []
    # the LeaderAndIsr with the new epoch is still accepted
    assert await node.leader_and_isr(view(T0, leader=2, epoch=1, isr=(2,), replicas=(1, 2), zk_version=1)) == \
        {"partition_errors": []}
    assert node.replica(T0)["leader"] == 2


async def test_bad_version_because_our_write_already_landed_counts_as_written(node, zk):
    await create_state(zk, T0, LeaderIsr(1, 0, (1,), 1))
    await node.leader_and_isr(view(T0, isr=(1,), replicas=(1, 2)))
    await node.update_metadata([1, 2])
    # exactly what the leader is about to write is already there (a write whose answer was lost)
    await zk.set(zkpaths.partition_state("t", 0), zkdata.encode_partition_state(LeaderIsr(1, 0, (1, 2), 1)), 0)
    await eventually(lambda: _async(node.replica(T0)["isr"] == [1, 2]))
    assert node.replica(T0)["zk_version"] == 1 and node.replica(T0)["role"] == "leader"
    assert await eventually(lambda: notifications(zk)) == \
        [{"version": 1, "partitions": [{"topic": "t", "partition": 0}]}]
    assert node.broker.metrics()["isr_write_conflicts"] == 0


async def test_a_deleted_state_znode_stops_leading(node, zk):
    await create_state(zk, T0, LeaderIsr(1, 0, (1,), 1))
    await node.leader_and_isr(view(T0, isr=(1,), replicas=(1, 2)))
    await zk.delete_recursive(zkpaths.topic("t"))
    await node.update_metadata([1, 2])
    await eventually(lambda: _async(node.replica(T0)["role"] == "follower"))
    assert await zk.exists(zkpaths.partition_state("t", 0)) is None  # never recreated


async def _async(value):
    return value


async def test_a_service_can_plug_in_its_own_replica_manager(zk):
    from adapters.broker.replica_manager import ReplicaManagerBase
    from adapters.control.framing import Frame

    class Recording(ReplicaManagerBase):
        def __init__(self):
            self.calls = []

        def become_leader(self, view):
            self.calls.append(("leader", str(view.tp), view.leader_epoch))

        def become_follower(self, view):
            self.calls.append(("follower", str(view.tp), view.leader_epoch))

        def stop_replica(self, tp, delete):
            if tp.topic == "broken":
                raise OSError("disk gone")
            self.calls.append(("stop", str(tp), delete))

        def partitions(self):
            return {}

    rm = Recording()
    broker = Broker(ME, zk, replica_manager=rm)
    lai = C.SendLeaderAndIsr(broker_id=ME, broker_epoch=-1, controller_epoch=1,
                             partitions=(view(T0, epoch=1), view(T1, leader=2, epoch=1)), live_leaders=())
    assert await broker.handle(Frame(Q.LEADER_AND_ISR, 1, False, Q.leader_and_isr_body(lai, 0))) == \
        {"partition_errors": []}
    stop = C.SendStopReplica(broker_id=ME, broker_epoch=-1, controller_epoch=1, delete=True,
                             partitions=(T0, TopicPartition("broken", 0)))
    assert await broker.handle(Frame(Q.STOP_REPLICA, 2, False, Q.stop_replica_body(stop, 0))) == \
        {"partition_errors": [["broken", 0, "UNKNOWN_SERVER_ERROR"]]}
    assert rm.calls == [("leader", "t-0", 1), ("follower", "t-1", 1), ("stop", "t-0", True)]
    assert broker.metrics()["replicas"] == {}
    assert await broker.update_isr() is False  # the base class never proposes ISR changes


async def test_a_large_leader_and_isr_is_applied_with_the_collector_paused_and_the_grown_broker_frozen_later(
        zk, monkeypatch):
    """A LeaderAndIsr above DECODE_IN_THREAD partitions is applied with the cyclic collector off
    (its allocations would trigger collections that walk every replica the broker holds), a small
    one with it on; once the broker holds FREEZE_FROM partitions and is quiet for FREEZE_QUIET_S,
    what it holds is frozen out of the collector's scans (one freeze per doubling)."""
    import gc

    from adapters.broker import broker as broker_module
    from adapters.broker.replica_manager import ReplicaManagerBase
    from adapters.control.framing import Frame
    from adapters.runtime import gcpause

    class Recording(ReplicaManagerBase):
        def __init__(self):
            self.collector_on = []

        def become_leader(self, view):
            self.collector_on.append(gc.isenabled())

        become_follower = become_leader

        def stop_replica(self, tp, delete):
            pass

        def partitions(self):
            return {}

    monkeypatch.setattr(broker_module, "DECODE_IN_THREAD", 50)
    monkeypatch.setattr(broker_module, "FREEZE_FROM", 100)
    monkeypatch.setattr(broker_module, "FREEZE_QUIET_S", 0.05)
    freezes = []
    monkeypatch.setattr(broker_module.heap, "freeze_survivors", lambda: freezes.append(1) or (0, 0, None))
    assert gc.isenabled()
    rm = Recording()
    broker = Broker(ME, zk, replica_manager=rm)

    async def lai(n, epoch):
        views = tuple(view(TopicPartition("t", p), epoch=epoch) for p in range(n))
        c = C.SendLeaderAndIsr(broker_id=ME, broker_epoch=-1, controller_epoch=1, partitions=views, live_leaders=())
        return await broker.handle(Frame(Q.LEADER_AND_ISR, 1, False, Q.leader_and_isr_body(c, 0)))

    assert await lai(40, 1) == {"partition_errors": []}
    assert rm.collector_on == [True] * 40 and gc.isenabled()
    rm.collector_on.clear()
    assert await lai(80, 2) == {"partition_errors": []}  # large, but 80 partitions held: below FREEZE_FROM
    assert rm.collector_on == [False] * 80 and gc.isenabled()
    await asyncio.sleep(0.15)
    assert freezes == []
    gcpause.pause()  # as the node's controller does for a burst of work
    try:
        assert await lai(150, 3) == {"partition_errors": []}
        assert not freezes  # not while requests come: after the quiet
        await asyncio.sleep(0.15)
        assert not freezes  # nor during another holder's pause
    finally:
        gcpause.resume()
    await asyncio.sleep(0.15)
    assert freezes == [1] and broker._frozen_size == 150
    assert await lai(250, 4) == {"partition_errors": []}  # grown, but not doubled
    await asyncio.sleep(0.15)
    assert freezes == [1]
    broker.close()
