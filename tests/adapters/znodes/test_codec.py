"""Znode and tool-file formats: the contract's exact bytes, Kafka 2.4's variants, malformed input
with precise messages, and properties (round trips; random input only ever raises
ZnodeFormatError). Also the znode paths."""
from __future__ import annotations

import ast
import copy
import json
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.znodes.codec import ZnodeFormatError
from controller_core.values import BrokerInfo, LeaderIsr, ReplicaAssignment, TopicPartition

TP = TopicPartition
INT32 = st.integers(-(2**31), 2**31 - 1)


# --- the contract's examples, byte for byte -----------------------------------------------------


def test_controller_example():
    data = b'{"version":1,"brokerid":1,"timestamp":"1700000000000"}'
    assert zkdata.encode_controller(1, 1700000000000) == data
    assert zkdata.decode_controller(data) == 1


def test_controller_legacy_bare_integer():
    assert zkdata.decode_controller(b"3") == 3


def test_controller_epoch_example():
    assert zkdata.encode_controller_epoch(3) == b"3"
    assert zkdata.decode_controller_epoch(b"3") == 3
    assert zkdata.decode_controller_epoch(b"0") == 0


BROKER_EXAMPLE = (
    b'{"version":4,"host":"127.0.0.1","port":9092,"jmx_port":-1,"timestamp":"1700000000000",'
    b'"endpoints":["PLAINTEXT://127.0.0.1:9092"],'
    b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"}}'
)


def test_broker_example():
    assert zkdata.encode_broker(1, "127.0.0.1", 9092, None, 1700000000000) == BROKER_EXAMPLE
    assert zkdata.decode_broker(1, BROKER_EXAMPLE, 4242) == BrokerInfo(1, "127.0.0.1", 9092, 4242)


def test_broker_example_with_rack():
    data = zkdata.encode_broker(2, "10.0.0.2", 9093, "r1", 1700000000000)
    assert json.loads(data) == {**json.loads(BROKER_EXAMPLE), "host": "10.0.0.2", "port": 9093,
                                "endpoints": ["PLAINTEXT://10.0.0.2:9093"], "rack": "r1"}
    assert data.endswith(b',"rack":"r1"}')
    assert zkdata.decode_broker(2, data, 7) == BrokerInfo(2, "10.0.0.2", 9093, 7, "r1")


def test_broker_ipv6_endpoint_is_bracketed():
    data = zkdata.encode_broker(1, "::1", 9092, None, 0)
    assert json.loads(data)["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert zkdata.decode_broker(1, data, 1).host == "::1"


def test_topic_assignment_example():
    data = (
        b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    assignment = {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1))}
    assert zkdata.decode_topic_assignment(data) == assignment
    assert zkdata.encode_topic_assignment(assignment) == data
    assert zkdata.encode_topic_assignment({0: [1, 2, 3], 1: [2, 3, 1]}) == data


def test_topic_assignment_version_1():
    data = b'{"version":1,"partitions":{"1":[2,3],"0":[1,2]}}'
    assert zkdata.decode_topic_assignment(data) == {
        0: ReplicaAssignment((1, 2)),
        1: ReplicaAssignment((2, 3)),
    }
    assert list(zkdata.decode_topic_assignment(data)) == [0, 1]


def test_topic_assignment_during_reassignment_writes_only_non_empty_entries():
    moving = ReplicaAssignment((1, 2, 3)).reassign_to((4, 5, 6))
    assignment = {0: moving, 1: ReplicaAssignment((2, 3, 1))}
    data = zkdata.encode_topic_assignment(assignment)
    assert json.loads(data) == {
        "version": 2,
        "partitions": {"0": [4, 5, 6, 1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {"0": [4, 5, 6]},
        "removing_replicas": {"0": [1, 2, 3]},
    }
    assert zkdata.decode_topic_assignment(data) == assignment


def test_partition_state_example():
    data = b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":3,"isr":[1,2,3]}'
    state = LeaderIsr(leader=1, leader_epoch=0, isr=(1, 2, 3), controller_epoch=3, zk_version=5)
    assert zkdata.decode_partition_state(data, 5) == state
    assert zkdata.encode_partition_state(state) == data


def test_partition_state_without_leader():
    data = b'{"version":1,"leader":-1,"leader_epoch":7,"controller_epoch":3,"isr":[2]}'
    assert zkdata.decode_partition_state(data, 0).leader == -1


def test_reassignment_example():
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3,4]}]}'
    assert zkdata.decode_reassignment(data) == ((TP("t", 0), (2, 3, 4)),)
    assert zkdata.encode_reassignment({TP("t", 0): [2, 3, 4]}) == data
    assert zkdata.encode_reassignment([(TP("t", 0), (2, 3, 4))]) == data


