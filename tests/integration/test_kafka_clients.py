"""Stock Kafka clients (librdkafka through confluent-kafka) against real `kctl node` processes.

Each node's PLAINTEXT port speaks Kafka's protocol (adapters/kafka): the AdminClient's metadata
must equal ZooKeeper's state, follow a SIGKILLed leader, and its admin requests must create,
grow, describe and delete topics and elect leaders with Kafka 2.4's results.
"""
from __future__ import annotations

import asyncio

import pytest

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import LocalCluster, controller, live_broker_ids, partition_states, wait_for
from benchmarks.client_visible import PinnedClient
from controller_core.values import ReplicaAssignment, TopicPartition

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
)

SESSION_MS = 2000


async def start(local, admin, ids=(1, 2, 3)) -> dict[int, int]:
    """Start nodes; return {broker id: port} once all are registered and a controller is elected."""
    for i in ids:
        local.start_node(i, rack=f"r{i}")
    await wait_for(lambda: _registered(admin, ids), timeout=60, what=f"brokers {ids} registered")
    await wait_for(lambda: _has_controller(admin), timeout=30, what="a controller")
    port_of = await ports(admin)
    for port in port_of.values():  # every broker's cache has had the controller's UpdateMetadata
        await wait_for(lambda: _knows_cluster(port, set(ids)), timeout=30, what="brokers' metadata caches filled")
    return port_of


async def _knows_cluster(port, ids):
    md = await in_thread(lambda: client(port).list_topics(timeout=10))
    return set(md.brokers) == ids and md.controller_id in ids


async def _registered(admin, ids):
    return set(ids) <= set(await live_broker_ids(admin))


async def _has_controller(admin):
    return (await controller(admin))[0] is not None


async def ports(admin) -> dict[int, int]:
    out = {}
    for b in await live_broker_ids(admin):
        data, stat = await admin.get(zkpaths.broker(b))
        out[b] = zkdata.decode_broker(b, data, stat.czxid).port
    return out


def client(port: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "socket.timeout.ms": 10000})


async def in_thread(fn, *args):
    return await asyncio.to_thread(fn, *args)


def seen(md) -> dict:
    """A ClusterMetadata as plain values: controller, brokers, and per partition
    (leader, replicas, isr)."""
    return {
        "controller": md.controller_id,
        "brokers": {b.id: (b.host, b.port) for b in md.brokers.values()},
        "partitions": {TopicPartition(t.topic, p.id): (p.leader, list(p.replicas), list(p.isrs))
                       for t in md.topics.values() for p in t.partitions.values()},
    }


async def zk_view(admin) -> dict:
    holder, _ = await controller(admin)
    states = await partition_states(admin)
    out = {}
    for tp, li in states.items():
        data, _ = await admin.get(zkpaths.topic(tp.topic))
        replicas = zkdata.decode_topic_assignment(data)[tp.partition].replicas
        out[tp] = (li.leader, list(replicas), list(li.isr))
    return {"controller": holder, "partitions": out}


async def metadata_equals_zookeeper(admin, port) -> dict | None:
    md = seen(await in_thread(lambda: client(port).list_topics(timeout=10)))
    z = await zk_view(admin)
    if md["controller"] == z["controller"] and md["partitions"] == z["partitions"]:
        return md
    return None


