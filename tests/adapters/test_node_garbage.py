"""A node that has been closed or crashed, once dropped, is freed by reference counts: nothing
of it, and above all none of its per-partition values, waits for the cyclic garbage collector
(issue 16; docs/notes/issue-16-cyclic-garbage.md).

The failover benchmark restarts its victim on every run and drops a whole cluster per mode;
before, each dropped node was one reference cycle (the node's bound methods held by the
components it owns, bound-method tables, task/traceback cycles) with the controller's state
and the broker's replicas hanging off it: 3 million objects for the collector to find at
100,000 partitions, in a collection of seconds on the loop that runs the ZooKeeper heartbeats.

Measured with the collector off and `gc.DEBUG_SAVEALL`: `gc.collect()` then keeps everything
it found unreachable in `gc.garbage`, where the test can look at it."""
from __future__ import annotations

import asyncio
import collections
import gc

import pytest

from adapters.broker.broker import Broker
from adapters.broker.replica_manager import SimulatedReplicaManager
from adapters.controller.loop import ControllerLoop
from adapters.node import ClusterNode, NodeConfig
from adapters.sim.cluster import wait_for
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import force_expire
from controller_core.values import LeaderIsr, PartitionView, ReplicaAssignment, TopicPartition

FAST = {"zookeeper.session.timeout.ms": "4000", "auto.leader.rebalance.enable": "false",
        "replica.catch.up.delay.ms": "100", "replica.lag.time.max.ms": "30000"}
TOPICS, PER_TOPIC = 3, 100

NODE_TYPES = (ClusterNode, ControllerLoop, Broker, SimulatedReplicaManager)
PARTITION_TYPES = (TopicPartition, PartitionView, LeaderIsr, ReplicaAssignment)
PARTITIONS = TOPICS * PER_TOPIC
BOUND = 3 * PARTITIONS
"""Fewer cyclic objects than this per dropped node: before, a dropped node left 10 (a crashed
broker) to 30 (the controller's node) per partition; what is left does not grow with the
partitions: cycles of fixed size per node and per connection (the ZooKeeper session's,
aiozk's, asyncio's transports', the send queues': see the notes)."""


@pytest.fixture
def collector_off():
    """The collector off for the test (so that no automatic collection frees cycles unseen),
    back as it was afterwards."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    gc.set_debug(0)
    gc.garbage.clear()
    gc.collect()
    if was:
        gc.enable()


def cyclic_garbage() -> list:
    """Everything unreachable that only the cyclic collector would free, collected for real
    afterwards (so that the next call does not count it again)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = list(gc.garbage)
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
    return found


def summary(garbage: list) -> str:
    counts = collections.Counter(type(o).__qualname__ for o in garbage)
    return f"{len(garbage)} objects: " + ", ".join(f"{n} {t}" for t, n in counts.most_common(12))


async def test_a_crashed_then_a_closed_node_are_freed_without_the_cyclic_collector(zk_connect, tmp_path, admin,
                                                                                  collector_off):
    nodes = {}
    for b in (3, 1, 2):  # broker 3 first: the controller; broker 1 leads every partition
        settings = {**FAST, "process.roles": "broker,controller" if b == 3 else "broker"}
        nodes[b] = ClusterNode(NodeConfig(broker_id=b, zookeeper=zk_connect, journal_dir=str(tmp_path / f"node-{b}"),
                                          settings=settings))
        await nodes[b].start()

    def led_by(leader: int) -> bool:
        ctrl = nodes[3]
        if not (ctrl.active and ctrl.loop.state.active) or len(ctrl.loop.state.partitions) < TOPICS * PER_TOPIC:
            return False
        return all(info.leader_isr is not None and info.leader_isr.leader == leader
                   for info in ctrl.loop.state.partitions.values())

    async def until(predicate, what):
        await wait_for(lambda: asyncio.sleep(0, result=predicate()), timeout=60, what=what)

    try:
        await until(lambda: nodes[3].active and len(nodes[3].loop.state.brokers) == 3, "three brokers")
        await asyncio.gather(*(admin.create(zkpaths.topic(f"t{t}"), zkdata.encode_topic_assignment(
            {p: ReplicaAssignment((1, 2, 3) if p % 2 else (1, 3, 2)) for p in range(PER_TOPIC)}))
            for t in range(TOPICS)))
        await until(lambda: led_by(1), "every partition led by broker 1")
        cyclic_garbage()  # what starting and creating left (not this test's subject)

        # broker 1 crashes; its session is expired; the controller moves every leader away
        victim = nodes.pop(1)
        session_id, password = victim.zk.session_id, victim.zk.password
        await victim.crash()
        await force_expire(zk_connect, session_id, password)
        await until(lambda: led_by_any_but(nodes[3], 1), "leaders moved off broker 1")
        await victim.zk.close()
        await asyncio.sleep(0.5)  # the session's last callbacks run
        cyclic_garbage()  # the failover's and the closed connections' own (not the node's)
        del victim
        crashed = cyclic_garbage()
        assert not [o for o in crashed if isinstance(o, NODE_TYPES + PARTITION_TYPES)], summary(crashed)
        assert len(crashed) < BOUND, summary(crashed)

        # the controller's node, closed and dropped, with its state of 300 partitions
        ctrl = nodes.pop(3)
        await ctrl.close()
        await asyncio.sleep(0.5)
        cyclic_garbage()
        del ctrl
        closed = cyclic_garbage()
        assert not [o for o in closed if isinstance(o, NODE_TYPES + PARTITION_TYPES)], summary(closed)
        assert len(closed) < BOUND, summary(closed)
    finally:
        for node in nodes.values():
            if not node._stopping:
                await node.close()


def led_by_any_but(ctrl: ClusterNode, victim: int) -> bool:
    partitions = ctrl.loop.state.partitions
    return len(partitions) > 0 and all(info.leader_isr is not None and info.leader_isr.leader != victim
                                       for info in partitions.values())