def test_reassignment_keeps_file_order_and_tolerates_log_dirs():
    data = json.dumps({
        "version": 1,
        "partitions": [
            {"topic": "b", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "/d1"]},
            {"topic": "a", "partition": 0, "replicas": [1, 2]},
        ],
    }).encode()
    expected = ((TP("b", 1), (3, 1)), (TP("a", 0), (1, 2)))
    assert zkdata.decode_reassignment(data) == expected
    assert zkdata.decode_reassignment_file(data) == expected


def test_reassignment_file_as_the_tool_writes_it():
    data = zkdata.encode_reassignment_file({TP("foo", 0): [1, 2], TP("foo", 1): [2, 3]})
    assert data == (
        b'{"version":1,"partitions":['
        b'{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        b'{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}'
    )
    assert zkdata.decode_reassignment_file(data) == ((TP("foo", 0), (1, 2)), (TP("foo", 1), (2, 3)))


def test_reassignment_version_is_optional():
    data = b'{"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}'
    assert zkdata.decode_reassignment_file(data) == ((TP("t", 0), (1,)),)


def test_preferred_replica_election_example():
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert zkdata.decode_preferred_replica_election(data) == (TP("t", 0),)
    assert zkdata.encode_preferred_replica_election([TP("t", 0)]) == data


def test_preferred_replica_election_reads_a_set():
    data = b'{"version":1,"partitions":[{"topic":"t","partition":1},{"topic":"t","partition":0},{"topic":"t","partition":1}]}'
    assert zkdata.decode_preferred_replica_election(data) == (TP("t", 1), TP("t", 0))


def test_isr_change_notification_example():
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert zkdata.decode_isr_change_notification(data) == (TP("t", 0),)
    assert zkdata.encode_isr_change_notification([TP("t", 0)]) == data


def test_topic_config_example():
    data = b'{"version":1,"config":{"unclean.leader.election.enable":"true"}}'
    assert zkdata.decode_topic_config(data) == {"unclean.leader.election.enable": "true"}
    assert zkdata.encode_topic_config({"unclean.leader.election.enable": "true"}) == data


def test_topic_config_without_overrides():
    assert zkdata.decode_topic_config(b"") == {}
    assert zkdata.decode_topic_config(None) == {}
    assert zkdata.decode_topic_config(b'{"version":1}') == {}
    assert zkdata.encode_topic_config({}) == b'{"version":1,"config":{}}'


def test_cluster_id_example():
    cluster_id = zkdata.new_cluster_id(bytes(range(16)))
    assert cluster_id == "AAECAwQFBgcICQoLDA0ODw"
    data = zkdata.encode_cluster_id(cluster_id)
    assert data == b'{"version":"1","id":"AAECAwQFBgcICQoLDA0ODw"}'
    assert zkdata.decode_cluster_id(data) == cluster_id


@given(st.binary(min_size=16, max_size=16))
def test_new_cluster_id_is_22_url_safe_characters(uuid_bytes):
    cluster_id = zkdata.new_cluster_id(uuid_bytes)
    assert len(cluster_id) == 22
    assert set(cluster_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_new_cluster_id_needs_16_bytes():
    with pytest.raises(ValueError, match="16 bytes"):
        zkdata.new_cluster_id(b"short")


def test_topics_to_move_file():
    data = b'{"version":1,"topics":[{"topic":"foo"},{"topic":"bar"}]}'
    assert zkdata.decode_topics_to_move_file(data) == ("foo", "bar")
    assert zkdata.encode_topics_to_move_file(["foo", "bar"]) == data


def test_leader_election_file():
    data = b'{"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    assert zkdata.decode_leader_election_file(data) == (TP("t", 0), TP("u", 3))
    assert zkdata.encode_leader_election_file([TP("t", 0), TP("u", 3)]) == data


# --- broker registrations as other Kafka 2.4 brokers write them ---------------------------------


def registration(**fields) -> bytes:
    base = {"version": 4, "host": "h", "port": 9092, "jmx_port": -1, "timestamp": "1",
            "endpoints": ["PLAINTEXT://h:9092"],
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...}).encode()


def test_broker_without_plaintext_listener_uses_its_endpoint():
    data = registration(host=None, port=-1, endpoints=["SASL_SSL://b1.example:9093"],
                        listener_security_protocol_map={"SASL_SSL": "SASL_SSL"})
    assert zkdata.decode_broker(3, data, 9) == BrokerInfo(3, "b1.example", 9093, 9)