async def test_list_topics_sees_brokers_controller_and_zookeepers_states_then_follows_a_sigkill(local, admin):
    port_of = await start(local, admin)
    await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment(
        {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1)), 2: ReplicaAssignment((3, 1, 2))}))
    await wait_for(lambda: _all_led(admin, "t", 3), what="t created")
    for b, port in port_of.items():  # every broker's own cache, through a stock client
        md = await wait_for(lambda: metadata_equals_zookeeper(admin, port), timeout=30,
                            what=f"broker {b}'s metadata equal to ZooKeeper")
        assert md["brokers"] == {i: ("127.0.0.1", p) for i, p in port_of.items()}
        assert set(md["partitions"]) == {TopicPartition("t", p) for p in range(3)}
    victim = (await partition_states(admin, "t"))[TopicPartition("t", 0)].leader
    local.kill(victim)
    survivor = next(b for b in port_of if b != victim)
    md = await wait_for(lambda: _moved(admin, port_of[survivor], victim), timeout=60,
                        what="metadata without the killed leader")
    assert victim not in md["brokers"]
    assert md["partitions"][TopicPartition("t", 0)][0] not in (victim, -1)
    # the failover benchmark's poller: librdkafka asks a broker of its choosing, so it is made
    # again until it settles on the one chosen; then every answer comes from that broker
    pinned = PinnedClient(f"127.0.0.1:{port_of[survivor]}", survivor)
    await in_thread(pinned.pin)
    answers = await in_thread(lambda: [pinned.list_topics().orig_broker_id for _ in range(10)])
    assert set(answers) <= {survivor, -1}, answers  # -1: the bootstrap connection, to the same broker


async def _all_led(admin, topic, n):
    states = await partition_states(admin, topic)
    return len(states) == n and all(li.leader >= 0 for li in states.values())


async def _moved(admin, port, victim):
    md = await metadata_equals_zookeeper(admin, port)
    if md is None or victim in md["brokers"]:
        return None
    if any(leader == victim for leader, _, _ in md["partitions"].values()):
        return None
    return md


