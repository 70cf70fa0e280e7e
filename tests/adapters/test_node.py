"""The runtime on a real ZooKeeper, with nodes in this process (fast): election and fencing,
session expiry, watch coverage, and the journal folding back to the live state."""
from __future__ import annotations

import asyncio
import json

import pytest

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import controller, partition_states, wait_for
from adapters.node import ClusterNode, NodeConfig
from adapters.zookeeper.session import force_expire
from controller_core import commands as C
from controller_core import events as E
from controller_core.values import LeaderIsr, ReplicaAssignment, TopicPartition

FAST = {"zookeeper.session.timeout.ms": "2000", "auto.leader.rebalance.enable": "false",
        "replica.catch.up.delay.ms": "100", "replica.lag.time.max.ms": "1500"}


async def start_nodes(zk_connect, tmp_path, ids=(1, 2, 3), **settings):
    nodes = []
    for i in ids:
        node = ClusterNode(NodeConfig(broker_id=i, zookeeper=zk_connect, journal_dir=str(tmp_path / f"node-{i}"),
                                      settings={**FAST, **settings}))
        await node.start()
        nodes.append(node)
    return nodes


async def active(nodes):
    found = [n for n in nodes if n.active and n.loop.state.active]
    return found[0] if len(found) == 1 else None


@pytest.fixture
async def cluster(zk_connect, tmp_path, admin):
    nodes = await start_nodes(zk_connect, tmp_path)
    yield nodes
    for n in nodes:
        if not n._stopping:
            await n.close()


async def create_topic(admin, topic, assignment):
    await admin.create(zkpaths.topic(topic), zkdata.encode_topic_assignment(
        {p: ReplicaAssignment(tuple(r)) for p, r in enumerate(assignment)}))


async def test_exactly_one_controller_with_epoch_1_then_failover_to_epoch_2(cluster, admin):
    first = await wait_for(lambda: active(cluster), what="a controller")
    assert await controller(admin) == (first.broker_id, 1)
    assert sum(n.active for n in cluster) == 1
    await first.close()
    rest = [n for n in cluster if n is not first]
    second = await wait_for(lambda: active(rest), what="a new controller")
    assert await controller(admin) == (second.broker_id, 2)
    assert second.loop.state.epoch == 2 and second.loop.state.epoch_zk_version == 2


async def test_a_controller_that_stops_cleanly_journals_the_end_of_its_term(cluster, admin, tmp_path):
    """The replay reads a stopped controller's term end from its journal, with the reason, and
    no longer infers it from the next controller's epoch."""
    from adapters.journal.format import read_journal
    from adapters.node import STOPPING
    from replay import local

    first = await wait_for(lambda: active(cluster), what="a controller")
    await first.close()
    rest = [n for n in cluster if n is not first]
    await wait_for(lambda: active(rest), what="a new controller")
    events = [r["body"] for r in read_journal(tmp_path / f"node-{first.broker_id}") if r["type"] == "event"]
    assert events[-1]["type"] == "ControllerResigned" and events[-1]["reason"] == STOPPING
    for n in rest:
        await n.close()
    terms = local.replay(tmp_path).tables["controller_terms"]
    mine = [t for t in terms if t["controller_id"] == first.broker_id and t["epoch"] == 1]
    assert len(mine) == 1 and mine[0]["reason"] == f"ControllerResigned: {STOPPING}" and mine[0]["end"], terms
    # the next controller stopped cleanly too: the latest term has its end as well
    assert [t["reason"] for t in terms] == [f"ControllerResigned: {STOPPING}"] * 2, terms


async def test_a_registration_rewritten_in_place_reaches_the_controller(cluster, admin, caplog):
    """A broker that rewrites its `/brokers/ids/<id>` data in the same session (a new rack or
    endpoint) is re-read, as Kafka's BrokerModifications does, and not taken for a bounce."""
    ctrl = await wait_for(lambda: active(cluster), what="a controller")
    other = next(n for n in cluster if n is not ctrl)
    before = ctrl.loop.state.brokers[other.broker_id]
    path = zkpaths.broker(other.broker_id)
    data, _ = await admin.get(path)
    doc = json.loads(data)
    doc["rack"] = "rack-moved"
    await admin.set(path, json.dumps(doc).encode())

    async def reread():
        info = ctrl.loop.state.brokers.get(other.broker_id)
        return info is not None and info.rack == "rack-moved"

    await wait_for(reread, what="the controller to re-read the registration")
    after = ctrl.loop.state.brokers[other.broker_id]
    assert after.epoch == before.epoch and (after.host, after.port) == (before.host, before.port)
    assert ctrl.active and other.broker_id in ctrl.loop.state.live_broker_ids

    # rewritten into garbage: an error naming the znode, and the broker is not taken for dead
    await admin.set(path, b"{not json")

    async def reported():
        return any("unreadable broker registration " + path in r.getMessage() for r in caplog.records)

    await wait_for(reported, what="the bad registration to be reported")
    await asyncio.sleep(0.3)  # the listing it produced has been stepped
    assert ctrl.active and other.broker_id in ctrl.loop.state.live_broker_ids
    assert ctrl.loop.state.brokers[other.broker_id] == after