def test_broker_with_named_listeners_prefers_the_plaintext_one():
    data = registration(host=..., port=..., rack="r2",
                        endpoints=["EXTERNAL://e.example:9094", "INTERNAL://i.example:9092"],
                        listener_security_protocol_map={"INTERNAL": "PLAINTEXT", "EXTERNAL": "SSL"})
    assert zkdata.decode_broker(3, data, 9) == BrokerInfo(3, "i.example", 9092, 9, "r2")


def test_broker_endpoint_with_ipv6_literal():
    data = registration(host=None, port=None, endpoints=["PLAINTEXT://[fe80::1]:9092"])
    assert zkdata.decode_broker(1, data, 1).host == "fe80::1"


def test_broker_version_1_and_null_rack():
    data = b'{"version":1,"host":"old","port":9092,"jmx_port":9999,"rack":null}'
    assert zkdata.decode_broker(0, data, 2) == BrokerInfo(0, "old", 9092, 2, None)


# --- malformed input: each gives a ZnodeFormatError naming the problem --------------------------

MALFORMED = [
    (zkdata.decode_reassignment,
     b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
     b'{"topic":"t","partition":1,"replicas":[1]},{"topic":"t","partition":2,"replicas":"x"}]}',
     "reassignment request: partitions[2].replicas must be a list of integers, got 'x'"),
    (zkdata.decode_reassignment,
     b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,"x"]}]}',
     "reassignment request: partitions[0].replicas must be a list of integers, got 'x' in it"),
    (zkdata.decode_reassignment,
     b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
     b'{"topic":"t","partition":0,"replicas":[2]}]}',
     "reassignment request: lists t-0 twice"),
    (zkdata.decode_reassignment, b'{"version":1}', "reassignment request: partitions is missing"),
    (zkdata.decode_reassignment, b'{"version":2,"partitions":[]}',
     "reassignment request: version 2 is not supported, only version 1 is"),
    (zkdata.decode_reassignment, b'{"version":"1","partitions":[]}',
     "reassignment request: version must be an integer, got '1'"),
    (zkdata.decode_reassignment, b'{"version":1,"partitions":{}}',
     "reassignment request: partitions must be a list, got {}"),
    (zkdata.decode_reassignment, b'{"version":1,"partitions":[3]}',
     "reassignment request: partitions[0] must be an object, got 3"),
    (zkdata.decode_reassignment, b'{"version":1,"partitions":[{"partition":0,"replicas":[1]}]}',
     "reassignment request: partitions[0].topic is missing"),
    (zkdata.decode_reassignment,
     b'{"version":1,"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
     "reassignment request: partitions[0].partition must be an integer, got '0'"),
    (zkdata.decode_reassignment,
     b'{"version":1,"partitions":[{"topic":"t","partition":0.0,"replicas":[1]}]}',
     "reassignment request: partitions[0].partition must be an integer, got 0.0"),
    (zkdata.decode_reassignment,
     b'{"version":1,"partitions":[{"topic":"t","partition":true,"replicas":[1]}]}',
     "reassignment request: partitions[0].partition must be an integer, got True"),
    (zkdata.decode_reassignment,
     b'{"version":1,"partitions":[{"topic":"t","partition":4294967296,"replicas":[1]}]}',
     "reassignment request: partitions[0].partition must be a 32-bit integer, got 4294967296"),
    (zkdata.decode_reassignment_file,
     b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
     "reassignment file: partitions[0].log_dirs has 1 entries but partitions[0].replicas has 2"),
    (zkdata.decode_reassignment_file,
     b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":[1]}]}',
     "reassignment file: partitions[0].log_dirs must be a list of strings, got 1 in it"),
    (zkdata.decode_reassignment_file, b"{not json",
     "reassignment file: not valid JSON (Expecting property name enclosed in double quotes at "
     "line 1 column 2)"),
    (zkdata.decode_reassignment_file, b"", "reassignment file: the znode has no data"),
    (zkdata.decode_reassignment_file, b"\xff\xfe",
     "reassignment file: not valid UTF-8 (invalid start byte at byte 0)"),
    (zkdata.decode_reassignment_file, b'[1]',
     "reassignment file: the content must be a JSON object, got [1]"),
    (zkdata.decode_reassignment_file, b'{"partitions":[],"partitions":[]}',
     "reassignment file: a JSON object has the key 'partitions' twice"),
    (zkdata.decode_reassignment_file, b'{"version":NaN}',
     "reassignment file: not valid JSON (NaN is not a JSON number)"),
    (zkdata.decode_topic_assignment, b'{"version":2,"partitions":{"a":[1]}}',
     "topic assignment: partitions has the key 'a', which is not a partition id"),
    (zkdata.decode_topic_assignment, b'{"version":2,"partitions":{" 1":[1]}}',
     "topic assignment: partitions has the key ' 1', which is not a partition id"),
    (zkdata.decode_topic_assignment, b'{"version":2,"partitions":{"1":[1],"01":[2]}}',
     "topic assignment: partitions lists partition 1 twice"),
    (zkdata.decode_topic_assignment, b'{"version":2,"partitions":{"0":[1,null]}}',
     "topic assignment: partitions['0'] must be a list of integers, got None in it"),
    (zkdata.decode_topic_assignment, b'{"version":2,"partitions":{"0":[1]},"adding_replicas":[]}',
     "topic assignment: adding_replicas must be an object, got []"),
    (zkdata.decode_topic_assignment,
     b'{"version":2,"partitions":{"0":[1]},"removing_replicas":{"1":[2]}}',
     "topic assignment: removing_replicas names partition 1, which is not in partitions"),
    (zkdata.decode_topic_assignment, b'{"version":2}', "topic assignment: partitions is missing"),
    (lambda d: zkdata.decode_topic_assignment(d, topic="orders"), b'{"partitions":{"99999999999":[1]}}',
     "topic assignment of orders: the partition id partitions['99999999999'] must be a 32-bit "
     "integer, got '99999999999'"),
    (lambda d: zkdata.decode_partition_state(d, 0), b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1]}',
     "partition state: controller_epoch is missing"),
    (lambda d: zkdata.decode_partition_state(d, 0, tp=TP("t", 2)),
     b'{"version":1,"leader":"1","leader_epoch":0,"controller_epoch":1,"isr":[1]}',
     "partition state of t-2: leader must be an integer, got '1'"),
    (lambda d: zkdata.decode_partition_state(d, 0),
     b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":"1,2"}',
     "partition state: isr must be a list of integers, got '1,2'"),
    (zkdata.decode_controller, b'{"version":1,"timestamp":"1"}', "controller: brokerid is missing"),
    (zkdata.decode_controller, b'"1"', "controller: the content must be a JSON object, got '1'"),
    (zkdata.decode_controller_epoch, b"abc", "controller epoch: expected a decimal number, got 'abc'"),
    (zkdata.decode_controller_epoch, b"-1", "controller epoch: expected a decimal number, got '-1'"),
    (zkdata.decode_controller_epoch, b"3\n", "controller epoch: expected a decimal number, got '3\\n'"),
    (zkdata.decode_controller_epoch, b"99999999999",
     "controller epoch: the epoch must be a 32-bit integer, got '99999999999'"),
    (lambda d: zkdata.decode_broker(5, d, 1), registration(version=...),
     "broker registration 5: version is missing"),
    (lambda d: zkdata.decode_broker(5, d, 1), registration(version=0),
     "broker registration 5: version must be at least 1, got 0"),
    (lambda d: zkdata.decode_broker(5, d, 1), registration(port="9092"),
     "broker registration 5: port must be an integer, got '9092'"),
    (lambda d: zkdata.decode_broker(5, d, 1), registration(rack=3),
     "broker registration 5: rack must be a string, got 3"),
    (lambda d: zkdata.decode_broker(5, d, 1), registration(endpoints="PLAINTEXT://h:1"),
     "broker registration 5: endpoints must be a list, got 'PLAINTEXT://h:1'"),
    (lambda d: zkdata.decode_broker(5, d, 1), registration(endpoints=...),
     "broker registration 5: endpoints is missing"),
    (lambda d: zkdata.decode_broker(5, d, 1), registration(endpoints=["h:9092"]),
     "broker registration 5: endpoints[0] must look like LISTENER://host:port, got 'h:9092'"),
    (lambda d: zkdata.decode_broker(5, d, 1), registration(host=None, port=-1, endpoints=[]),
     "broker registration 5: has no host and port and no endpoints"),
    (lambda d: zkdata.decode_broker(5, d, 1), b'{"version":1,"port":9092}',
     "broker registration 5: host and port are required in a version 1 registration"),
    (lambda d: zkdata.decode_broker(5, d, 1), registration(listener_security_protocol_map=[]),
     "broker registration 5: listener_security_protocol_map must be an object, got []"),
    (zkdata.decode_preferred_replica_election, b'{"version":1,"partitions":[{"topic":7,"partition":0}]}',
     "preferred replica election: partitions[0].topic must be a string, got 7"),
    (zkdata.decode_isr_change_notification, b'{"version":1}',
     "isr change notification: partitions is missing"),
    (zkdata.decode_leader_election_file,
     b'{"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":0}]}',
     "leader election file: lists t-0 twice"),
    (zkdata.decode_topic_config, b'{"version":1,"config":{"retention.ms":86400000}}',
     "topic config: config['retention.ms'] must be a string, got 86400000"),
    (zkdata.decode_topic_config, b'{"version":1,"config":"a=b"}',
     "topic config: config must be an object, got 'a=b'"),
    (zkdata.decode_cluster_id, b'{"version":"1"}', "cluster id: id is missing"),
    (zkdata.decode_cluster_id, b'{"version":"1","id":""}', "cluster id: id is empty"),
    (zkdata.decode_topics_to_move_file, b'{"version":1,"topics":[{"topic":"a"},{"topic":"a"}]}',
     "topics-to-move file: lists topic a twice"),
    (zkdata.decode_topics_to_move_file, b'{"version":1,"topics":["a"]}',
     "topics-to-move file: topics[0] must be an object, got 'a'"),
    (zkdata.decode_topics_to_move_file, b'{"version":3,"topics":[]}',
     "topics-to-move file: version 3 is not supported, only version 1 is"),
]


