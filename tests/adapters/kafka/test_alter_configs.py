"""What AlterConfigs and IncrementalAlterConfigs make of a resource's overrides (pure), as Kafka
2.4's AdminManager decides it. The stock-client test (tests/integration/test_kafka_clients.py)
covers what librdkafka can send; these cover what it cannot (another broker's id, duplicates)."""
from __future__ import annotations

import pytest

from adapters.kafka import alter_configs as AC
from adapters.kafka import configs as CF
from adapters.kafka import protocol as K

TOPIC, BROKER = CF.TOPIC, CF.BROKER


def refused(fn, *args):
    with pytest.raises(AC.Refused) as caught:
        fn(*args)
    return caught.value.code, caught.value.message


def test_set_delete_append_and_subtract_on_a_topic():
    current = {"retention.ms": "1000", "segment.ms": "60000", "cleanup.policy": "delete"}
    new = AC.incremental(TOPIC, "t", current, [
        ("retention.ms", AC.SET, "2000"), ("segment.ms", AC.DELETE, None),
        ("cleanup.policy", AC.APPEND, "compact"), ("leader.replication.throttled.replicas", AC.APPEND, "0:1,1:2")])
    assert new == {"retention.ms": "2000", "cleanup.policy": "delete,compact",
                   "leader.replication.throttled.replicas": "0:1,1:2"}
    again = AC.incremental(TOPIC, "t", new, [("leader.replication.throttled.replicas", AC.SUBTRACT, "0:1,1:2"),
                                             ("cleanup.policy", AC.SUBTRACT, "delete")])
    assert again == {"retention.ms": "2000", "cleanup.policy": "compact"}  # an emptied list goes
    assert current == {"retention.ms": "1000", "segment.ms": "60000", "cleanup.policy": "delete"}  # not touched


def test_refusals_name_what_is_wrong_with_kafkas_codes():
    assert refused(AC.incremental, TOPIC, "t", {}, [("retention.ms", AC.SET, "1"), ("retention.ms", AC.DELETE, None)]) \
        == (K.INVALID_REQUEST, "Error due to duplicate config keys : retention.ms")
    assert refused(AC.incremental, TOPIC, "t", {}, [("retention.ms", AC.APPEND, "1")]) \
        == (K.INVALID_REQUEST, "Config value append is not allowed for config key: retention.ms")
    assert refused(AC.incremental, TOPIC, "t", {}, [("no.such", AC.SET, "1")]) \
        == (K.INVALID_CONFIG, "Unknown topic config name: no.such")
    code, message = refused(AC.incremental, TOPIC, "t", {}, [("retention.ms", AC.SET, "soon")])
    assert code == K.INVALID_REQUEST and message.startswith(
        "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): Invalid value soon for configuration retention.ms")
    assert refused(AC.incremental, BROKER, "1", {}, [("num.partitions", AC.SET, "3")])[0] == K.INVALID_REQUEST
    assert refused(AC.incremental, TOPIC, "t", {}, [("retention.ms", 7, "1")])[0] == K.INVALID_REQUEST


def test_broker_resources_are_this_broker_or_the_cluster_default():
    assert AC.entity(BROKER, "", 3) == ("brokers", "<default>")
    assert AC.entity(BROKER, "3", 3) == ("brokers", "3")
    assert refused(AC.entity, BROKER, "2", 3) == (K.INVALID_REQUEST, "Unexpected broker id, expected 3, but received 2")
    assert refused(AC.entity, BROKER, "x", 3) == (K.INVALID_REQUEST, "Broker id must be an integer, but it is: x")
    assert refused(AC.entity, 8, "g", 3)[0] == K.INVALID_REQUEST  # a group: not alterable here
    assert AC.entity(TOPIC, "t", 3) == ("topics", "t")


def test_alter_configs_replaces_the_overrides_whole_and_normalises_values():
    assert AC.replacement(TOPIC, "t", [("unclean.leader.election.enable", "TRUE"), ("segment.ms", None)]) \
        == {"unclean.leader.election.enable": "true"}
    assert AC.replacement(BROKER, "", [("unclean.leader.election.enable", "False")]) \
        == {"unclean.leader.election.enable": "false"}
