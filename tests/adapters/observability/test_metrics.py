"""Prometheus metrics with Kafka's names: the JMX-exporter name mapping, Kafka's gauge
definitions on a state value, and a real scrape over HTTP of in-process nodes on a real
ZooKeeper while a broker fails and comes back."""
from __future__ import annotations

import asyncio
import math
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import partition_states, wait_for
from adapters.observability.metrics import (
    CONTROLLER_STATES,
    METRICS,
    MetricNameError,
    cluster_counts,
    metric,
    prometheus_name,
    quantile,
)
from adapters.node import ClusterNode, NodeConfig
from adapters.zookeeper.session import force_expire
from controller_core import events as E
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import BrokerInfo, LeaderIsr, ReplicaAssignment, TopicPartition

FAST = {"zookeeper.session.timeout.ms": "2000", "auto.leader.rebalance.enable": "false",
        "replica.catch.up.delay.ms": "100", "replica.lag.time.max.ms": "1500"}


# -- names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("jmx, expected", [
    ("kafka.controller:type=KafkaController,name=ActiveControllerCount",
     ("kafka_controller_kafkacontroller_activecontrollercount", ())),
    ("kafka.controller:type=KafkaController,name=OfflinePartitionsCount",
     ("kafka_controller_kafkacontroller_offlinepartitionscount", ())),
    ("kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
     ("kafka_controller_controllerstats_uncleanleaderelections_total", ())),
    ("kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs",
     ("kafka_controller_controllerstats_leaderelectionrateandtimems", ())),
    ("kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs",
     ("kafka_controller_controllereventmanager_eventqueuetimems", ())),
    ("kafka.controller:type=ControllerChannelManager,name=QueueSize,broker-id=3",
     ("kafka_controller_controllerchannelmanager_queuesize", ("broker_id",))),
    # the same rules cover the broker's metrics, with their extra keys as labels
    ("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t",
     ("kafka_server_brokertopicmetrics_bytesin_total", ("topic",))),
    ("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce",
     ("kafka_network_requestmetrics_totaltimems", ("request",))),
])
def test_names_follow_the_jmx_exporter_standard_kafka_rules(jmx, expected):
    assert prometheus_name(jmx) == expected


@pytest.mark.parametrize("bad", ["java.lang:type=Memory", "kafka.controller:name=X,type=Y",
                                 "kafka.controller:type=KafkaController", "kafka.controller:type=A,name=",
                                 "kafka.controller:type=A,name=B,a=1,b=2,c=3"])
def test_names_the_standard_rules_do_not_match_are_refused(bad):
    with pytest.raises(MetricNameError):
        prometheus_name(bad)


def test_every_documented_kafka_metric_is_named_by_the_mapping_and_the_issue_list_is_covered():
    for d in METRICS:
        if d.jmx is not None:
            assert prometheus_name(d.jmx) == (d.name, d.labels), d.jmx
        else:
            assert d.name.startswith("kctl_"), d.name
    for name in ("ActiveControllerCount", "OfflinePartitionsCount", "PreferredReplicaImbalanceCount",
                 "GlobalTopicCount", "GlobalPartitionCount", "TopicsToDeleteCount", "ReplicasToDeleteCount",
                 "TopicsIneligibleToDeleteCount", "ReplicasIneligibleToDeleteCount", "ControllerState",
                 "EventQueueSize", "EventQueueTimeMs", "LeaderElectionRateAndTimeMs",
                 "UncleanLeaderElectionsPerSec", "QueueSize", "TotalQueueSize", "LogDirChangeRateAndTimeMs",
                 "UncleanLeaderElectionEnableRateAndTimeMs", "ControllerShutdownRateAndTimeMs"):
        assert metric(name).jmx.split("name=")[1].split(",")[0] == name
    assert len({d.name for d in METRICS}) == len(METRICS)
    # Kafka 2.4's ControllerState numbers
    assert [CONTROLLER_STATES[s] for s in ("Idle", "BrokerChange", "AlterPartitionReassignment",
                                           "ControlledShutdown", "LeaderAndIsrResponseReceived")] == [0, 2, 5, 8, 10]


def test_quantiles_are_nearest_rank_and_nan_when_empty():
    assert math.isnan(quantile([], 0.5))
    values = [float(v) for v in range(1, 101)]
    assert (quantile(values, 0.5), quantile(values, 0.99), quantile(values, 0.999)) == (50.0, 99.0, 100.0)