@pytest.mark.parametrize(("decode", "data", "message"), MALFORMED)
def test_malformed_input_is_reported_precisely(decode, data, message):
    with pytest.raises(ZnodeFormatError) as raised:
        decode(data)
    assert str(raised.value) == message
    assert isinstance(raised.value, ValueError)


def test_error_carries_kind_and_problem():
    with pytest.raises(ZnodeFormatError) as raised:
        zkdata.decode_cluster_id(b"{}")
    assert (raised.value.kind, raised.value.problem) == ("cluster id", "id is missing")


def test_deeply_nested_and_huge_input():
    for data in (b"[" * 100_000, b'{"id":' + b"1" * 10_000 + b"}"):
        with pytest.raises(ZnodeFormatError, match="^cluster id: not valid JSON"):
            zkdata.decode_cluster_id(data)


def test_non_bytes_input():
    with pytest.raises(ZnodeFormatError, match="expected bytes, got str"):
        zkdata.decode_reassignment('{"version":1,"partitions":[]}')
    with pytest.raises(ZnodeFormatError, match="the znode has no data"):
        zkdata.decode_controller(None)


# --- properties -------------------------------------------------------------------------------

topics = st.text(min_size=1, max_size=12)
partition_ids = st.integers(0, 2**31 - 1)
replica_lists = st.lists(INT32, max_size=6).map(tuple)
topic_partitions = st.builds(TP, topics, partition_ids)


