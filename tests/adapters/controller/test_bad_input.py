"""Garbage in every znode the controller watches, through a live controller on a real ZooKeeper.

Each bad input must give exactly one clear log line naming what was wrong, be removed or ignored
as Kafka 2.4 does (a malformed `/admin/reassign_partitions` or `/admin/preferred_replica_election`
is deleted, a deletion request for an unknown topic is deleted, a bad topic znode is left alone),
change nothing in the cluster, never crash or stall the controller, and a good request made right
after must complete. Generated garbage (Hypothesis) is in test_bad_input_generated.py.

The tests of this module share one cluster (starting three nodes costs more than most of them):
each uses topics of its own and leaves nothing behind that could make another one's node log.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid

import pytest
import pytest_asyncio

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import partition_states, wait_for
from adapters.node import ClusterNode, NodeConfig
from adapters.zookeeper.session import ZkSession
from controller_core.values import ReplicaAssignment, TopicPartition

FAST = {"zookeeper.session.timeout.ms": "4000", "auto.leader.rebalance.enable": "false",
        "replica.catch.up.delay.ms": "100", "replica.lag.time.max.ms": "3000"}
HUGE = 1_000_000  # close to ZooKeeper's default jute.maxbuffer (1 MiB), which bounds a znode's data


class LiveCluster:
    """Three in-process nodes on the test's chroot, an admin session, and the log records."""

    def __init__(self, nodes, admin: ZkSession, caplog):
        self.nodes = nodes
        self.admin = admin
        self.caplog = caplog

    @property
    def controller(self) -> ClusterNode:
        found = [n for n in self.nodes if n.active and n.loop.state.active]
        assert len(found) == 1, "exactly one active controller"
        return found[0]

    def mark(self) -> int:
        return len(self.caplog.records)

    def complaints(self, since: int, level: int = logging.WARNING) -> list[str]:
        return [r.getMessage() for r in self.caplog.records[since:] if r.levelno >= level]

    async def settle(self) -> None:
        """The controller is alive and works through its queue: never crashed, never stalled."""
        for node in self.nodes:
            assert node.crashed is None, f"node {node.broker_id} crashed: {node.crashed!r}"
        ctrl = self.controller
        await asyncio.wait_for(ctrl.loop.wait_idle(), 15)

    async def one_complaint(self, since: int, expected: str, level: int = logging.ERROR, timeout: float = 10):
        """Wait for the complaint, then check there is exactly one (at `level` or above)."""
        await wait_for(lambda: _now(any(expected in m for m in self.complaints(since, level))), timeout=timeout,
                       what=f"a log line containing {expected!r}")
        await self.settle()
        await asyncio.sleep(0.1)  # a second line for the same input would come right after
        found = self.complaints(since, level)
        assert len(found) == 1 and expected in found[0], found

    async def gone(self, path: str, timeout: float = 15) -> None:
        await wait_for(lambda: _absent(self.admin, path), timeout=timeout, what=f"{path} removed")


async def _now(value):
    return value