async def test_admin_client_creates_grows_describes_and_deletes_topics(local, admin):
    port_of = await start(local, admin)
    a = client(next(iter(port_of.values())))

    def create(*topics, **kw):
        return {t: _outcome(f) for t, f in a.create_topics(list(topics), operation_timeout=30, **kw).items()}

    # validate_only writes nothing
    assert await in_thread(lambda: create(NewTopic("dry", 4, 3), validate_only=True)) == {"dry": None}
    assert await admin.exists(zkpaths.topic("dry")) is None
    # Kafka's placement, configs, explicit assignments
    out = await in_thread(lambda: create(NewTopic("placed", 6, 3, config={"retention.ms": "1000"}),
                                         NewTopic("manual", num_partitions=2, replica_assignment=[[3, 1], [1, 2]])))
    assert out == {"placed": None, "manual": None}
    data, _ = await admin.get(zkpaths.topic("manual"))
    assert {p: ra.replicas for p, ra in zkdata.decode_topic_assignment(data).items()} == {0: (3, 1), 1: (1, 2)}
    data, _ = await admin.get(zkpaths.config_topic("placed"))
    assert zkdata.decode_topic_config(data) == {"retention.ms": "1000"}
    states = await partition_states(admin, "placed")
    assert len(states) == 6 and all(li.leader >= 0 for li in states.values())  # answered after the leaders
    # Kafka's error codes
    errors = await in_thread(lambda: create(NewTopic("placed", 1, 1), NewTopic("big", 1, 4),
                                            NewTopic("bad", 1, 1, config={"retention.ms": "x"}),
                                            NewTopic("no/slash", 1, 1)))
    assert errors == {"placed": KafkaError.TOPIC_ALREADY_EXISTS, "big": KafkaError.INVALID_REPLICATION_FACTOR,
                      "bad": KafkaError.INVALID_CONFIG, "no/slash": KafkaError.TOPIC_EXCEPTION}

    # CreatePartitions
    grown = await in_thread(lambda: {t: _outcome(f) for t, f in a.create_partitions(
        [NewPartitions("placed", 8), NewPartitions("manual", 1)], operation_timeout=30).items()})
    assert grown == {"placed": None, "manual": KafkaError.INVALID_PARTITIONS}
    assert len(await partition_states(admin, "placed")) == 8

    # DescribeConfigs: topic and broker
    res = await in_thread(lambda: {r.name: f.result() for r, f in a.describe_configs(
        [ConfigResource("topic", "placed"), ConfigResource("broker", "1")]).items()})
    assert res["placed"]["retention.ms"].value == "1000" and not res["placed"]["retention.ms"].is_default
    assert res["placed"]["cleanup.policy"].value == "delete" and res["placed"]["cleanup.policy"].is_default
    assert res["1"]["unclean.leader.election.enable"].value == "false"

    # DeleteTopics: answered once the brokers dropped the topic
    deleted = await in_thread(lambda: {t: _outcome(f) for t, f in a.delete_topics(
        ["manual", "nosuch"], operation_timeout=30).items()})
    assert deleted == {"manual": None, "nosuch": KafkaError.UNKNOWN_TOPIC_OR_PART}
    md = await in_thread(lambda: a.list_topics(timeout=10))
    assert "manual" not in md.topics
    await wait_for(lambda: _gone(admin, "manual"), what="the deletion completes in ZooKeeper")


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
async def test_admin_client_alters_configs_incrementally_and_whole(local, admin):
    """IncrementalAlterConfigs and AlterConfigs from a stock client: the overrides land in
    ZooKeeper as `kctl configs --alter` writes them, with the change notification that makes
    every broker re-read them, and bad changes get Kafka 2.4's error codes with nothing written."""
    port_of = await start(local, admin)
    a = client(port_of[1])
    created = await in_thread(lambda: {t: _outcome(f) for t, f in a.create_topics(
        [NewTopic("cfg", 1, 1, config={"retention.ms": "1000", "segment.ms": "60000"})], operation_timeout=30).items()})
    assert created == {"cfg": None}

    def op(name, value, kind):
        return ConfigEntry(name, value, incremental_operation=kind)

    def incremental(*resources, **kw):
        return {(r.restype.name, r.name): _outcome(f) for r, f in a.incremental_alter_configs(list(resources), **kw).items()}

    async def overrides(path):
        data, _ = await admin.get(path)
        return zkdata.decode_topic_config(data)

    notified = len(await admin.get_children("/config/changes"))
    out = await in_thread(lambda: incremental(ConfigResource("topic", "cfg", incremental_configs=[
        op("retention.ms", "2000", AlterConfigOpType.SET),
        op("segment.ms", None, AlterConfigOpType.DELETE),
        op("cleanup.policy", "compact", AlterConfigOpType.APPEND),
        op("leader.replication.throttled.replicas", "0:1", AlterConfigOpType.APPEND)])))
    assert out == {("TOPIC", "cfg"): None}
    assert await overrides(zkpaths.config_topic("cfg")) == {
        "retention.ms": "2000", "cleanup.policy": "compact", "leader.replication.throttled.replicas": "0:1"}
    assert len(await admin.get_children("/config/changes")) == notified + 1  # the brokers are told

    # a broker's own overrides (librdkafka sends them to that broker; it refuses an empty name,
    # the cluster default, which `kctl configs --entity-default` sets)
    holder = (await controller(admin))[0]
    b = client(port_of[holder])
    out = await in_thread(lambda: {(r.restype.name, r.name): _outcome(f) for r, f in b.incremental_alter_configs([
        ConfigResource("broker", str(holder), incremental_configs=[
            op("unclean.leader.election.enable", "False", AlterConfigOpType.SET)])]).items()})
    assert out == {("BROKER", str(holder)): None}
    assert await overrides(f"/config/brokers/{holder}") == {"unclean.leader.election.enable": "false"}
    res = await in_thread(lambda: {r.name: f.result() for r, f in b.describe_configs(
        [ConfigResource("broker", str(holder))]).items()})
    assert res[str(holder)]["unclean.leader.election.enable"].value == "false"

    # Kafka's refusals, nothing written
    before = await overrides(zkpaths.config_topic("cfg"))
    got = await in_thread(lambda: incremental(
        ConfigResource("topic", "nosuch", incremental_configs=[op("retention.ms", "1", AlterConfigOpType.SET)])))
    assert got == {("TOPIC", "nosuch"): KafkaError.UNKNOWN_TOPIC_OR_PART}
    for bad, code in ((op("retention.ms", "soon", AlterConfigOpType.SET), KafkaError.INVALID_REQUEST),
                      (op("no.such.key", "1", AlterConfigOpType.SET), KafkaError.INVALID_CONFIG),
                      (op("retention.ms", "1", AlterConfigOpType.APPEND), KafkaError.INVALID_REQUEST)):
        got = await in_thread(lambda: incremental(ConfigResource("topic", "cfg", incremental_configs=[bad])))
        assert got == {("TOPIC", "cfg"): code}, bad
    got = await in_thread(lambda: incremental(ConfigResource("broker", str(holder), incremental_configs=[
        op("num.partitions", "3", AlterConfigOpType.SET)])))
    assert got == {("BROKER", str(holder)): KafkaError.INVALID_REQUEST}  # not a key the cluster follows at run time
    assert await overrides(zkpaths.config_topic("cfg")) == before
    assert await overrides(f"/config/brokers/{holder}") == {"unclean.leader.election.enable": "false"}
    # validate_only checks and writes nothing
    got = await in_thread(lambda: incremental(ConfigResource("topic", "cfg", incremental_configs=[
        op("retention.ms", "5", AlterConfigOpType.SET)]), validate_only=True))
    assert got == {("TOPIC", "cfg"): None} and await overrides(zkpaths.config_topic("cfg")) == before

    # AlterConfigs replaces the overrides whole
    out = await in_thread(lambda: {r.name: _outcome(f) for r, f in a.alter_configs(
        [ConfigResource("topic", "cfg", set_config={"retention.ms": "3000"})]).items()})
    assert out == {"cfg": None}
    assert await overrides(zkpaths.config_topic("cfg")) == {"retention.ms": "3000"}