@given(INT32, st.integers(0, 2**63 - 1))
def test_controller_round_trip(broker_id, timestamp):
    assert zkdata.decode_controller(zkdata.encode_controller(broker_id, timestamp)) == broker_id


@given(st.integers(0, 2**31 - 1))
def test_controller_epoch_round_trip(epoch):
    assert zkdata.decode_controller_epoch(zkdata.encode_controller_epoch(epoch)) == epoch


hosts = st.from_regex(r"[a-z0-9][a-z0-9.\-]{0,20}", fullmatch=True) | st.sampled_from(
    ["::1", "fe80::1%eth0", "127.0.0.1"]
)


@given(INT32, hosts, st.integers(0, 65535), st.none() | st.text(max_size=8), st.integers(0, 2**62))
def test_broker_round_trip(broker_id, host, port, rack, czxid):
    data = zkdata.encode_broker(broker_id, host, port, rack, 1)
    assert zkdata.decode_broker(broker_id, data, czxid) == BrokerInfo(broker_id, host, port, czxid, rack)
    # Without the host/port keys, the endpoint gives the same answer.
    content = json.loads(data)
    del content["host"], content["port"]
    again = zkdata.decode_broker(broker_id, json.dumps(content).encode(), czxid)
    assert again == BrokerInfo(broker_id, host, port, czxid, rack)


@given(st.dictionaries(partition_ids, st.builds(ReplicaAssignment, replica_lists, replica_lists, replica_lists), max_size=8))
def test_topic_assignment_round_trip(assignment):
    data = zkdata.encode_topic_assignment(assignment)
    decoded = zkdata.decode_topic_assignment(data)
    assert decoded == assignment
    assert list(decoded) == sorted(assignment)
    content = json.loads(data)
    assert set(content["adding_replicas"]) == {str(p) for p, a in assignment.items() if a.adding}
    assert set(content["removing_replicas"]) == {str(p) for p, a in assignment.items() if a.removing}


@given(st.builds(LeaderIsr, INT32, INT32, replica_lists, INT32, st.integers(-1, 2**31 - 1)))
def test_partition_state_round_trip(state):
    data = zkdata.encode_partition_state(state)
    assert zkdata.decode_partition_state(data, state.zk_version) == state