async def _absent(admin: ZkSession, path: str) -> bool:
    return await admin.exists(path) is None


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_cluster(zk_server, request, tmp_path_factory):
    """Three nodes on a chroot of this module's own."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.module.__name__.rsplit(".", 1)[-1])
    connect = f"{zk_server.connect_string}/m-{name}-{uuid.uuid4().hex[:8]}"
    base = tmp_path_factory.mktemp(name)
    admin = await ZkSession.connect(connect)
    nodes = []
    try:
        for i in (1, 2, 3):
            node = ClusterNode(NodeConfig(broker_id=i, zookeeper=connect, journal_dir=str(base / f"node-{i}"),
                                          settings=dict(FAST)))
            await node.start()
            nodes.append(node)
        cluster = LiveCluster(nodes, admin, None)
        cluster.connect = connect
        cluster.base = base
        await wait_for(lambda: _now(sum(n.active and n.loop.state.active for n in nodes) == 1), what="a controller")
        yield cluster
    finally:
        for node in nodes:
            if not node._stopping:
                await node.close()
        await admin.close()


@pytest_asyncio.fixture(loop_scope="module")
async def live(shared_cluster, caplog):
    caplog.set_level(logging.INFO)
    shared_cluster.caplog = caplog
    await shared_cluster.settle()  # whatever the previous test left is done
    yield shared_cluster


async def create_topic(admin: ZkSession, topic: str, assignment: list[list[int]]) -> None:
    """What `kctl topics --create` writes: the config znode and the assignment."""
    await admin.create(zkpaths.config_topic(topic), zkdata.encode_topic_config({}), make_parents=True)
    await admin.create(zkpaths.topic(topic), zkdata.encode_topic_assignment(
        {p: ReplicaAssignment(tuple(r)) for p, r in enumerate(assignment)}), make_parents=True)


async def full_isr(admin: ZkSession, topic: str, partitions: int):
    states = await partition_states(admin, topic)
    return len(states) == partitions and all(len(li.isr) > 1 or li.leader >= 0 for li in states.values()) and states


async def assignment_of(admin: ZkSession, topic: str) -> dict:
    data, _ = await admin.get(zkpaths.topic(topic))
    return zkdata.decode_topic_assignment(data)


def entry(topic, partition, replicas) -> dict:
    return {"topic": topic, "partition": partition, "replicas": replicas}


def request(*entries, version=1) -> bytes:
    return json.dumps({"version": version, "partitions": list(entries)}).encode()


# -- /admin/reassign_partitions ----------------------------------------------------------------

REASSIGNMENT_GARBAGE = [
    ("malformed JSON", b'{"version":1,"partitions":[', "not valid JSON"),
    ("not UTF-8", b"\xff\xfe\x00garbage", "not valid UTF-8"),
    ("no data", b"", "the znode has no data"),
    ("a list", b"[1,2,3]", "must be a JSON object"),
    ("unknown version", request(entry("t", 0, [2, 3]), version=2), "version 2 is not supported"),
    ("partitions not a list", b'{"version":1,"partitions":{"t":0}}', "partitions must be a list"),
    ("no partitions", b'{"version":1,"partitions":[]}', "partitions is empty"),
    ("replicas of strings", request(entry("t", 0, ["2", "3"])), "must be a list of integers"),
    ("partition as text", request(entry("t", "0", [2, 3])), "partition must be an integer"),
    ("a boolean broker", request(entry("t", 0, [True, 3])), "must be a list of integers"),
    ("a 40-bit broker id", request(entry("t", 0, [2**40])), "32-bit"),
    ("one partition twice", request(entry("t", 0, [2, 3]), entry("t", 0, [3, 1])), "twice"),
    ("huge garbage", b"[" * HUGE, "not valid JSON"),
    ("unknown topic", request(entry("ghost", 0, [1, 2])), "ghost-0: unknown topic or partition"),
    ("unknown partition", request(entry("t", 7, [1, 2])), "t-7: unknown topic or partition"),
    ("negative partition", request(entry("t", -1, [1, 2])), "t--1: unknown topic or partition"),
    ("empty replica list", request(entry("t", 0, [])), "empty replica list"),
    ("duplicate replicas", request(entry("t", 0, [2, 2])), "duplicate replicas"),
    ("negative broker", request(entry("t", 0, [2, -3])), "invalid broker id"),
    ("unknown broker", request(entry("t", 0, [2, 99])), "unknown broker(s) [99]"),
    ("same replicas", request(entry("t", 0, [1, 2])), "replicas are already [1, 2]"),
]


async def test_garbage_reassignments_are_deleted_and_a_good_one_completes(live):
    admin = live.admin
    await create_topic(admin, "t", [[1, 2]])
    before = await wait_for(lambda: full_isr(admin, "t", 1), what="t-0 online")
    for name, data, expected in REASSIGNMENT_GARBAGE:
        mark = live.mark()
        await admin.create(zkpaths.REASSIGN_PARTITIONS, data, make_parents=True)
        await live.gone(zkpaths.REASSIGN_PARTITIONS)  # Kafka deletes a request it cannot use
        await live.one_complaint(mark, expected)
        assert await assignment_of(admin, "t") == {0: ReplicaAssignment((1, 2))}, name
    assert await partition_states(admin, "t") == before  # nothing changed
    # a good reassignment right after completes
    await admin.create(zkpaths.REASSIGN_PARTITIONS, zkdata.encode_reassignment([(TopicPartition("t", 0), (2, 3))]))
    await live.gone(zkpaths.REASSIGN_PARTITIONS)
    assert await assignment_of(admin, "t") == {0: ReplicaAssignment((2, 3))}
    states = await partition_states(admin, "t")
    assert states[TopicPartition("t", 0)].leader in (2, 3)


# -- /admin/preferred_replica_election ---------------------------------------------------------

PREFERRED_GARBAGE = [
    ("malformed JSON", b"{'partitions': []}", "malformed /admin/preferred_replica_election"),
    ("not UTF-8", b"\xc3\x28", "not valid UTF-8"),
    ("partitions missing", b'{"version":1}', "partitions is missing"),
    ("entry of the wrong type", b'{"version":1,"partitions":["t-0"]}', "partitions[0] must be an object"),
    ("topic as a number", b'{"version":1,"partitions":[{"topic":7,"partition":0}]}', "topic must be a string"),
    ("huge garbage", b"\x00" * HUGE, "malformed /admin/preferred_replica_election"),
    ("unknown topic", zkdata.encode_preferred_replica_election([TopicPartition("ghost", 0)]),
     "ghost-0: UNKNOWN_TOPIC_OR_PARTITION"),
    ("negative partition", b'{"version":1,"partitions":[{"topic":"p","partition":-1}]}',
     "p--1: UNKNOWN_TOPIC_OR_PARTITION"),
]


async def test_garbage_preferred_elections_are_deleted_and_a_good_one_moves_the_leader(live):
    admin = live.admin
    await create_topic(admin, "p", [[1, 2]])
    await wait_for(lambda: full_isr(admin, "p", 1), what="p-0 online")
    # reorder the replicas: the leader (1) stays, the preferred replica becomes 2
    await admin.create(zkpaths.REASSIGN_PARTITIONS, zkdata.encode_reassignment([(TopicPartition("p", 0), (2, 1))]),
                       make_parents=True)
    await live.gone(zkpaths.REASSIGN_PARTITIONS)
    before = await partition_states(admin, "p")
    assert before[TopicPartition("p", 0)].leader == 1
    for name, data, expected in PREFERRED_GARBAGE:
        mark = live.mark()
        await admin.create(zkpaths.PREFERRED_REPLICA_ELECTION, data)
        await live.gone(zkpaths.PREFERRED_REPLICA_ELECTION)
        await live.one_complaint(mark, expected)
    assert await partition_states(admin, "p") == before
    await admin.create(zkpaths.PREFERRED_REPLICA_ELECTION,
                       zkdata.encode_preferred_replica_election([TopicPartition("p", 0)]))
    await live.gone(zkpaths.PREFERRED_REPLICA_ELECTION)
    await wait_for(lambda: _leader_is(admin, TopicPartition("p", 0), 2), what="the preferred leader elected")


async def _leader_is(admin, tp, leader):
    states = await partition_states(admin, tp.topic)
    return tp in states and states[tp].leader == leader


# -- /admin/delete_topics/<topic> --------------------------------------------------------------


async def test_deletion_requests_for_unknown_topics_are_removed_and_data_is_ignored(live):
    admin = live.admin
    await create_topic(admin, "keep", [[1, 2]])
    await create_topic(admin, "doomed", [[2, 3]])
    await wait_for(lambda: full_isr(admin, "doomed", 1), what="doomed online")
    await live.settle()
    for name in ("ghost", "with space", "ünïcødé", "x" * 240, "-1"):
        mark = live.mark()
        await admin.create(zkpaths.delete_topic(name), b"\xff garbage that Kafka never reads", make_parents=True)
        await live.gone(zkpaths.delete_topic(name))
        await live.one_complaint(mark, f"delete non-existing topics {name}")
    assert await admin.exists(zkpaths.topic("keep")) is not None
    # a good deletion right after, its marker carrying garbage data (Kafka ignores the data)
    await admin.create(zkpaths.delete_topic("doomed"), b"\x00\x01{")
    await live.gone(zkpaths.topic("doomed"), timeout=30)
    await live.gone(zkpaths.delete_topic("doomed"))
    assert await admin.exists(zkpaths.topic("keep")) is not None


async def test_a_child_under_a_deletion_marker_does_not_block_the_deletion(live):
    admin = live.admin
    await create_topic(admin, "doomed2", [[2, 3]])
    await wait_for(lambda: full_isr(admin, "doomed2", 1), what="doomed2 online")
    await admin.create(zkpaths.delete_topic("doomed2") + "/stray", b"x", make_parents=True)
    await live.gone(zkpaths.topic("doomed2"), timeout=30)  # the marker's subtree goes with it
    await live.gone(zkpaths.delete_topic("doomed2"))


# -- /brokers/topics/<topic> -------------------------------------------------------------------

TOPIC_GARBAGE = [
    ("malformed JSON", b'{"version":2,"partitions":{"0":[1,2]', "not valid JSON"),
    ("not UTF-8", b'{"partitions":{"0":[1,\xff]}}', "not valid UTF-8"),
    ("a number", b"42", "must be a JSON object"),
    ("partitions missing", b'{"version":2}', "partitions is missing"),
    ("partitions as a list", b'{"version":2,"partitions":[[1,2]]}', "partitions must be an object"),
    ("replicas as text", b'{"version":2,"partitions":{"0":"1,2"}}', "must be a list of integers"),
    ("partition id not a number", b'{"version":2,"partitions":{"zero":[1,2]}}', "not a partition id"),
    ("partition id too big", b'{"version":2,"partitions":{"99999999999":[1]}}', "32-bit"),
    ("key twice", b'{"version":2,"partitions":{"0":[1],"0":[2]}}', "twice"),
    ("adding for an unknown partition", b'{"version":2,"partitions":{"0":[1]},"adding_replicas":{"5":[2]}}',
     "adding_replicas names partition 5"),
    ("huge garbage", b'{"partitions":' + b"9" * HUGE + b"}", "topic assignment"),
    ("no partitions", b'{"version":2,"partitions":{}}', "no partitions"),
    ("gap in partition ids", b'{"version":2,"partitions":{"0":[1],"2":[2]}}', "consecutive"),
    ("empty replica list", b'{"version":2,"partitions":{"0":[]}}', "empty replica list"),
    ("duplicate replicas", b'{"version":2,"partitions":{"0":[1,1]}}', "duplicate replicas"),
    ("negative broker", b'{"version":2,"partitions":{"0":[1,-2]}}', "invalid broker id"),
    ("mixed replication factors", b'{"version":2,"partitions":{"0":[1,2],"1":[3]}}', "inconsistent replication"),
]


async def test_garbage_topic_znodes_are_ignored_and_a_good_topic_is_created_after(live):
    admin = live.admin
    for index, (name, data, expected) in enumerate(TOPIC_GARBAGE):
        topic = f"bad{index}"
        mark = live.mark()
        await admin.create(zkpaths.topic(topic), data, make_parents=True)
        await live.one_complaint(mark, f"topic {topic}")
        assert expected in live.complaints(mark)[0], (name, live.complaints(mark))
        assert await admin.exists(zkpaths.topic(topic)) is not None  # the admin's data is left alone
        assert topic not in live.controller.loop.state.topics
    for index in range(len(TOPIC_GARBAGE)):  # no state znode was created for any of them
        assert await partition_states(admin, f"bad{index}") == {}
        await admin.delete(zkpaths.topic(f"bad{index}"))  # the controller forgets them
    await create_topic(admin, "good", [[1, 2], [2, 3]])
    states = await wait_for(lambda: full_isr(admin, "good", 2), what="good created")
    assert {tp.partition: li.leader for tp, li in states.items()} == {0: 1, 1: 2}


async def test_a_topic_on_unknown_brokers_waits_offline_like_kafka(live):
    admin = live.admin
    await create_topic(admin, "elsewhere", [[98, 99]])
    await create_topic(admin, "good-too", [[3, 1]])
    await wait_for(lambda: full_isr(admin, "good-too", 1), what="good-too created")
    await live.settle()
    assert "elsewhere" in live.controller.loop.state.topics
    assert await partition_states(admin, "elsewhere") == {}  # no live replica to lead it yet
    await admin.delete_recursive(zkpaths.topic("elsewhere"))


# -- /config/topics/<topic> --------------------------------------------------------------------

CONFIG_GARBAGE = [
    ("malformed JSON", b'{"version":1,"config":{', "not valid JSON"),
    ("not UTF-8", b"\xfe\xff", "not valid UTF-8"),
    ("config a list", b'{"version":1,"config":["unclean.leader.election.enable"]}', "config must be an object"),
    ("value a boolean", b'{"version":1,"config":{"unclean.leader.election.enable":true}}', "must be a string"),
    ("huge garbage", b"{" + b" " * HUGE, "not valid JSON"),
    ("unclean neither true nor false", zkdata.encode_topic_config({"unclean.leader.election.enable": "maybe"}),
     "expected true or false"),
]


async def test_garbage_topic_configs_are_ignored_and_a_good_one_applies(live):
    admin = live.admin
    await create_topic(admin, "c", [[1, 2]])
    await wait_for(lambda: full_isr(admin, "c", 1), what="c online")
    await live.settle()
    for name, data, expected in CONFIG_GARBAGE:
        mark = live.mark()
        await admin.set(zkpaths.config_topic("c"), data)
        await live.one_complaint(mark, zkpaths.config_topic("c"))
        assert expected in live.complaints(mark)[0], (name, live.complaints(mark))
        assert live.controller.loop.state.topic_configs.get("c") is None, name
    await admin.set(zkpaths.config_topic("c"), zkdata.encode_topic_config(
        {"unclean.leader.election.enable": "true", "retention.ms": "1000"}))
    await wait_for(lambda: _now(live.controller.loop.state.topic_configs.get("c") is not None), what="config applied")
    assert dict(live.controller.loop.state.topic_configs["c"])["unclean.leader.election.enable"] == "true"


# -- /isr_change_notification/isr_change_* -----------------------------------------------------


async def test_garbage_isr_change_notifications_are_deleted_and_a_good_one_is_read(live):
    admin = live.admin
    await create_topic(admin, "i", [[1, 2]])
    await wait_for(lambda: full_isr(admin, "i", 1), what="i online")
    cases = [
        (b"garbage", logging.ERROR, "not valid JSON"),
        (b"\x80\x81", logging.ERROR, "not valid UTF-8"),
        (b'{"version":1,"partitions":[{"topic":"i","partition":"0"}]}', logging.ERROR, "partition must be an integer"),
        (b"[" * HUGE, logging.ERROR, "not valid JSON"),
        (b'{"version":1,"partitions":[{"topic":"i","partition":-3}]}', logging.ERROR, "no possible partition"),
        (b'{"version":1,"partitions":[{"topic":"a/b","partition":0}]}', logging.ERROR, "no possible partition"),
        # a partition that does not exist (may be a race with a deletion): a warning, not an error
        (zkdata.encode_isr_change_notification([TopicPartition("ghost", 3)]), logging.WARNING, "ghost-3"),
    ]
    for data, level, expected in cases:
        mark = live.mark()
        path = await admin.create(zkpaths.ISR_CHANGE_SEQUENCE_PREFIX, data, sequential=True)
        await live.gone(path)  # read, then deleted, as Kafka does
        await live.one_complaint(mark, expected, level=level)
        assert path.rsplit("/", 1)[1] in live.complaints(mark)[0] or level == logging.WARNING
    # a child that is no notification at all: reported once, left alone, not reported again
    mark = live.mark()
    await admin.create(zkpaths.ISR_CHANGE_NOTIFICATION + "/stray", b"")
    await live.one_complaint(mark, "stray")
    # a good notification right after is read (and ignores the stray child)
    observed = live.controller.loop.stats.by_type["PartitionStatesObserved"]
    path = await admin.create(zkpaths.ISR_CHANGE_SEQUENCE_PREFIX,
                              zkdata.encode_isr_change_notification([TopicPartition("i", 0)]), sequential=True)
    await live.gone(path)
    await wait_for(lambda: _now(live.controller.loop.stats.by_type["PartitionStatesObserved"] > observed),
                   what="the notification observed")
    assert live.complaints(mark) == [live.complaints(mark)[0]]  # "stray" still reported only once
    assert await admin.get_children(zkpaths.ISR_CHANGE_NOTIFICATION) == ["stray"]
    await admin.delete(zkpaths.ISR_CHANGE_NOTIFICATION + "/stray")


# -- /brokers/ids/<id> -------------------------------------------------------------------------


async def test_garbage_broker_registrations_are_ignored_once_each(live, tmp_path):
    admin = live.admin
    good = zkdata.encode_broker(0, "127.0.0.1", 1, None, 0)
    cases = [
        ("abc", good, "not a broker registration"),
        ("-1", good, "not a broker registration"),  # -1 means "no leader" to the controller
        ("007", good, "not a broker registration"),  # a second name for broker 7
        ("2147483648", good, "not a broker registration"),
        (" 5", good, "not a broker registration"),
        ("77", b"garbage", "not valid JSON"),
        ("78", b'{"version":4,"host":"h","port":"9092","endpoints":[]}', "port must be an integer"),
        ("79", b'{"version":4,"endpoints":["no-scheme"]}', "must look like LISTENER://host:port"),
        ("80", b"{" * HUGE, "not valid JSON"),
    ]
    for name, data, expected in cases:
        mark = live.mark()
        await admin.create(f"{zkpaths.BROKERS_IDS}/{name}", data)
        await live.one_complaint(mark, expected)
        assert repr(name) in live.complaints(mark)[0] or f"/{name}" in live.complaints(mark)[0]
        assert set(live.controller.loop.state.brokers.keys()) == {1, 2, 3}, name
    # another broker joins: it is seen, and none of the bad registrations is reported again
    mark = live.mark()
    fourth = ClusterNode(NodeConfig(broker_id=4, zookeeper=live.connect, journal_dir=str(tmp_path / "node-4"),
                                    settings=dict(FAST)))
    await fourth.start()
    try:
        await wait_for(lambda: _now(4 in live.controller.loop.state.brokers), what="broker 4 seen")
        await live.settle()
        assert [m for m in live.complaints(mark, logging.ERROR)] == []
        # a bad registration that goes and comes back is new input: one line again
        await admin.delete(f"{zkpaths.BROKERS_IDS}/77")
        await admin.create(f"{zkpaths.BROKERS_IDS}/77", b"still garbage")
        await live.one_complaint(mark, "/brokers/ids/77")
    finally:
        await fourth.close()
        for name, _, _ in cases:
            await admin.delete(f"{zkpaths.BROKERS_IDS}/{name}")
    await wait_for(lambda: _now(set(live.controller.loop.state.brokers.keys()) == {1, 2, 3}), what="broker 4 gone")