async def test_expired_controller_resigns_and_its_late_writes_are_fenced(cluster, admin, zk_connect):
    old = await wait_for(lambda: active(cluster), what="a controller")
    await create_topic(admin, "t", [[1, 2, 3]])
    await wait_for(lambda: partition_states(admin, "t"), what="t-0 created")
    stale_version = old.loop.state.epoch_zk_version
    await force_expire(zk_connect, old.zk.session_id, old.zk.password)
    new = await wait_for(lambda: active([n for n in cluster if n is not old]), what="a new controller")
    await wait_for(lambda: asyncio.sleep(0, result=not old.loop.state.active), what="the old controller resigns")
    assert (await controller(admin))[1] == 2
    before = await partition_states(admin, "t")
    # a late write from the old term: rejected by the epoch check, nothing applied
    events = []
    old.writer.put_event = events.append
    old.writer.reset()
    write = C.WritePartitionStates(write_id=99, writes=(C.PartitionWrite(
        TopicPartition("t", 0), LeaderIsr(3, 50, (3,), 1, before[TopicPartition("t", 0)].zk_version + 1),
        before[TopicPartition("t", 0)].zk_version),))
    await old.writer._write_states(write, stale_version)
    assert [type(e) for e in events] == [E.ControllerFenced]
    after = (await partition_states(admin, "t"))[TopicPartition("t", 0)]
    # nothing of the late write landed (the partition's leader may have changed its ISR since)
    held = before[TopicPartition("t", 0)]
    assert (after.leader, after.leader_epoch, after.controller_epoch) == (held.leader, held.leader_epoch, held.controller_epoch)
    # and the old node competes again as a normal broker
    await wait_for(lambda: asyncio.sleep(0, result=old.registered.is_set()), what="re-registration")
    assert new.active


async def test_watches_turn_every_admin_znode_into_events_and_znodes(cluster, admin, zk_connect, tmp_path):
    ctrl = await wait_for(lambda: active(cluster), what="a controller")
    seen = ctrl.loop.stats.by_type

    # topic creation
    await create_topic(admin, "t", [[1, 2, 3], [2, 3, 1]])
    states = await wait_for(lambda: partition_states(admin, "t"), what="t created")
    assert {tp.partition: li.leader for tp, li in states.items()} == {0: 1, 1: 2}
    # partition expansion
    await admin.set(zkpaths.topic("t"), zkdata.encode_topic_assignment(
        {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1)), 2: ReplicaAssignment((3, 1, 2))}))
    await wait_for(lambda: _has(admin, "t", 2), what="t-2 created")
    # broker down and up
    (extra,) = await start_nodes(zk_connect, tmp_path, ids=(4,))
    await wait_for(lambda: asyncio.sleep(0, result=4 in ctrl.loop.state.brokers), what="broker 4 seen")
    await extra.close()
    await wait_for(lambda: asyncio.sleep(0, result=4 not in ctrl.loop.state.brokers), what="broker 4 gone")
    # ISR notification (leaders write these; here by hand)
    await admin.create(zkpaths.ISR_CHANGE_SEQUENCE_PREFIX, zkdata.encode_isr_change_notification([TopicPartition("t", 0)]),
                       sequential=True)
    await wait_for(lambda: asyncio.sleep(0, result=seen["PartitionStatesObserved"] >= 1), what="ISR notification")
    await wait_for(lambda: _children_empty(admin, zkpaths.ISR_CHANGE_NOTIFICATION), what="notification consumed")
    # preferred election: make broker 2 lead t-0 first by a controlled election away from 1
    await admin.create(zkpaths.PREFERRED_REPLICA_ELECTION, zkdata.encode_preferred_replica_election([TopicPartition("t", 0)]))
    await wait_for(lambda: _missing(admin, zkpaths.PREFERRED_REPLICA_ELECTION), what="preferred znode handled")
    # reassignment {1,2,3} -> {2,3,1} order change is a no-op; {1,2,3} -> {1,2} removes 3
    await admin.create(zkpaths.REASSIGN_PARTITIONS, zkdata.encode_reassignment([(TopicPartition("t", 0), (1, 2))]))
    await wait_for(lambda: _missing(admin, zkpaths.REASSIGN_PARTITIONS), timeout=30, what="reassignment done")
    data, _ = await admin.get(zkpaths.topic("t"))
    assert zkdata.decode_topic_assignment(data)[0] == ReplicaAssignment((1, 2))
    # deletion
    await admin.create(zkpaths.delete_topic("t"))
    await wait_for(lambda: _missing(admin, zkpaths.topic("t")), timeout=30, what="t deleted")
    await wait_for(lambda: _missing(admin, zkpaths.delete_topic("t")), what="deletion marker removed")
    for kind in ("BrokersChanged", "TopicsChanged", "TopicDeletionsRequested", "ReassignmentRequested",
                 "PreferredElectionRequested", "PartitionStatesObserved", "StopReplicaResponded"):
        assert seen[kind] >= 1, kind