def test_a_taken_metrics_port_is_an_os_error_naming_the_endpoint():
    import socket

    from adapters.observability.metrics import MetricsError, NodeMetrics

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsError) as caught:
            NodeMetrics(node=None).serve("127.0.0.1", port)
    assert isinstance(caught.value, OSError) and caught.value.strerror
    assert caught.value.filename == f"metrics endpoint 127.0.0.1:{port}"


# -- Kafka's gauge definitions on a state value -----------------------------------------------------


def elected(brokers, topics, states, to_delete=()):
    snap = E.ClusterSnapshot(brokers=tuple(BrokerInfo(b, "127.0.0.1", 9000 + b, 100 + b) for b in brokers),
                             topics=tuple((t, tuple((p, ReplicaAssignment(r)) for p, r in enumerate(parts)))
                                          for t, parts in topics.items()),
                             partition_states=tuple(states.items()), topics_to_delete=frozenset(to_delete))
    config = ControllerConfig(broker_id=brokers[0], auto_leader_rebalance_enable=False)
    state, _ = step(initial_state(config), E.ControllerElected(at=1, epoch=1, epoch_zk_version=0, snapshot=snap))
    return state


def test_offline_and_imbalance_follow_kafkas_definitions():
    tp = TopicPartition
    topics = {"a": [[1, 2], [2, 1]], "b": [[3]]}
    states = {tp("a", 0): LeaderIsr(1, 0, (1, 2), 1, 0),   # preferred leader, full ISR
              tp("a", 1): LeaderIsr(1, 0, (1,), 1, 0),     # not the preferred leader, ISR short
              tp("b", 0): LeaderIsr(3, 0, (3,), 1, 0)}     # led by broker 3, which is not live
    counts = cluster_counts(elected([1, 2], topics, states))
    assert (counts.offline, counts.imbalance, counts.under_replicated) == (1, 2, 1)
    # a topic queued for deletion counts in neither; its undeleted replicas are counted
    counts = cluster_counts(elected([1, 2], topics, states, to_delete={"b"}))
    assert (counts.offline, counts.imbalance, counts.replicas_to_delete) == (0, 1, 1)


def test_a_broker_change_is_timed_until_its_writes_land_and_is_the_state_while_they_are_in_flight():
    from adapters.observability.metrics import ControllerStats
    from benchmarks.core_step import AT, cluster
    from controller_core import commands as Cmd

    state = cluster(200)
    event = E.BrokersChanged(at=AT, brokers=tuple(state.brokers[b] for b in (2, 3, 4, 5)))
    decided, commands = step(state, event)
    write = next(c for c in commands if type(c) is Cmd.WritePartitionStates)
    outcome = E.PartitionStatesWritten(at=AT, write_id=write.write_id,
                                       versions=tuple((w.tp, w.leader_isr.zk_version) for w in write.writes))
    released, released_commands = step(decided, outcome)
    stats = ControllerStats()

    def timing(before, after, cmds, done, enqueued):
        return {"enqueued": enqueued, "queue_ms": 0.5, "journal_ms": 0.25, "step_ms": 10.0, "execute_ms": 0.0,
                "done": done, "commands": cmds, "before": before, "state": after, "seq": None}

    stats(event, timing(state, decided, commands, done=100.010, enqueued=99.0))
    leader_election = stats.timers["BrokerChange"]
    assert leader_election.count == 0  # not done until ZooKeeper has the new leaders
    assert stats.state_while(None) == CONTROLLER_STATES["BrokerChange"]  # Kafka's thread would be in it
    assert stats.state_while(outcome) == CONTROLLER_STATES["BrokerChange"]
    stats(outcome, timing(decided, released, released_commands, done=100.310, enqueued=100.250))
    assert stats.state_while(None) == 0
    _, count, total = leader_election.snapshot()
    assert count == 1 and total == pytest.approx(310.0)  # from the decision's start to its release
    _, count, total = stats.zk_write_time.snapshot()
    assert count == 1 and total == pytest.approx(240.0)  # issued at 100.010, outcome queued at 100.250
    assert stats.partition_state_writes == 200


# -- a real scrape ------------------------------------------------------------------------------------