async def _gone(admin, topic):
    return await admin.exists(zkpaths.topic(topic)) is None


def _outcome(future):
    try:
        future.result()
        return None
    except KafkaException as exc:
        return exc.args[0].code()


async def test_admin_client_elects_preferred_and_unclean_leaders(zk_connect, tmp_path, admin):
    settings = {"zookeeper.session.timeout.ms": str(SESSION_MS), "auto.leader.rebalance.enable": "false",
                "replica.catch.up.delay.ms": "100", "replica.lag.time.max.ms": "1000"}
    with LocalCluster(zk_connect, tmp_path, settings=settings) as local:
        port_of = await start(local, admin)
        holder, _ = await controller(admin)
        others = [b for b in (1, 2, 3) if b != holder]
        p, q = others  # neither is the controller: killing them keeps the controller in place
        await admin.create(zkpaths.topic("e"), zkdata.encode_topic_assignment(
            {0: ReplicaAssignment((p, q, holder)), 1: ReplicaAssignment((holder, p, q))}))
        await admin.create(zkpaths.topic("u"), zkdata.encode_topic_assignment({0: ReplicaAssignment((q, p))}))
        await wait_for(lambda: _isr_size(admin, TopicPartition("e", 0), 3), what="e-0 fully replicated")
        a = client(port_of[holder])

        def elect(kind, tps):
            result = a.elect_leaders(kind, tps).result()  # (its timeout keywords fail inside confluent-kafka 2.16)
            return {(tp.topic, tp.partition): (None if e is None else (e.code() if isinstance(e, KafkaError) else e.args[0].code())) for tp, e in result.items()}

        # the preferred leader p goes away and comes back: leadership stays with the next replica
        local.kill(p)
        await wait_for(lambda: _leader_not(admin, TopicPartition("e", 0), p), timeout=30, what="e-0 moved")
        local.start_node(p, rack=f"r{p}")
        # the controller learns ISR changes from the notifications: wait until its UpdateMetadata says so
        await wait_for(lambda: _client_isr(port_of[holder], "e", 0, 3), timeout=60, what="p back in the ISR")
        from confluent_kafka import ElectionType
        from confluent_kafka import TopicPartition as CTP
        out = await in_thread(lambda: elect(ElectionType.PREFERRED, [CTP("e", 0), CTP("e", 1), CTP("nosuch", 0)]))
        assert out == {("e", 0): None, ("e", 1): KafkaError.ELECTION_NOT_NEEDED,
                       ("nosuch", 0): KafkaError.UNKNOWN_TOPIC_OR_PART}
        assert (await partition_states(admin, "e"))[TopicPartition("e", 0)].leader == p
        md = await in_thread(lambda: client(port_of[holder]).list_topics(timeout=10))
        assert md.topics["e"].partitions[0].leader == p  # answered after the brokers learnt it

        # u-0: q leads, p drops out of the ISR, q dies: no clean leader; p returns out of sync
        local.kill(p)
        await wait_for(lambda: _client_isr(port_of[holder], "u", 0, 1), timeout=30, what="p out of u-0's ISR")
        local.kill(q)
        await wait_for(lambda: _leader_is(admin, TopicPartition("u", 0), -1), timeout=30, what="u-0 leaderless")
        local.start_node(p, rack=f"r{p}")
        await wait_for(lambda: _registered(admin, (holder, p)), timeout=60, what="p back")
        await asyncio.sleep(1)
        assert (await partition_states(admin, "u"))[TopicPartition("u", 0)].leader == -1  # unclean is off
        out = await in_thread(lambda: elect(ElectionType.PREFERRED, [CTP("u", 0)]))
        assert out == {("u", 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE}
        out = await in_thread(lambda: elect(ElectionType.UNCLEAN, [CTP("u", 0)]))
        assert out == {("u", 0): None}
        assert (await partition_states(admin, "u"))[TopicPartition("u", 0)].leader == p


async def _isr_size(admin, tp, n):
    li = (await partition_states(admin, tp.topic)).get(tp)
    return li is not None and li.leader >= 0 and len(li.isr) == n


async def _client_isr(port, topic, partition, size):
    md = await in_thread(lambda: client(port).list_topics(timeout=10))
    t = md.topics.get(topic)
    return t is not None and partition in t.partitions and len(t.partitions[partition].isrs) == size


async def _leader_is(admin, tp, leader):
    li = (await partition_states(admin, tp.topic)).get(tp)
    return li is not None and li.leader == leader


async def _leader_not(admin, tp, broker):
    li = (await partition_states(admin, tp.topic)).get(tp)
    return li is not None and li.leader not in (broker, -1)


async def test_controller_only_requests_at_another_broker_get_not_controller(local, admin):
    from adapters.kafka import protocol as K

    port_of = await start(local, admin)
    holder, _ = await controller(admin)
    other = next(b for b in port_of if b != holder)

    async def ask(frame: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of[other])
        try:
            writer.write(frame)
            (n,) = __import__("struct").unpack(">i", await reader.readexactly(4))
            return await reader.readexactly(n)
        finally:
            writer.close()

    create = K.request_frame(K.API_CREATE_TOPICS, 5, 1, {"Topics": [
        {"Name": "x", "NumPartitions": 1, "ReplicationFactor": 1, "Assignments": [], "Configs": []}],
        "timeoutMs": 1000})
    _, body = K.parse_response(K.API_CREATE_TOPICS, 5, await ask(create))
    assert [(t["Name"], t["ErrorCode"]) for t in body["Topics"]] == [("x", K.NOT_CONTROLLER)]
    elect = K.request_frame(K.API_ELECT_LEADERS, 2, 2, {"ElectionType": 0, "TopicPartitions": [
        {"Topic": "x", "PartitionId": [0]}], "TimeoutMs": 1000})
    _, body = K.parse_response(K.API_ELECT_LEADERS, 2, await ask(elect))
    assert body["ReplicaElectionResults"][0]["PartitionResult"][0]["ErrorCode"] == K.NOT_CONTROLLER
    delete = K.request_frame(K.API_DELETE_TOPICS, 4, 3, {"TopicNames": ["x"], "TimeoutMs": 1000})
    _, body = K.parse_response(K.API_DELETE_TOPICS, 4, await ask(delete))
    assert body["Responses"] == [{"Name": "x", "ErrorCode": K.NOT_CONTROLLER}]
    assert await admin.exists(zkpaths.topic("x")) is None