async def test_journal_folds_back_to_the_live_state(cluster, admin):
    from controller_core import codec
    from controller_core.state import initial_state
    from controller_core.step import step
    from adapters.journal.format import read_journal

    ctrl = await wait_for(lambda: active(cluster), what="a controller")
    await create_topic(admin, "t", [[1, 2], [2, 3], [3, 1]])
    await wait_for(lambda: partition_states(admin, "t"), what="t created")
    await ctrl.loop.wait_idle()
    await asyncio.sleep(0.5)
    await ctrl.loop.wait_idle()
    ctrl.loop.journal.sync_blocking()
    state = initial_state(ctrl.loop.state.config)
    cluster_id = zkdata.decode_cluster_id((await admin.get("/cluster/id"))[0])
    heads = 0
    for record in read_journal(ctrl.loop.journal.directory):
        if record["type"] == "snapshot":
            heads += 1
            assert record["body"]["cluster_id"] == cluster_id  # journals say which cluster they belong to
            state = codec.decode_state(record["body"]["state"])
        elif record["type"] == "event":
            state, commands = step(state, codec.decode_event(record["body"]))
    assert heads and state == ctrl.loop.state


async def _has(admin, topic, partition):
    return TopicPartition(topic, partition) in await partition_states(admin, topic)


async def _missing(admin, path):
    return await admin.exists(path) is None


async def _children_empty(admin, path):
    return not await admin.get_children(path)


async def test_a_returning_broker_rejoins_the_isr(cluster, admin, zk_connect, tmp_path):
    ctrl = await wait_for(lambda: active(cluster), what="a controller")
    follower = next(n for n in cluster if n is not ctrl)
    await create_topic(admin, "t", [[ctrl.broker_id, follower.broker_id], [follower.broker_id, ctrl.broker_id]])
    await wait_for(lambda: _isr_sizes(admin, "t", 2), what="full ISRs")
    await follower.close()
    await wait_for(lambda: _isr_sizes(admin, "t", 1), what="ISRs without the closed broker")
    (back,) = await start_nodes(zk_connect, tmp_path, ids=(follower.broker_id,))
    cluster.append(back)
    await wait_for(lambda: _isr_sizes(admin, "t", 2), timeout=20, what="the returning broker back in every ISR")


async def _isr_sizes(admin, topic, size):
    states = await partition_states(admin, topic)
    return len(states) == 2 and all(len(li.isr) == size for li in states.values())


async def test_a_returning_former_controller_rejoins_the_isr(cluster, admin, zk_connect, tmp_path):
    ctrl = await wait_for(lambda: active(cluster), what="a controller")
    other = next(n for n in cluster if n is not ctrl)
    await create_topic(admin, "t", [[other.broker_id, ctrl.broker_id], [other.broker_id, ctrl.broker_id]])
    await wait_for(lambda: _isr_sizes(admin, "t", 2), what="full ISRs")
    await ctrl.close()
    await wait_for(lambda: active([n for n in cluster if n is not ctrl]), what="a new controller")
    await wait_for(lambda: _isr_sizes(admin, "t", 1), what="ISRs without the old controller")
    (back,) = await start_nodes(zk_connect, tmp_path, ids=(ctrl.broker_id,))
    cluster.append(back)
    await wait_for(lambda: _isr_sizes(admin, "t", 2), timeout=20, what="the returning broker back in every ISR")


async def test_a_crashed_component_takes_the_node_down_and_run_until_stopped_raises(zk_connect, tmp_path, admin):
    """The node's tasks share one task group: a task that fails cancels the others (the
    controller loop among them), ends the node's ZooKeeper session (its registration goes at
    once) and is raised by `run_until_stopped`, not logged and forgotten."""
    node = ClusterNode(NodeConfig(broker_id=7, zookeeper=zk_connect, journal_dir=str(tmp_path / "node-7"),
                                  settings=FAST))
    stop = asyncio.Event()
    running = asyncio.create_task(node.run_until_stopped(stop))
    async def started():
        return node.started

    await wait_for(started, what="the node to start")
    assert await admin.exists(zkpaths.broker(7))
    loop_task = next(t for t in asyncio.all_tasks() if t.get_name() == "controller-loop")

    class Broken(RuntimeError):
        pass

    async def fails():
        raise Broken("a component failed")

    node._spawn(fails(), "broken-component")
    with pytest.raises(Broken):
        await asyncio.wait_for(running, 30)
    assert isinstance(node.crashed, Broken)
    assert loop_task.cancelled()
    async def deregistered():
        return not await admin.exists(zkpaths.broker(7))

    await wait_for(deregistered, what="broker 7's registration to go with its session")