def node_config(zk_connect, tmp_path, broker_id):
    return NodeConfig(broker_id=broker_id, zookeeper=zk_connect, journal_dir=str(tmp_path / f"node-{broker_id}"),
                      metrics_port=0, settings=dict(FAST))


async def scrape(node) -> dict:
    url = f"http://127.0.0.1:{node.metrics.port}/metrics"
    body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read().decode())
    return {f.name: f for f in text_string_to_metric_families(body)}


def value(families, name, **labels):
    found = [s.value for f in families.values() for s in f.samples
             if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def documented_samples() -> set[str]:
    names = set()
    for d in METRICS:
        names |= {d.name, d.name + "_count", d.name + "_sum"} if d.kind == "summary" else {d.name}
    return names


async def test_scrape_while_a_broker_fails_and_returns(zk_connect, tmp_path, admin):
    nodes = []
    try:
        for i in (1, 2, 3):
            node = ClusterNode(node_config(zk_connect, tmp_path, i))
            await node.start()
            nodes.append(node)
        ctrl = await wait_for(lambda: _active(nodes), what="a controller")
        await wait_for(lambda: asyncio.sleep(0, result=len(ctrl.loop.state.brokers) == 3), what="3 brokers")
        victim = next(n for n in nodes if n is not ctrl)
        await admin.create(zkpaths.topic("solo"), zkdata.encode_topic_assignment(
            {0: ReplicaAssignment((victim.broker_id,))}))
        await wait_for(lambda: _leader(admin, victim.broker_id), what="solo-0 led by its only replica")

        scrapes = {n.broker_id: await scrape(n) for n in nodes}
        active = {b: value(s, metric("ActiveControllerCount").name) for b, s in scrapes.items()}
        assert active == {n.broker_id: 1.0 if n is ctrl else 0.0 for n in nodes}
        seen = scrapes[ctrl.broker_id]
        samples = {s.name for f in seen.values() for s in f.samples}
        assert samples == documented_samples()
        assert value(seen, metric("OfflinePartitionsCount").name) == 0
        assert value(seen, metric("GlobalPartitionCount").name) == 1
        assert value(seen, metric("GlobalTopicCount").name) == 1
        assert {s.labels["broker_id"] for s in seen[metric("QueueSize").name].samples} == {"1", "2", "3"}
        other = scrapes[victim.broker_id]
        assert value(other, metric("GlobalPartitionCount").name) == 0  # Kafka: 0 unless controller
        assert value(other, metric("OfflinePartitionsCount").name) == 0
        assert value(seen, "kctl_controller_events_total", event="ControllerElected") == 1

        # the only replica's broker dies: its session expires as a killed process's would
        await victim.crash()
        await force_expire(zk_connect, victim.zk.session_id, victim.zk.password)
        down = await wait_for(lambda: _scraped(ctrl, "OfflinePartitionsCount", 1), what="OfflinePartitionsCount 1")
        assert value(down, metric("LeaderElectionRateAndTimeMs").name + "_count") >= 1  # the BrokerChange decision
        assert {s.labels["broker_id"] for s in down[metric("QueueSize").name].samples} == {
            str(n.broker_id) for n in nodes if n is not victim}

        # it comes back and leads its partition again
        back = ClusterNode(node_config(zk_connect, tmp_path, victim.broker_id))
        await back.start()
        nodes[nodes.index(victim)] = back
        up = await wait_for(lambda: _scraped(ctrl, "OfflinePartitionsCount", 0), what="OfflinePartitionsCount 0")
        assert value(up, "kctl_controller_leader_elections_total") >= 1
        assert value(up, metric("UncleanLeaderElectionsPerSec").name) == 0
        assert value(up, "kctl_controller_epoch") == ctrl.loop.state.epoch
    finally:
        for n in nodes:
            if not n._stopping:
                await n.close()


async def _active(nodes):
    found = [n for n in nodes if n.active and n.loop.state.active]
    return found[0] if len(found) == 1 else None


async def _leader(admin, broker_id):
    states = await partition_states(admin, "solo")
    li = states.get(TopicPartition("solo", 0))
    return li is not None and li.leader == broker_id


async def _scraped(node, kafka_name, expected):
    families = await scrape(node)
    return families if value(families, metric(kafka_name).name) == expected else None
