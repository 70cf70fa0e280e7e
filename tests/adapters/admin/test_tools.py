"""The admin tools (`kctl topics`, `reassign-partitions`, `leader-election`, `cluster`) against a
real ZooKeeper, with fake broker registrations and no controller (a stub control server plays
the controller for leader-election). Everything goes through `adapters.cli.main`, so exit
codes and outputs are the user's."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from adapters import admin
from adapters.cli import common as cli_common
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.control.transport import ControlServer
from adapters.cli import main
from adapters.zookeeper.session import ZkSession
from controller_core.assignment import assign_replicas_to_brokers, expand_partitions
from controller_core.values import LeaderIsr, ReplicaAssignment, TopicPartition


@pytest.fixture
async def zk(zk_connect):
    session = await ZkSession.connect(zk_connect)
    yield session
    await session.close()


class Kctl:
    """Runs `kctl --zookeeper <chroot> ...` in a thread (the CLI runs its own event loop)."""

    def __init__(self, connect, capsys):
        self.connect = connect
        self.capsys = capsys

    async def __call__(self, command, *args):
        self.capsys.readouterr()
        rc = await asyncio.to_thread(main, [command, "--zookeeper", self.connect, *args])
        captured = self.capsys.readouterr()
        return rc, captured.out, captured.err


@pytest.fixture
def kctl(zk_connect, capsys):
    return Kctl(zk_connect, capsys)


async def register(zk, *brokers, racks=None, port=9092):
    await zk.ensure_path(zkpaths.BROKERS_IDS)
    for b in brokers:
        rack = (racks or {}).get(b)
        await zk.create(zkpaths.broker(b), zkdata.encode_broker(b, "127.0.0.1", port, rack, 1700000000000),
                        ephemeral=True)


async def make_topic(zk, topic, assignment, states=None, config=None):
    await zk.ensure_path(zkpaths.TOPICS)
    await zk.create(zkpaths.topic(topic), zkdata.encode_topic_assignment(
        {p: r if isinstance(r, ReplicaAssignment) else ReplicaAssignment(tuple(r)) for p, r in enumerate(assignment)}))
    if config is not None:
        await zk.ensure_path(zkpaths.CONFIG_TOPICS)
        await zk.create(zkpaths.config_topic(topic), zkdata.encode_topic_config(config))
    for p, (leader, isr) in (states or {}).items():
        await zk.ensure_path(zkpaths.partition(topic, p))
        await zk.create(zkpaths.partition_state(topic, p),
                        zkdata.encode_partition_state(LeaderIsr(leader, 0, tuple(isr), 1)))


async def dump(zk, path="/"):
    """Every znode under `path`: {path: data}."""
    out = {}
    data, _ = await zk.get(path)
    out[path] = data
    for child in sorted(await zk.get_children(path)):
        out.update(await dump(zk, f"{path.rstrip('/')}/{child}"))
    return out


async def assignment_of(zk, topic):
    data, _ = await zk.get(zkpaths.topic(topic))
    return {p: list(ra.replicas) for p, ra in zkdata.decode_topic_assignment(data).items()}


def one_error_line(err):
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# -- topics --create ---------------------------------------------------------------------------


async def test_create_places_over_the_live_brokers_sorted_and_writes_kafka_znodes(zk, kctl):
    await register(zk, 3, 1, 2)
    rc, out, err = await kctl("topics", "--create", "--topic", "t", "--partitions", "6", "--replication-factor", "2")
    assert (rc, out, err) == (0, "Created topic t.\n", "")
    data, _ = await zk.get(zkpaths.topic("t"))
    doc = json.loads(data)
    assert doc["version"] == 2 and doc["adding_replicas"] == {} and doc["removing_replicas"] == {}
    assignment = {int(p): r for p, r in doc["partitions"].items()}
    assert sorted(assignment) == list(range(6))
    # Kafka's round robin over [1, 2, 3]: leaders cycle from a random start index
    start = [1, 2, 3].index(assignment[0][0])
    assert [assignment[p][0] for p in range(6)] == [[1, 2, 3][(start + p) % 3] for p in range(6)]
    assert all(len(set(r)) == 2 for r in assignment.values())
    # Kafka writes the (empty) config znode with every creation
    data, _ = await zk.get(zkpaths.config_topic("t"))
    assert json.loads(data) == {"version": 1, "config": {}}


async def test_create_placement_is_assign_replicas_to_brokers_with_the_seed(zk):
    await register(zk, 1, 2, 3, 4, racks={1: "a", 2: "a", 3: "b", 4: "b"})
    created = await admin.create_topic(zk, "t", partitions=8, replication_factor=2, seed=1234)
    expected = assign_replicas_to_brokers([(1, "a"), (2, "a"), (3, "b"), (4, "b")], 8, 2, seed=1234)
    assert created == expected and await assignment_of(zk, "t") == expected
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert all({racks[b] for b in r} == {"a", "b"} for r in expected.values())  # rack-aware


async def test_create_with_replica_assignment_and_configs(zk, kctl):
    await register(zk, 1, 2, 3)
    rc, out, err = await kctl("topics", "--create", "--topic", "t", "--replica-assignment", "1:2, 2:3,3:1",
                              "--config", "retention.ms=1000", "--config", "unclean.leader.election.enable=TRUE")
    assert (rc, out) == (0, "Created topic t.\n"), err
    assert await assignment_of(zk, "t") == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    data, _ = await zk.get(zkpaths.config_topic("t"))
    assert json.loads(data) == {"version": 1, "config": {"retention.ms": "1000",
                                                         "unclean.leader.election.enable": "true"}}
    # --if-not-exists: nothing to do, exit 0
    rc, out, _ = await kctl("topics", "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1",
                            "--if-not-exists")
    assert (rc, out) == (0, "")


async def test_create_with_a_replica_on_a_known_broker_that_is_down(zk, kctl):
    await register(zk, 1, 2)
    await make_topic(zk, "old", [[3, 1]])  # broker 3 holds replicas: a member of the cluster, down
    rc, out, err = await kctl("topics", "--create", "--topic", "t", "--replica-assignment", "3:1,1:2")
    assert rc == 0, err
    assert await assignment_of(zk, "t") == {0: [3, 1], 1: [1, 2]}


async def test_create_warns_about_period_and_underscore(zk, kctl):
    await register(zk, 1)
    rc, out, _ = await kctl("topics", "--create", "--topic", "a.b", "--partitions", "1", "--replication-factor", "1")
    assert rc == 0 and out.startswith("WARNING: Due to limitations in metric names") and "Created topic a.b." in out


CREATE_ERRORS = [
    (["--topic", "a/b", "--partitions", "1", "--replication-factor", "1"], "contains a character other than"),
    (["--topic", "..", "--partitions", "1", "--replication-factor", "1"], 'Topic name cannot be "." or ".."'),
    (["--topic", "x" * 250, "--partitions", "1", "--replication-factor", "1"], "can't be longer than 249"),
    (["--topic", "", "--partitions", "1", "--replication-factor", "1"], "can't be empty"),
    (["--topic", "a\nb", "--partitions", "1", "--replication-factor", "1"], 'Topic name "a\\nb" is illegal'),
    (["--topic", "t", "--partitions", "1", "--replication-factor", "1"], "Topic 't' already exists."),
    (["--topic", "c_d", "--partitions", "1", "--replication-factor", "1"], "collides with existing topics: c.d"),
    (["--topic", "n", "--partitions", "2", "--replication-factor", "4"],
     "Replication factor: 4 larger than available brokers: 3."),
    (["--topic", "n", "--partitions", "0", "--replication-factor", "1"], "Number of partitions must be larger than 0."),
    (["--topic", "n", "--partitions", "-3", "--replication-factor", "1"], "Number of partitions must be larger than 0."),
    (["--topic", "n", "--partitions", "1", "--replication-factor", "0"], "Replication factor must be larger than 0."),
    (["--topic", "n", "--replica-assignment", "1:2,2:9"], "Unknown broker(s) in replica assignment: 9"),
    (["--topic", "n", "--replica-assignment", "1:1"], "may not contain duplicate entries: 1"),
    (["--topic", "n", "--replica-assignment", "1:2,3"], "Partition 1 has different replication factor: 3"),
    (["--topic", "n", "--replica-assignment", "1:x"], "is not a broker id"),
    (["--topic", "n", "--replica-assignment", "1:2", "--partitions", "1"], "can't be used with"),
    (["--topic", "n", "--partitions", "1"], "requires --partitions and --replication-factor"),
    (["--topic", "n", "--partitions", "x", "--replication-factor", "1"], "invalid int value"),
    (["--partitions", "1", "--replication-factor", "1"], "--create requires --topic"),
    (["--topic", "n", "--partitions", "1", "--replication-factor", "1", "--config", "foo=1"],
     "Unknown topic config name: foo"),
    (["--topic", "n", "--partitions", "1", "--replication-factor", "1", "--config", "preallocate=maybe"],
     "Expected value to be either true or false"),
    (["--topic", "n", "--partitions", "1", "--replication-factor", "1", "--config", "retention.ms"],
     'must be in the format "key=val"'),
    (["--topic", "n", "--partitions", "1", "--replication-factor", "1", "--config", "segment.ms=0"],
     "Value must be at least 1"),
]


@pytest.mark.parametrize("args,message", CREATE_ERRORS, ids=[m[:40] for _, m in CREATE_ERRORS])
async def test_bad_create_is_one_error_line_exit_2_and_changes_nothing(zk, kctl, args, message):
    await register(zk, 1, 2, 3)
    await make_topic(zk, "t", [[1, 2]])
    await make_topic(zk, "c.d", [[1]])
    before = await dump(zk)
    rc, out, err = await kctl("topics", "--create", *args)
    assert rc == 2 and out == ""
    assert message in one_error_line(err)
    assert await dump(zk) == before


async def test_actions_are_exclusive_and_required(zk, kctl):
    await register(zk, 1)
    before = await dump(zk)
    for args, message in (([], "one of the arguments --create --alter --delete --describe --list is required"),
                          (["--list", "--describe"], "argument --describe: not allowed with argument --list"),
                          (["--create", "--delete", "--topic", "t"], "not allowed with argument --create")):
        rc, out, err = await kctl("topics", *args)
        assert rc == 2 and out == "" and message in one_error_line(err)
    assert await dump(zk) == before


# -- topics --alter ----------------------------------------------------------------------------


async def test_alter_adds_partitions_that_continue_the_creation_placement(zk, kctl):
    await register(zk, 1, 2, 3, 4)
    created = await admin.create_topic(zk, "t", partitions=3, replication_factor=3, seed=99)
    rc, out, err = await kctl("topics", "--alter", "--topic", "t", "--partitions", "7")
    assert rc == 0, err
    assert out.splitlines() == ["WARNING: If partitions are increased for a topic that has a key, the partition "
                                "logic or ordering of the messages will be affected", "Adding partitions succeeded!"]
    after = await assignment_of(zk, "t")
    assert {p: after[p] for p in range(3)} == created
    assert {p: after[p] for p in range(3, 7)} == expand_partitions(created, [(b, None) for b in (1, 2, 3, 4)], 7)
    start = [1, 2, 3, 4].index(after[0][0])
    assert [after[p][0] for p in range(7)] == [[1, 2, 3, 4][(start + p) % 4] for p in range(7)]


async def test_alter_with_a_replica_assignment_takes_the_groups_after_the_existing_ones(zk, kctl):
    await register(zk, 1, 2, 3)
    await make_topic(zk, "t", [[1, 2]])
    rc, _, err = await kctl("topics", "--alter", "--topic", "t", "--partitions", "3", "--replica-assignment",
                            "1:2,2:3,3:1")
    assert rc == 0, err
    assert await assignment_of(zk, "t") == {0: [1, 2], 1: [2, 3], 2: [3, 1]}


async def test_alter_configs(zk, kctl):
    await register(zk, 1)
    await make_topic(zk, "t", [[1]], config={"retention.ms": "5"})
    rc, out, err = await kctl("topics", "--alter", "--topic", "t", "--config", "unclean.leader.election.enable=true",
                              "--delete-config", "retention.ms")
    assert (rc, out) == (0, "Updated config for topic t.\n"), err
    data, _ = await zk.get(zkpaths.config_topic("t"))
    assert json.loads(data) == {"version": 1, "config": {"unclean.leader.election.enable": "true"}}


ALTER_ERRORS = [
    (["--topic", "t", "--partitions", "2"], "can only be increased. Topic t currently has 2 partitions, "
                                            "2 would not be an increase."),
    (["--topic", "t", "--partitions", "1"], "can only be increased"),
    (["--topic", "t", "--partitions", "0"], "must be larger than 0"),
    (["--topic", "nope", "--partitions", "5"], "Topic 'nope' does not exist as expected"),
    (["--topic", "big", "--partitions", "5"], "Replication factor: 3 larger than available brokers: 2."),
    (["--topic", "moving", "--partitions", "5"], "being reassigned"),
    (["--topic", "gone", "--partitions", "5"], "marked for deletion"),
    (["--topic", "t", "--partitions", "4", "--replica-assignment", "1:2,2:1,1:2"],
     "Increasing the number of partitions by 2 but 1 assignments provided."),
    (["--topic", "t", "--partitions", "3", "--replica-assignment", "1,2,1"],
     "Existing topic replication factor of 2, but manual replication assignment would imply replication "
     "factor(s) of 1."),
    (["--topic", "t", "--partitions", "3", "--replica-assignment", "1:2,2:1,1:7"],
     "Unknown broker(s) in replica assignment: 7"),
    (["--topic", "t"], "--alter requires --partitions, --config or --delete-config"),
    (["--topic", "t", "--config", "nope=1"], "Unknown topic config name: nope"),
    (["--topic", "t", "--partitions", "3", "--replication-factor", "2"], "can't be used with --alter"),
]


@pytest.mark.parametrize("args,message", ALTER_ERRORS, ids=[m[:40] for _, m in ALTER_ERRORS])
async def test_bad_alter_is_one_error_line_exit_2_and_changes_nothing(zk, kctl, args, message):
    await register(zk, 1, 2)
    await make_topic(zk, "t", [[1, 2], [2, 1]])
    await make_topic(zk, "big", [[1, 2, 3]])
    await make_topic(zk, "moving", [ReplicaAssignment((2, 1), (2,), (1,))])
    await make_topic(zk, "gone", [[1]])
    await zk.ensure_path(zkpaths.delete_topic("gone"))
    before = await dump(zk)
    rc, out, err = await kctl("topics", "--alter", *args)
    assert rc == 2
    assert message in one_error_line(err)
    assert await dump(zk) == before


async def test_alter_refused_while_the_topic_is_in_the_reassignment_znode(zk, kctl):
    await register(zk, 1, 2)
    await make_topic(zk, "t", [[1]])
    await zk.ensure_path(zkpaths.ADMIN)
    await zk.create(zkpaths.REASSIGN_PARTITIONS, zkdata.encode_reassignment([(TopicPartition("t", 0), [2])]))
    rc, _, err = await kctl("topics", "--alter", "--topic", "t", "--partitions", "2")
    assert rc == 2 and "being reassigned" in one_error_line(err)


# -- topics --describe / --list / --delete -------------------------------------------------------


async def test_describe_prints_kafkas_lines(zk, kctl):
    await register(zk, 1, 2, 3)
    await make_topic(zk, "t", [[1, 2, 3], [2, 3, 1]], states={0: (1, [1, 2, 3]), 1: (2, [2, 3])},
                     config={"retention.ms": "1000", "cleanup.policy": "compact"})
    await make_topic(zk, "u", [[3], [4]], states={0: (-1, [3]), 1: (4, [4])})
    await zk.ensure_path(zkpaths.delete_topic("u"))
    rc, out, err = await kctl("topics", "--describe")
    assert rc == 0, err
    assert out.splitlines() == [
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: cleanup.policy=compact,retention.ms=1000",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3",
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3",
        "Topic: u\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: \tMarkedForDeletion: true",
        "\tTopic: u\tPartition: 0\tLeader: none\tReplicas: 3\tIsr: 3\tMarkedForDeletion: true",
        "\tTopic: u\tPartition: 1\tLeader: 4\tReplicas: 4\tIsr: 4\tMarkedForDeletion: true",
    ]
    rc, out, _ = await kctl("topics", "--describe", "--topic", "t")
    assert rc == 0 and len(out.splitlines()) == 3
    rc, out, _ = await kctl("topics", "--describe", "--under-replicated-partitions")
    assert out.splitlines() == ["\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3"]
    rc, out, _ = await kctl("topics", "--describe", "--unavailable-partitions")
    assert [line.split("\t")[2:4] for line in out.splitlines()] == [["Partition: 0", "Leader: none"],
                                                                   ["Partition: 1", "Leader: 4"]]
    rc, out, _ = await kctl("topics", "--describe", "--topics-with-overrides")
    assert out.splitlines() == [
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: cleanup.policy=compact,retention.ms=1000"]
    rc, out, _ = await kctl("topics", "--describe", "--topic", "t|u")  # --topic is a regex, as in Kafka
    assert rc == 0 and len(out.splitlines()) == 6
    rc, out, err = await kctl("topics", "--describe", "--topic", "nope")
    assert rc == 2 and "Topic 'nope' does not exist as expected" in one_error_line(err)
    rc, out, err = await kctl("topics", "--describe", "--topic", "nope", "--if-exists")
    assert (rc, out, err) == (0, "", "")


async def test_list_and_delete(zk, kctl):
    await register(zk, 1)
    await make_topic(zk, "b", [[1]])
    await make_topic(zk, "a", [[1]])
    rc, out, _ = await kctl("topics", "--list")
    assert (rc, out) == (0, "a\nb\n")
    rc, out, err = await kctl("topics", "--delete", "--topic", "a")
    assert (rc, out) == (0, "Topic a is marked for deletion.\n"
                            "Note: This will have no impact if delete.topic.enable is not set to true.\n"), err
    data, _ = await zk.get(zkpaths.delete_topic("a"))
    assert data in (b"", None)
    rc, out, _ = await kctl("topics", "--delete", "--topic", "a")
    assert (rc, out) == (0, "Topic a is already marked for deletion.\n")
    rc, out, _ = await kctl("topics", "--list")
    assert out == "a - marked for deletion\nb\n"
    before = await dump(zk)
    rc, out, err = await kctl("topics", "--delete", "--topic", "zzz")
    assert rc == 2 and "Topic 'zzz' does not exist as expected" in one_error_line(err)
    rc, out, err = await kctl("topics", "--delete", "--topic", "zzz", "--if-exists")
    assert (rc, out, err) == (0, "", "")
    rc, out, err = await kctl("topics", "--delete", "--topic", "b", "--partitions", "3")
    assert rc == 2 and "can't be used with --delete" in one_error_line(err)
    assert await dump(zk) == before


# -- reassign-partitions -------------------------------------------------------------------------


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


async def test_generate_prints_current_and_proposed_assignments(zk, kctl, tmp_path):
    await register(zk, 1, 2, 3, 4)
    await make_topic(zk, "t", [[1, 2], [2, 3], [3, 1]])
    await make_topic(zk, "u", [[1]])
    topics = write(tmp_path, "topics.json", {"version": 1, "topics": [{"topic": "t"}, {"topic": "u"}]})
    before = await dump(zk)
    rc, out, err = await kctl("reassign-partitions", "--generate", "--topics-to-move-json-file", topics,
                              "--broker-list", "2,3,4")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[2] == ""
    assert lines[3] == "Proposed partition reassignment configuration"
    assert json.loads(lines[1]) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 2, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "u", "partition": 0, "replicas": [1], "log_dirs": ["any"]}]}
    proposed = json.loads(lines[4])
    assert proposed["version"] == 1
    assert [(e["topic"], e["partition"]) for e in proposed["partitions"]] == [("t", 0), ("t", 1), ("t", 2), ("u", 0)]
    for e in proposed["partitions"]:
        expected_rf = 2 if e["topic"] == "t" else 1
        assert len(set(e["replicas"])) == expected_rf and set(e["replicas"]) <= {2, 3, 4}
    assert await dump(zk) == before  # --generate writes nothing
    # the proposal is a valid --reassignment-json-file
    assert zkdata.decode_reassignment_file(lines[4].encode())


async def test_generate_errors(zk, kctl, tmp_path):
    await register(zk, 1, 2, 3)
    await make_topic(zk, "t", [[1, 2]])
    good = write(tmp_path, "t.json", {"version": 1, "topics": [{"topic": "t"}]})
    cases = [
        (["--topics-to-move-json-file", good, "--broker-list", "1,1,2"], "Broker list contains duplicate entries: 1"),
        (["--topics-to-move-json-file", good, "--broker-list", "1,9"], "not registered: 9"),
        (["--topics-to-move-json-file", good, "--broker-list", "1,a"], "--broker-list must be"),
        (["--topics-to-move-json-file", good, "--broker-list", "1"], "Replication factor: 2 larger than available"),
        (["--topics-to-move-json-file", write(tmp_path, "x.json", {"topics": [{"topic": "x"}]}), "--broker-list", "1,2"],
         "x do not exist"),
        (["--topics-to-move-json-file", write(tmp_path, "bad.json", "{"), "--broker-list", "1,2"], "not valid JSON"),
        (["--topics-to-move-json-file", str(tmp_path / "missing.json"), "--broker-list", "1,2"], "cannot read"),
        (["--broker-list", "1,2"], "must include both --topics-to-move-json-file and --broker-list"),
    ]
    for args, message in cases:
        rc, out, err = await kctl("reassign-partitions", "--generate", *args)
        assert rc == 2 and message in one_error_line(err), (args, err)


async def test_execute_writes_the_admin_znode_and_prints_the_rollback(zk, kctl, tmp_path):
    await register(zk, 1, 2, 3, 4)
    await make_topic(zk, "t", [[1, 2, 3], [2, 3, 1]])
    plan = write(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 3, 4], "log_dirs": ["any", "any", "any"]}]})
    rc, out, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", plan)
    assert rc == 0, err
    rollback = ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]},'
                '{"topic":"t","partition":1,"replicas":[2,3,1],"log_dirs":["any","any","any"]}]}')
    assert out == (f"Current partition replica assignment\n\n{rollback}\n\n"
                   "Save this to use as the --reassignment-json-file option during rollback\n"
                   "Successfully started reassignment of partitions.\n")
    data, _ = await zk.get(zkpaths.REASSIGN_PARTITIONS)
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}
    before = await dump(zk)
    rc, out, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", plan)
    assert rc == 2 and one_error_line(err) == "error: There is an existing assignment running."
    assert await dump(zk) == before


EXECUTE_ERRORS = [
    ({"version": 1, "partitions": []}, "Partition reassignment data file is empty"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": []}]},
     "Partition replica list cannot be empty"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]},
                                   {"topic": "t", "partition": 0, "replicas": [2, 1]}]}, "lists t-0 twice"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]},
     "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 5, "replicas": [1]}]},
     "The proposed assignment contains non-existent partitions: t-5"),
    ({"version": 1, "partitions": [{"topic": "no/pe", "partition": 0, "replicas": [1]}]},
     "non-existent partitions: no/pe-0"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 7]}]},
     "The proposed assignment contains non-existent brokerIDs: 7"),
    ({"version": 1, "partitions": [{"topic": "gone", "partition": 0, "replicas": [1]}]}, "marked for deletion"),
    ({"version": 2, "partitions": []}, "version 2 is not supported"),
    ({"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}, "partition must be an integer"),
    ("not json", "not valid JSON"),
]


@pytest.mark.parametrize("content,message", EXECUTE_ERRORS, ids=[m[:40] for _, m in EXECUTE_ERRORS])
async def test_bad_execute_is_one_error_line_exit_2_and_changes_nothing(zk, kctl, tmp_path, content, message):
    await register(zk, 1, 2, 3)
    await make_topic(zk, "t", [[1, 2]])
    await make_topic(zk, "gone", [[1]])
    await zk.ensure_path(zkpaths.delete_topic("gone"))
    before = await dump(zk)
    plan = write(tmp_path, "plan.json", content)
    rc, out, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", plan)
    assert rc == 2 and out == ""
    assert message in one_error_line(err)
    assert await dump(zk) == before


async def test_execute_and_verify_need_the_file(zk, kctl, tmp_path):
    for action in ("--execute", "--verify"):
        rc, _, err = await kctl("reassign-partitions", action)
        assert rc == 2 and "must include --reassignment-json-file" in one_error_line(err)
    rc, _, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", str(tmp_path / "no.json"))
    assert rc == 2 and "cannot read --reassignment-json-file" in one_error_line(err)


async def test_verify_reports_each_partition(zk, kctl, tmp_path):
    await register(zk, 1, 2, 3, 4)
    await make_topic(zk, "t", [[2, 3], ReplicaAssignment((4, 1, 2), (4,), (2,)), [1, 2]])
    await zk.ensure_path(zkpaths.ADMIN)
    await zk.create(zkpaths.REASSIGN_PARTITIONS, zkdata.encode_reassignment([(TopicPartition("t", 1), [4, 1])]))
    plan = write(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 3]},
        {"topic": "t", "partition": 1, "replicas": [4, 1]},
        {"topic": "t", "partition": 2, "replicas": [3, 4]}]})
    before = await dump(zk)
    rc, out, err = await kctl("reassign-partitions", "--verify", "--reassignment-json-file", plan)
    assert rc == 0, err
    assert out.splitlines() == ["Status of partition reassignment: ",
                                "Reassignment of partition t-0 completed successfully",
                                "Reassignment of partition t-1 is still in progress",
                                "Reassignment of partition t-2 failed"]
    assert await dump(zk) == before


# -- leader-election ---------------------------------------------------------------------------


class StubController:
    """A control server registered as broker `broker_id` and named in /controller."""

    def __init__(self, answer, secret=None):
        self.answer = answer
        self.secret = secret
        self.requests = []

    async def start(self, zk, broker_id=1):
        async def handle(frame):
            self.requests.append((frame.api, frame.body))
            return self.answer(frame.body) if callable(self.answer) else self.answer

        self.server = ControlServer("127.0.0.1", 0, handle, secret=self.secret)
        await self.server.start()
        await register(zk, broker_id, port=self.server.port)
        await zk.create(zkpaths.CONTROLLER, zkdata.encode_controller(broker_id, 1700000000000), ephemeral=True)
        return self

    async def close(self):
        await self.server.close()


async def test_leader_election_prints_kafkas_lines(zk, kctl, tmp_path):
    await make_topic(zk, "t", [[1], [1], [1]])
    stub = await StubController({"error": None, "results": [
        ["t", 2, "ELECTION_FAILED: no eligible leader under the preferred strategy (isr [3])"],
        ["t", 0, None], ["t", 1, "ELECTION_NOT_NEEDED: leader election not needed for topic partition"]]}).start(zk)
    try:
        rc, out, err = await kctl("leader-election", "--election-type", "PREFERRED", "--all-topic-partitions")
        assert out.splitlines() == [
            "Successfully completed leader election (PREFERRED) for partitions t-0",
            "Valid replica already elected for partitions t-1",
            "Error completing leader election (PREFERRED) for partition: t-2: ELECTION_FAILED: no eligible leader "
            "under the preferred strategy (isr [3])"]
        assert rc == 1 and one_error_line(err) == "error: 1 replica(s) could not be elected"
        assert stub.requests[-1] == ("ElectLeaders", {"election_type": "preferred", "partitions": None})

        stub.answer = {"error": None, "results": [["t", 0, None], ["t", 1, None]]}
        rc, out, err = await kctl("leader-election", "--election-type", "unclean", "--path-to-json-file",
                                  write(tmp_path, "e.json", {"partitions": [{"topic": "t", "partition": 1},
                                                                            {"topic": "t", "partition": 0}]}))
        assert (rc, out, err) == (0, "Successfully completed leader election (UNCLEAN) for partitions t-0, t-1\n", "")
        assert stub.requests[-1] == ("ElectLeaders", {"election_type": "unclean", "partitions": [["t", 1], ["t", 0]]})

        rc, out, _ = await kctl("leader-election", "--election-type", "PREFERRED", "--topic", "t", "--partition", "0")
        assert rc == 0 and stub.requests[-1][1]["partitions"] == [["t", 0]]
    finally:
        await stub.close()


async def test_leader_election_uses_the_control_secret(zk, kctl, monkeypatch):
    await make_topic(zk, "t", [[1]])
    stub = await StubController({"error": None, "results": [["t", 0, None]]}, secret=b"s3cret").start(zk)
    try:
        monkeypatch.setenv("KCTL_CONTROL_SECRET", "s3cret")
        rc, out, err = await kctl("leader-election", "--election-type", "PREFERRED", "--topic", "t", "--partition", "0")
        assert rc == 0, err
        monkeypatch.setenv("KCTL_CONTROL_SECRET", "wrong")
        rc, out, err = await kctl("leader-election", "--election-type", "PREFERRED", "--topic", "t", "--partition",
                                  "0", "--timeout-ms", "600")
        assert rc == 1 and "no controller answered" in one_error_line(err)
    finally:
        await stub.close()


async def test_leader_election_without_a_controller_exits_1(zk, kctl):
    await make_topic(zk, "t", [[1]])
    started = time.monotonic()
    rc, out, err = await kctl("leader-election", "--election-type", "PREFERRED", "--all-topic-partitions",
                              "--timeout-ms", "500")
    assert rc == 1 and out == ""
    assert one_error_line(err) == "error: no controller answered within 0.5 s: no controller is elected"
    assert time.monotonic() - started < 10


LEADER_ELECTION_ERRORS = [
    (["--election-type", "PREFERRED"], "One and only one of the following options is required"),
    (["--election-type", "PREFERRED", "--topic", "t", "--partition", "0", "--all-topic-partitions"],
     "One and only one"),
    (["--election-type", "PREFERRED", "--partition", "0"], "Option partition is only allowed if topic is used"),
    (["--election-type", "PREFERRED", "--topic", "t"], "Missing required option(s): partition"),
    (["--election-type", "MAYBE", "--all-topic-partitions"], "invalid choice"),
    (["--all-topic-partitions"], "the following arguments are required: --election-type"),
    (["--election-type", "PREFERRED", "--topic", "t", "--partition", "9"], "Unknown topic partition(s): t-9"),
    (["--election-type", "PREFERRED", "--topic", "x", "--partition", "0"], "Unknown topic partition(s): x-0"),
    (["--election-type", "PREFERRED", "--path-to-json-file", "FILE:{\"partitions\": []}"], "lists no partitions"),
    (["--election-type", "PREFERRED", "--path-to-json-file", "FILE:{\"partitions\": [{\"topic\": \"t\", "
      "\"partition\": 0}, {\"topic\": \"t\", \"partition\": 0}]}"], "lists t-0 twice"),
]


@pytest.mark.parametrize("args,message", LEADER_ELECTION_ERRORS, ids=[m[:40] for _, m in LEADER_ELECTION_ERRORS])
async def test_bad_leader_election_is_one_error_line_exit_2(zk, kctl, tmp_path, args, message):
    await make_topic(zk, "t", [[1]])
    stub = await StubController({"error": None, "results": []}).start(zk)
    args = [write(tmp_path, "e.json", a[5:]) if a.startswith("FILE:") else a for a in args]
    try:
        rc, out, err = await kctl("leader-election", *args)
        assert rc == 2 and out == ""
        assert message in one_error_line(err)
        assert stub.requests == []
    finally:
        await stub.close()


# -- cluster -----------------------------------------------------------------------------------


async def test_cluster_summary(zk, kctl):
    await register(zk, 1, 2, 3)
    await zk.create(zkpaths.CONTROLLER, zkdata.encode_controller(2, 1700000000000), ephemeral=True)
    await zk.create(zkpaths.CONTROLLER_EPOCH, b"7")
    # t-0 fine; t-1 led by a non-preferred replica and under-replicated; t-2 offline (its preferred leader 4
    # is not live)
    await make_topic(zk, "t", [[1, 2], [2, 3], [4, 1]], states={0: (1, [1, 2]), 1: (3, [3]), 2: (4, [4])})
    # u is being deleted: offline, but not counted as offline or imbalanced (Kafka's controller metrics)
    await make_topic(zk, "u", [[5]], states={0: (-1, [5])})
    await zk.ensure_path(zkpaths.delete_topic("u"))
    rc, out, err = await kctl("cluster")
    assert rc == 0, err
    assert out.splitlines() == ["Controller: 2 (epoch 7)", "Live brokers: 1,2,3 (3)", "Topics: 2", "Partitions: 4",
                                "Offline partitions: 1", "Under-replicated partitions: 2",
                                "Preferred replica imbalance: 1", "Partitions being reassigned: 0",
                                "Topics marked for deletion: u"]
    rc, out, err = await kctl("cluster", "--json")
    assert rc == 0 and json.loads(out) == {
        "controller": 2, "controller_epoch": 7, "live_brokers": [1, 2, 3], "topics": 2, "partitions": 4,
        "offline_partitions": 1, "under_replicated_partitions": 2, "preferred_replica_imbalance": 1,
        "partitions_being_reassigned": 0, "topics_marked_for_deletion": ["u"]}


async def test_cluster_without_a_controller(zk, kctl):
    rc, out, _ = await kctl("cluster")
    assert rc == 0 and out.splitlines()[:2] == ["Controller: none (epoch 0)", "Live brokers: none (0)"]


# -- generic -----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["topics", "reassign-partitions", "leader-election", "cluster"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0 and "--zookeeper" in capsys.readouterr().out


def test_zookeeper_defaults_to_the_environment(monkeypatch):
    from adapters.cli.kctl import build_parser

    monkeypatch.setenv("KCTL_ZOOKEEPER", "zk.example:2181/x")
    assert build_parser().parse_args(["cluster"]).zookeeper == "zk.example:2181/x"


def test_unreachable_zookeeper_exits_1(monkeypatch, capsys):
    import socket

    monkeypatch.setattr(cli_common, "ZK_CONNECT_TIMEOUT_S", 1.0)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc = main(["cluster", "--zookeeper", f"127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert rc == 1 and one_error_line(err).startswith("error: cannot connect to ZooKeeper at 127.0.0.1:")


def test_bad_connect_string_exits_2(capsys):
    assert main(["topics", "--list", "--zookeeper", "host:99999"]) == 2
    assert "invalid ZooKeeper connect string" in one_error_line(capsys.readouterr().err)


def test_python_dash_m_entry_reports_bad_input_without_a_traceback(zk_connect):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "adapters.cli", "topics", "--create", "--zookeeper", zk_connect,
                           "--topic", "a/b", "--partitions", "1", "--replication-factor", "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert one_error_line(done.stderr).startswith('error: Topic name "a/b" is illegal')


async def test_alter_and_delete_if_exists_on_a_missing_topic(zk, kctl):
    await register(zk, 1)
    before = await dump(zk)
    for action in (["--alter", "--partitions", "3"], ["--delete"]):
        rc, out, err = await kctl("topics", *action, "--topic", "missing", "--if-exists")
        assert (rc, out, err) == (0, "", "")
    assert await dump(zk) == before