_numbers = st.one_of(INT32, st.booleans(), INT32.map(np.int64), st.integers(-128, 127).map(np.int8),
                     st.integers(0, 2**32 - 1).map(np.uint32))
"""What a state's numbers may be: ints, and what `int()` also turns into one (the columnar core
hands out numpy integers)."""


@given(st.lists(st.builds(LeaderIsr, _numbers, _numbers, st.lists(_numbers, max_size=20), _numbers,
                          st.integers(-1, 2**31 - 1)), max_size=40))
def test_bulk_state_encoder_is_the_per_state_encoder_byte_for_byte(states):
    # ISRs of up to 20 replicas: past the templates (16 sizes), the per-state encoder takes over
    assert zkdata.encode_partition_states(states) == [zkdata.encode_partition_state(s) for s in states]


def test_bulk_state_encoder_raises_what_the_per_state_encoder_raises():
    with pytest.raises(ValueError):
        zkdata.encode_partition_states([LeaderIsr(1, 0, (1,), 1), LeaderIsr("x", 0, (1,), 1)])


@given(st.lists(st.tuples(topic_partitions, replica_lists), max_size=8, unique_by=lambda e: e[0]))
def test_reassignment_round_trip(entries):
    entries = tuple(entries)
    assert zkdata.decode_reassignment(zkdata.encode_reassignment(entries)) == entries
    assert zkdata.decode_reassignment_file(zkdata.encode_reassignment_file(entries)) == entries


@given(st.lists(topic_partitions, max_size=8, unique=True))
def test_partition_list_round_trips(partitions):
    partitions = tuple(partitions)
    for encode, decode in [
        (zkdata.encode_preferred_replica_election, zkdata.decode_preferred_replica_election),
        (zkdata.encode_isr_change_notification, zkdata.decode_isr_change_notification),
        (zkdata.encode_leader_election_file, zkdata.decode_leader_election_file),
    ]:
        assert decode(encode(partitions)) == partitions


@given(st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=6))
def test_topic_config_round_trip(config):
    assert zkdata.decode_topic_config(zkdata.encode_topic_config(config)) == config


@given(st.binary(min_size=16, max_size=16))
def test_cluster_id_round_trip(uuid_bytes):
    cluster_id = zkdata.new_cluster_id(uuid_bytes)
    assert zkdata.decode_cluster_id(zkdata.encode_cluster_id(cluster_id)) == cluster_id


@given(st.lists(topics, max_size=6, unique=True))
def test_topics_to_move_round_trip(names):
    names = tuple(names)
    assert zkdata.decode_topics_to_move_file(zkdata.encode_topics_to_move_file(names)) == names


@given(st.sampled_from([
    lambda: zkdata.encode_controller(1, 2),
    lambda: zkdata.encode_broker(1, "h", 1, "r", 2),
    lambda: zkdata.encode_topic_assignment({0: [1]}),
    lambda: zkdata.encode_partition_state(LeaderIsr(1, 0, (1,), 1)),
    lambda: zkdata.encode_reassignment({TP("t", 0): [1]}),
    lambda: zkdata.encode_topic_config({"a": "b"}),
    lambda: zkdata.encode_cluster_id("x"),
]))
def test_encoders_write_compact_json(encode):
    data = encode()
    assert data == json.dumps(json.loads(data), separators=(",", ":")).encode()


# Every decoder, as a function of the data alone, with a valid document to mutate.
DECODERS = {
    "controller": (zkdata.decode_controller, {"version": 1, "brokerid": 7, "timestamp": "1"}),
    "broker": (lambda d: zkdata.decode_broker(1, d, 5), json.loads(BROKER_EXAMPLE)),
    "topic": (zkdata.decode_topic_assignment,
              {"version": 2, "partitions": {"0": [1, 2], "1": [2, 3]},
               "adding_replicas": {"0": [1]}, "removing_replicas": {"1": [3]}}),
    "state": (lambda d: zkdata.decode_partition_state(d, 9),
              {"version": 1, "leader": 2, "leader_epoch": 4, "controller_epoch": 3, "isr": [2, 1]}),
    "reassign": (zkdata.decode_reassignment,
                 {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]},
                                               {"topic": "u", "partition": 1, "replicas": [1]}]}),
    "reassign-file": (zkdata.decode_reassignment_file,
                      {"version": 1, "partitions": [{"topic": "t", "partition": 0,
                                                     "replicas": [2, 3], "log_dirs": ["any", "any"]}]}),
    "preferred": (zkdata.decode_preferred_replica_election,
                  {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}),
    "isr-change": (zkdata.decode_isr_change_notification,
                   {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}),
    "election-file": (zkdata.decode_leader_election_file,
                      {"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}),
    "config": (zkdata.decode_topic_config, {"version": 1, "config": {"a": "b"}}),
    "cluster-id": (zkdata.decode_cluster_id, {"version": "1", "id": "AAECAwQFBgcICQoLDA0ODw"}),
    "topics-to-move": (zkdata.decode_topics_to_move_file,
                       {"version": 1, "topics": [{"topic": "a"}, {"topic": "b"}]}),
}


# What each sample above means, written out by hand (not by the code under test).
DECODED = {
    "controller": 7,
    "broker": BrokerInfo(1, "127.0.0.1", 9092, 5, None),
    "topic": {0: ReplicaAssignment((1, 2), (1,), ()), 1: ReplicaAssignment((2, 3), (), (3,))},
    "state": LeaderIsr(2, 4, (2, 1), 3, 9),
    "reassign": ((TopicPartition("t", 0), (2, 3)), (TopicPartition("u", 1), (1,))),
    "reassign-file": ((TopicPartition("t", 0), (2, 3)),),
    "preferred": (TopicPartition("t", 0),),
    "isr-change": (TopicPartition("t", 0),),
    "election-file": (TopicPartition("t", 0), TopicPartition("t", 1)),
    "config": {"a": "b"},
    "cluster-id": "AAECAwQFBgcICQoLDA0ODw",
    "topics-to-move": ("a", "b"),
}


def test_every_valid_sample_decodes():
    assert sorted(DECODED) == sorted(DECODERS)
    for name, (decode, sample) in DECODERS.items():
        assert decode(json.dumps(sample).encode()) == DECODED[name], name
    assert zkdata.decode_controller_epoch(b"12") == 12


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


def decodes_or_reports(decode, data: bytes) -> None:
    try:
        decode(data)
    except ZnodeFormatError:
        pass  # anything else propagates and fails the test


@settings(max_examples=300)
@given(st.sampled_from(sorted(DECODERS)), st.binary(max_size=64))
def test_random_bytes_only_raise_format_errors(name, data):
    decodes_or_reports(DECODERS[name][0], data)
    decodes_or_reports(zkdata.decode_controller_epoch, data)


@settings(max_examples=300)
@given(st.sampled_from(sorted(DECODERS)), json_values)
def test_random_json_only_raises_format_errors(name, value):
    decodes_or_reports(DECODERS[name][0], json.dumps(value).encode())


def paths_in(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths_in(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths_in(child, prefix + (index,))


@settings(max_examples=600)
@given(st.sampled_from(sorted(DECODERS)), st.data())
def test_mutated_documents_only_raise_format_errors(name, data):
    decode, sample = DECODERS[name]
    document = copy.deepcopy(sample)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(paths_in(document))))
        replacement = data.draw(json_values | st.sampled_from([-1, 2**31, 2**40, "0", "x", [], {}]))
        if not path:
            document = replacement
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and data.draw(st.booleans()):
            del parent[path[-1]]
        elif isinstance(parent, dict) and data.draw(st.booleans()):
            parent[data.draw(st.text(max_size=4))] = parent.pop(path[-1])
        else:
            parent[path[-1]] = replacement
    decodes_or_reports(decode, json.dumps(document).encode())


# --- purity -----------------------------------------------------------------------------------


@pytest.mark.parametrize("module", [zkdata, zkpaths])
def test_modules_use_only_the_standard_library_and_values(module):
    imported = set()
    for node in ast.walk(ast.parse(pathlib.Path(module.__file__).read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported <= {"__future__", "base64", "functools", "itertools", "json", "re", "reprlib", "collections.abc",
                        "typing", "controller_core.values"}


# --- paths ------------------------------------------------------------------------------------


def test_paths_match_the_contract():
    assert zkpaths.CONTROLLER == "/controller"
    assert zkpaths.CONTROLLER_EPOCH == "/controller_epoch"
    assert zkpaths.BROKERS_IDS == "/brokers/ids"
    assert zkpaths.broker(3) == "/brokers/ids/3"
    assert zkpaths.TOPICS == "/brokers/topics"
    assert zkpaths.topic("t") == "/brokers/topics/t"
    assert zkpaths.partitions("t") == "/brokers/topics/t/partitions"
    assert zkpaths.partition("t", 0) == "/brokers/topics/t/partitions/0"
    assert zkpaths.partition_state("t", 7) == "/brokers/topics/t/partitions/7/state"
    assert zkpaths.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert zkpaths.PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    assert zkpaths.DELETE_TOPICS == "/admin/delete_topics"
    assert zkpaths.delete_topic("t") == "/admin/delete_topics/t"
    assert zkpaths.ISR_CHANGE_NOTIFICATION == "/isr_change_notification"
    assert zkpaths.ISR_CHANGE_PREFIX == "isr_change_"
    assert zkpaths.ISR_CHANGE_SEQUENCE_PREFIX == "/isr_change_notification/isr_change_"
    assert zkpaths.isr_change("0000000012") == "/isr_change_notification/isr_change_0000000012"
    assert zkpaths.isr_change("isr_change_0000000012") == zkpaths.isr_change("0000000012")
    assert zkpaths.isr_change_sequence("isr_change_0000000012") == "0000000012"
    assert zkpaths.isr_change_sequence("/isr_change_notification/isr_change_0000000001") == "0000000001"
    assert zkpaths.CONFIG_TOPICS == "/config/topics"
    assert zkpaths.config_topic("t") == "/config/topics/t"
    assert zkpaths.CLUSTER_ID == "/cluster/id"
    assert all(path.startswith("/") for path in zkpaths.PERSISTENT_PATHS)


@pytest.mark.parametrize(
    "build",
    [
        lambda: zkpaths.topic("a/b"),
        lambda: zkpaths.topic(""),
        lambda: zkpaths.topic(".."),
        lambda: zkpaths.config_topic("x\x00"),
        lambda: zkpaths.delete_topic("."),
        lambda: zkpaths.broker(-1),
        lambda: zkpaths.broker(True),
        lambda: zkpaths.partition("t", -1),
        lambda: zkpaths.partition_state("t", "0"),
        lambda: zkpaths.isr_change("12a"),
        lambda: zkpaths.isr_change_sequence("config_change_1"),
    ],
)
def test_paths_refuse_names_that_are_not_one_segment(build):
    with pytest.raises(ValueError):
        build()


_INT32 = st.integers(-(2**31), 2**31 - 1)


@given(_INT32, _INT32, _INT32, st.lists(_INT32, max_size=6), st.integers(0, 10**6))
def test_the_canonical_state_reader_agrees_with_the_strict_json_reader(leader, leader_epoch, controller_epoch, isr, version):
    """encode_partition_state's bytes take the fast reader; the same state with its keys in
    another order (as Kafka may write them) takes the strict JSON reader: the same value."""
    state = LeaderIsr(leader, leader_epoch, tuple(isr), controller_epoch, version)
    data = zkdata.encode_partition_state(state)
    reordered = json.dumps({"isr": isr, "controller_epoch": controller_epoch, "leader": leader,
                             "version": 1, "leader_epoch": leader_epoch}).encode()
    assert zkdata.decode_partition_state(data, version) == state
    assert zkdata.decode_partition_state(reordered, version) == state


@pytest.mark.parametrize("data, problem", [
    (b'{"version":1,"leader":3,"leader_epoch":2147483648,"controller_epoch":1,"isr":[3]}', "32-bit"),
    (b'{"version":1,"leader":3,"leader_epoch":0,"controller_epoch":1,"isr":[3,-2147483649]}', "32-bit"),
    (b'{"version":1,"leader":03,"leader_epoch":0,"controller_epoch":1,"isr":[3]}', "not valid JSON"),
    (b'{"version":1,"leader":3,"leader_epoch":0,"controller_epoch":1,"isr":[3,]}', "not valid JSON"),
])
def test_a_state_that_looks_canonical_but_is_not_gets_the_strict_readers_error(data, problem):
    with pytest.raises(zkdata.ZnodeFormatError, match=problem):
        zkdata.decode_partition_state(data, 0)


@pytest.mark.parametrize("partitions", [
    {"0": [1, 2], "1": [2, 3]},
    {"0": [], "7": [2147483647, -2147483648]},
    {"-1": [1]},
    {"0000000001": [1]},
])
def test_a_plainly_formed_topic_reads_as_the_entry_by_entry_checks_read_it(partitions):
    """The whole-map fast path (`_plain_partition_map`) against the entry-by-entry checks."""
    fast = zkdata._plain_partition_map(partitions)
    assert fast is not None
    assert list(fast.items()) == [(int(k), tuple(v)) for k, v in partitions.items()]


@pytest.mark.parametrize("partitions", [
    {"0": [1, True]}, {"0": [1, 2.0]}, {"0": (1,)}, {"0": [2147483648]}, {"01": [1], "1": [2]},
    {"00000000001": [1]}, {"a": [1]}, {"2147483648": [1]},
])
def test_anything_unusual_in_a_topic_goes_to_the_checks_that_name_it(partitions):
    assert zkdata._plain_partition_map(partitions) is None
