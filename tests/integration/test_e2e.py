"""End-to-end: the seeds' flows against a running cluster on a real ZooKeeper, driven by the
admin tools (`kctl topics`, `reassign-partitions`, `leader-election`, `cluster`), asserting the
znodes and the brokers' metadata afterwards.

Brokers whose metadata is asserted run in this process (`ClusterNode`, whose `broker.metadata()`
is readable); brokers that are SIGKILLed or SIGTERMed are real `kctl node` processes
(`LocalCluster`). Both kinds join the same cluster. An in-process broker "fails" by closing
(its ZooKeeper session ends at once, as a crashed broker's ends at the session timeout).
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.cli import main
from adapters.sim.cluster import LocalCluster, controller, live_broker_ids, partition_states, wait_for
from adapters.node import ClusterNode, NodeConfig
from controller_core.assignment import expand_partitions
from controller_core.values import LeaderIsr, TopicPartition
from replay import local

FAST = {
    "zookeeper.session.timeout.ms": "2000",
    "replica.catch.up.delay.ms": "100",
    "replica.lag.time.max.ms": "1500",
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "200",
}


class Cluster:
    """In-process nodes (`start`) and `kctl node` processes (`spawn`) on one chroot."""

    def __init__(self, connect: str, base, settings: dict):
        self.connect = connect
        self.base = base
        self.settings = {**FAST, **settings}
        self.nodes: dict[int, ClusterNode] = {}
        self.procs = LocalCluster(connect, base / "procs", settings=self.settings)

    async def start(self, *ids: int) -> None:
        for i in ids:
            node = ClusterNode(NodeConfig(broker_id=i, zookeeper=self.connect, journal_dir=str(self.base / f"node-{i}"),
                                          settings=self.settings))
            await node.start()
            self.nodes[i] = node

    async def fail(self, broker_id: int) -> None:
        """An in-process broker goes away without a controlled shutdown."""
        await self.nodes.pop(broker_id).close()

    def spawn(self, *ids: int) -> None:
        for i in ids:
            self.procs.start_node(i)

    async def kill(self, broker_id: int) -> None:
        await asyncio.to_thread(self.procs.kill, broker_id)

    async def terminate(self, broker_id: int) -> int | None:
        return await asyncio.to_thread(self.procs.stop, broker_id, 60)

    def in_process(self) -> list[ClusterNode]:
        return list(self.nodes.values())

    async def close(self) -> None:
        for node in list(self.nodes.values()):
            await node.close()
        self.nodes.clear()
        await asyncio.to_thread(self.procs.stop_all)


@pytest.fixture
async def make_cluster(zk_connect, tmp_path):
    made = []

    def make(**settings) -> Cluster:
        c = Cluster(zk_connect, tmp_path / f"cluster-{len(made)}", settings)
        made.append(c)
        return c

    yield make
    for c in made:
        await c.close()


@pytest.fixture
def kctl(zk_connect, capsys):
    async def run(command, *args):
        capsys.readouterr()
        rc = await asyncio.to_thread(main, [command, "--zookeeper", zk_connect, *args])
        captured = capsys.readouterr()
        return rc, captured.out, captured.err

    return run


# -- reading the cluster -------------------------------------------------------------------------


async def assignment_of(admin, topic) -> dict[int, list[int]]:
    data, _ = await admin.get(zkpaths.topic(topic))
    return {int(p): r for p, r in json.loads(data)["partitions"].items()}


async def topic_json(admin, topic) -> dict:
    data, _ = await admin.get(zkpaths.topic(topic))
    return json.loads(data)


async def states_of(admin, topic) -> dict:
    return {tp.partition: li for tp, li in (await partition_states(admin, topic)).items()}


async def missing(admin, path) -> bool:
    return await admin.exists(path) is None


async def a_controller(admin):
    holder, epoch = await controller(admin)
    return (holder, epoch) if holder is not None else None


async def registered(admin, ids) -> bool:
    return set(await live_broker_ids(admin)) == set(ids)


async def settled(admin, topic, n_partitions=None):
    """Every partition has a live leader and a full ISR: {partition: LeaderIsr}."""
    assignment = await assignment_of(admin, topic)
    if n_partitions is not None and len(assignment) != n_partitions:
        return None
    states = await states_of(admin, topic)
    live = set(await live_broker_ids(admin))
    for p, replicas in assignment.items():
        li = states.get(p)
        if li is None or li.leader not in live or set(li.isr) != set(replicas):
            return None
    return states


async def expected_metadata(admin, topics) -> dict:
    out = {}
    for t in topics:
        if await missing(admin, zkpaths.topic(t)):
            continue
        assignment = await assignment_of(admin, t)
        for p, li in (await states_of(admin, t)).items():
            out[f"{t}-{p}"] = {"leader": li.leader, "leader_epoch": li.leader_epoch, "isr": list(li.isr),
                               "replicas": assignment[p]}
    return out


async def metadata_matches(admin, nodes, topics):
    """Every in-process broker's metadata cache holds exactly the znodes' view of `topics` and
    the registered brokers."""
    expected = await expected_metadata(admin, topics)
    live = await live_broker_ids(admin)
    for node in nodes:
        md = node.broker.metadata()
        got = {k: v for k, v in md["partitions"].items() if k.rsplit("-", 1)[0] in topics}
        if got != expected or md["brokers"] != live:
            return None
    return expected or True


def csv(ids) -> str:
    return ",".join(map(str, ids))


async def until(predicate, what, timeout=20.0):
    return await wait_for(predicate, timeout=timeout, interval=0.05, what=what)


# -- topics --------------------------------------------------------------------------------------


async def test_topic_creation_and_partition_expansion(make_cluster, admin, kctl):
    cluster = make_cluster()
    await cluster.start(1, 2, 3)
    _, epoch = await until(lambda: a_controller(admin), "a controller")

    rc, out, err = await kctl("topics", "--create", "--topic", "t", "--partitions", "3", "--replication-factor", "2")
    assert (rc, out) == (0, "Created topic t.\n"), err
    created = await assignment_of(admin, "t")
    states = await until(lambda: settled(admin, "t"), "t online")
    for p, replicas in created.items():
        li = states[p]
        assert (li.leader, li.leader_epoch, list(li.isr), li.controller_epoch) == (replicas[0], 0, replicas, epoch)
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t"]), "brokers' metadata of t")
    rc, out, _ = await kctl("topics", "--describe", "--topic", "t")
    assert out.splitlines()[0] == "Topic: t\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: "
    for p, replicas in created.items():
        assert (f"\tTopic: t\tPartition: {p}\tLeader: {replicas[0]}\tReplicas: {csv(replicas)}\tIsr: {csv(replicas)}"
                in out.splitlines())

    rc, out, err = await kctl("topics", "--alter", "--topic", "t", "--partitions", "7")
    assert rc == 0 and out.endswith("Adding partitions succeeded!\n"), err
    grown = await assignment_of(admin, "t")
    assert {p: grown[p] for p in range(3)} == created
    assert {p: grown[p] for p in range(3, 7)} == expand_partitions(created, [(1, None), (2, None), (3, None)], 7)
    start = [1, 2, 3].index(grown[0][0])  # the new partitions continue the round robin of creation
    assert [grown[p][0] for p in range(7)] == [[1, 2, 3][(start + p) % 3] for p in range(7)]
    states = await until(lambda: settled(admin, "t", 7), "t-3..t-6 online")
    for p in range(3, 7):
        assert (states[p].leader, states[p].leader_epoch, list(states[p].isr)) == (grown[p][0], 0, grown[p])
    for p in range(3):
        assert states[p].leader_epoch == 0  # untouched
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t"]), "brokers' metadata of t-0..t-6")


async def test_broker_failure_and_return_then_preferred_elections(make_cluster, admin, kctl):
    cluster = make_cluster()
    await cluster.start(1, 2, 3)
    await until(lambda: a_controller(admin), "a controller")
    cluster.spawn(4)  # a real process, to SIGKILL
    await until(lambda: registered(admin, (1, 2, 3, 4)), "broker 4 registered", timeout=30)

    rc, _, err = await kctl("topics", "--create", "--topic", "t", "--partitions", "4", "--replication-factor", "3")
    assert rc == 0, err
    rc, _, err = await kctl("topics", "--create", "--topic", "solo", "--replica-assignment", "4")
    assert rc == 0, err
    before = await until(lambda: settled(admin, "t"), "t online")
    await until(lambda: settled(admin, "solo"), "solo online")
    assignment = await assignment_of(admin, "t")
    on4 = {p for p, r in assignment.items() if 4 in r}
    assert len({r[0] for r in assignment.values()}) == 4  # one preferred leader per broker

    # broker failure: leaders move, the dead replica leaves the ISR, leader epochs bump by one
    await cluster.kill(4)
    await until(lambda: registered(admin, (1, 2, 3)), "broker 4's session expires", timeout=30)

    async def failed_over():
        states = await states_of(admin, "t")
        if all(4 not in states[p].isr for p in on4):
            return states
    after = await until(failed_over, "broker 4 out of every ISR of t")
    for p, li in after.items():
        old = before[p]
        if p in on4:
            assert li.leader_epoch == old.leader_epoch + 1, (p, old, li)
            assert li.leader != 4 and li.leader in li.isr
            assert set(li.isr) == set(old.isr) - {4}
            assert li.leader == (old.leader if old.leader != 4 else next(r for r in assignment[p] if r != 4))
        else:
            assert li == old
    solo = (await states_of(admin, "solo"))[0]
    assert (solo.leader, list(solo.isr), solo.leader_epoch) == (-1, [4], 1)  # offline; the last ISR member stays
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t", "solo"]), "metadata after the failure")
    rc, out, _ = await kctl("cluster", "--json")
    summary = json.loads(out)
    assert summary["live_brokers"] == [1, 2, 3] and summary["offline_partitions"] == 1
    assert summary["under_replicated_partitions"] == len(on4)  # solo-0's ISR is still its one replica

    # topic creation with a replica on the down broker: the live replicas lead
    rc, _, err = await kctl("topics", "--create", "--topic", "d", "--replica-assignment", "4:1,1:4")
    assert rc == 0, err
    d = await until(lambda: _all_states(admin, "d", 2), "d created")
    assert [(li.leader, list(li.isr), li.leader_epoch) for _, li in sorted(d.items())] == [(1, [1], 0), (1, [1], 0)]
    rc, _, err = await kctl("topics", "--create", "--topic", "lonely", "--replica-assignment", "4")
    assert rc == 0, err
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t", "solo", "d"]), "metadata of d")
    assert await states_of(admin, "lonely") == {}  # no live replica: the partition stays New, no state yet

    # broker return: its replicas come back into the ISRs, the offline partition is elected
    cluster.spawn(4)
    await until(lambda: registered(admin, (1, 2, 3, 4)), "broker 4 back", timeout=30)
    returned = await until(lambda: settled(admin, "t"), "t's ISRs complete again")
    await until(lambda: settled(admin, "solo"), "solo-0 elected")
    await until(lambda: settled(admin, "d"), "d's ISRs complete")
    lonely = (await until(lambda: settled(admin, "lonely"), "lonely-0 initialised"))[0]
    assert (lonely.leader, lonely.isr, lonely.leader_epoch) == (4, (4,), 0)
    solo = (await states_of(admin, "solo"))[0]
    # created at 0, bumped when its replica went offline, bumped by the election on return
    assert (solo.leader, solo.isr, solo.leader_epoch) == (4, (4,), 2)
    for p in on4:
        assert returned[p].leader_epoch == after[p].leader_epoch  # ISR expansion does not bump it
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t", "solo", "d", "lonely"]),
                "metadata after return")
    imbalanced = sorted(p for p, li in returned.items() if li.leader != assignment[p][0])
    assert imbalanced, "broker 4's preferred partitions are led elsewhere (no automatic rebalance here)"

    # preferred-replica election on request, through the admin znode ...
    first = imbalanced[0]
    await admin.create(zkpaths.PREFERRED_REPLICA_ELECTION,
                       zkdata.encode_preferred_replica_election([TopicPartition("t", first)]))
    await until(lambda: missing(admin, zkpaths.PREFERRED_REPLICA_ELECTION), "the preferred election znode handled")
    li = (await states_of(admin, "t"))[first]
    assert (li.leader, li.leader_epoch) == (assignment[first][0], returned[first].leader_epoch + 1)

    # ... and through kctl leader-election
    rc, out, err = await kctl("leader-election", "--election-type", "PREFERRED", "--all-topic-partitions")
    assert rc == 0, (out, err)
    elected = sorted([TopicPartition("t", p) for p in imbalanced[1:]] + [TopicPartition("d", 0)])
    lines = out.splitlines()
    assert lines[0] == "Successfully completed leader election (PREFERRED) for partitions " + ", ".join(map(str, elected))
    assert lines[1].startswith("Valid replica already elected for partitions ") and len(lines) == 2
    final = await states_of(admin, "t")
    assert all(final[p].leader == assignment[p][0] for p in final)
    d = await states_of(admin, "d")
    assert d[0].leader == 4 and d[1].leader == 1
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t", "solo", "d"]), "metadata after elections")
    rc, out, _ = await kctl("cluster", "--json")
    summary = json.loads(out)
    assert (summary["offline_partitions"], summary["under_replicated_partitions"],
            summary["preferred_replica_imbalance"]) == (0, 0, 0)


async def _all_states(admin, topic, n):
    states = await states_of(admin, topic)
    return states if len(states) == n else None


# -- reassignment --------------------------------------------------------------------------------


async def test_reassignment_goes_through_the_full_replica_set(make_cluster, admin, kctl, tmp_path):
    cluster = make_cluster()
    await cluster.start(1, 2, 3, 4)
    await until(lambda: a_controller(admin), "a controller")
    rc, _, err = await kctl("topics", "--create", "--topic", "r", "--replica-assignment", "1:2:3")
    assert rc == 0, err
    await until(lambda: settled(admin, "r"), "r-0 online")

    seen = []
    watch = await admin.watch_data(zkpaths.topic("r"), lambda v: v and seen.append(json.loads(v[0])))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "r", "partition": 0, "replicas": [2, 3, 4]}]}))
    rc, out, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", str(plan))
    assert rc == 0 and out.endswith("Successfully started reassignment of partitions.\n"), err
    await until(lambda: missing(admin, zkpaths.REASSIGN_PARTITIONS), "the reassignment finished", timeout=30)
    watch.cancel()

    # AR = OAR + RAR while the new replica catches up
    assert {"version": 2, "partitions": {"0": [2, 3, 4, 1]}, "adding_replicas": {"0": [4]},
            "removing_replicas": {"0": [1]}} in seen, seen
    assert await topic_json(admin, "r") == {"version": 2, "partitions": {"0": [2, 3, 4]}, "adding_replicas": {},
                                            "removing_replicas": {}}
    li = (await states_of(admin, "r"))[0]
    # leader epoch: +1 with the new replica set, +1 moving the leader off 1, +1 taking 1 out of the ISR
    assert (li.leader, sorted(li.isr), li.leader_epoch) == (2, [2, 3, 4], 3)
    rc, out, _ = await kctl("reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
    assert out.splitlines() == ["Status of partition reassignment: ",
                                "Reassignment of partition r-0 completed successfully"]
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["r"]), "metadata after the reassignment")
    # the removed replica was stopped and deleted on broker 1; the added one runs on 4
    assert "r-0" not in cluster.nodes[1].broker.replicas()
    assert cluster.nodes[4].broker.replicas()["r-0"]["role"] == "follower"
    assert cluster.nodes[2].broker.replicas()["r-0"]["role"] == "leader"


async def test_reassignment_halted_by_an_offline_target_resumes_when_it_returns(make_cluster, admin, kctl, tmp_path):
    cluster = make_cluster()
    await cluster.start(1, 2, 3, 4)
    holder, _ = await until(lambda: a_controller(admin), "a controller")
    assert holder != 4
    rc, _, err = await kctl("topics", "--create", "--topic", "h", "--replica-assignment", "1:2")
    assert rc == 0, err
    await until(lambda: settled(admin, "h"), "h-0 online")
    await cluster.fail(4)
    await until(lambda: registered(admin, (1, 2, 3)), "broker 4 gone")

    # the tool refuses a target that is not registered (as Kafka's does), and writes nothing
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "h", "partition": 0, "replicas": [2, 4]}]}))
    before = await topic_json(admin, "h")
    rc, out, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", str(plan))
    assert rc == 2 and err == "error: The proposed assignment contains non-existent brokerIDs: 4\n"
    assert await missing(admin, zkpaths.REASSIGN_PARTITIONS) and await topic_json(admin, "h") == before

    # another tool writes the request anyway: the controller starts it and halts
    await admin.create(zkpaths.REASSIGN_PARTITIONS, zkdata.encode_reassignment([(TopicPartition("h", 0), [2, 4])]))
    halted = {"version": 2, "partitions": {"0": [2, 4, 1]}, "adding_replicas": {"0": [4]},
              "removing_replicas": {"0": [1]}}

    async def started():
        return await topic_json(admin, "h") == halted
    await until(started, "RS = OAR + RAR written")
    await asyncio.sleep(1.5)
    assert await topic_json(admin, "h") == halted
    assert not await missing(admin, zkpaths.REASSIGN_PARTITIONS)
    li = (await states_of(admin, "h"))[0]
    assert (li.leader, list(li.isr), li.leader_epoch) == (1, [1, 2], 1)
    rc, out, _ = await kctl("reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
    assert out.splitlines()[1] == "Reassignment of partition h-0 is still in progress"

    await cluster.start(4)
    await until(lambda: missing(admin, zkpaths.REASSIGN_PARTITIONS), "the reassignment resumed and finished")
    assert await topic_json(admin, "h") == {"version": 2, "partitions": {"0": [2, 4]}, "adding_replicas": {},
                                            "removing_replicas": {}}
    li = (await states_of(admin, "h"))[0]
    # as Kafka 2.4: +1 starting it, +1 resuming it when broker 4 returns (onBrokerStartup re-runs
    # onPartitionReassignment), +1 moving the leader off 1, +1 taking 1 out of the ISR
    assert (li.leader, sorted(li.isr), li.leader_epoch) == (2, [2, 4], 4)
    rc, out, _ = await kctl("reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
    assert out.splitlines()[1] == "Reassignment of partition h-0 completed successfully"
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["h"]), "metadata after the reassignment")
    assert "h-0" not in cluster.nodes[1].broker.replicas()


async def test_controller_killed_during_a_reassignment_the_new_controller_finishes_it(make_cluster, admin, kctl,
                                                                                     tmp_path):
    # a slow catch-up keeps the reassignment in flight long enough to kill the controller
    cluster = make_cluster(**{"replica.catch.up.delay.ms": "2500"})
    cluster.spawn(1, 2, 3, 4)
    await until(lambda: registered(admin, (1, 2, 3, 4)), "four brokers", timeout=30)
    old, epoch = await until(lambda: a_controller(admin), "a controller")
    await cluster.start(5)  # an in-process observer (no replicas), for the metadata
    a, b, d = [x for x in (1, 2, 3, 4) if x != old]
    rc, _, err = await kctl("topics", "--create", "--topic", "k", "--replica-assignment", f"{a}:{b}")
    assert rc == 0, err
    await until(lambda: settled(admin, "k"), "k-0 online")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "k", "partition": 0, "replicas": [b, d]}]}))
    rc, _, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", str(plan))
    assert rc == 0, err

    async def in_flight():
        return (await topic_json(admin, "k")).get("adding_replicas") == {"0": [d]}
    await until(in_flight, "the reassignment in flight")
    await cluster.kill(old)
    new, new_epoch = await until(lambda: _moved(admin, old), "a new controller", timeout=30)
    assert new_epoch == epoch + 1
    await until(lambda: missing(admin, zkpaths.REASSIGN_PARTITIONS), "the new controller finishes it", timeout=30)
    assert await topic_json(admin, "k") == {"version": 2, "partitions": {"0": [b, d]}, "adding_replicas": {},
                                            "removing_replicas": {}}
    li = (await states_of(admin, "k"))[0]
    assert (li.leader, sorted(li.isr), li.controller_epoch) == (b, sorted([b, d]), new_epoch)
    rc, out, _ = await kctl("reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
    assert out.splitlines()[1] == "Reassignment of partition k-0 completed successfully"
    rc, out, _ = await kctl("cluster", "--json")
    summary = json.loads(out)
    assert (summary["controller"], summary["controller_epoch"], summary["partitions_being_reassigned"]) == \
        (new, new_epoch, 0)
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["k"]), "metadata from the new controller")
    assert cluster.nodes[5].broker.controller_epoch == new_epoch


async def _moved(admin, old):
    found = await a_controller(admin)
    return found if found is not None and found[0] != old else None


# -- leader elections ----------------------------------------------------------------------------


async def test_automatic_preferred_election_after_imbalance(make_cluster, admin, kctl):
    cluster = make_cluster(**{"auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "1"})
    await cluster.start(1, 2, 3)
    holder, _ = await until(lambda: a_controller(admin), "a controller")
    victim = max(b for b in (1, 2, 3) if b != holder)
    rc, _, err = await kctl("topics", "--create", "--topic", "t", "--replica-assignment", "1:2:3,2:3:1,3:1:2")
    assert rc == 0, err
    await until(lambda: settled(admin, "t"), "t online")
    mine = victim - 1  # the partition the victim prefers to lead
    await cluster.fail(victim)
    moved = await until(lambda: _led_by_other(admin, mine, victim), "leadership moves off the victim")
    assert moved.leader_epoch == 1
    await cluster.start(victim)
    await until(lambda: settled(admin, "t"), "the victim back in every ISR")
    # nobody asks: the rebalance timer puts the preferred leader back
    li = await until(lambda: _led_by(admin, mine, victim), "automatic preferred election", timeout=20)
    assert li.leader_epoch == 2 and set(li.isr) == {1, 2, 3}
    assert await missing(admin, zkpaths.PREFERRED_REPLICA_ELECTION)
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t"]), "metadata after the rebalance")
    rc, out, _ = await kctl("cluster", "--json")
    assert json.loads(out)["preferred_replica_imbalance"] == 0


async def _led_by_other(admin, p, broker):
    li = (await states_of(admin, "t")).get(p)
    return li if li is not None and li.leader not in (broker, -1) else None


async def _led_by(admin, p, broker):
    li = (await states_of(admin, "t")).get(p)
    return li if li is not None and li.leader == broker else None


async def test_unclean_election_only_when_the_topic_config_allows_it(make_cluster, admin, kctl):
    cluster = make_cluster()
    await cluster.start(1, 2, 3)
    holder, _ = await until(lambda: a_controller(admin), "a controller")
    a, b = [x for x in (1, 2, 3) if x != holder]
    for topic in ("u", "v"):
        rc, _, err = await kctl("topics", "--create", "--topic", topic, "--replica-assignment", f"{b}:{a}")
        assert rc == 0, err
        await until(lambda: settled(admin, topic), f"{topic}-0 online")
    await cluster.fail(a)  # a leaves the ISRs ...
    await until(lambda: isr_is(admin, ("u", "v"), [b]), "ISRs shrink to b")
    await cluster.fail(b)  # ... then the last ISR member dies: offline
    await until(lambda: all_offline(admin, ("u", "v")), "u-0 and v-0 offline")
    await cluster.start(a)  # a is live but not in the ISR
    await until(lambda: registered(admin, (holder, a)), "a back")
    await asyncio.sleep(1.5)
    for topic in ("u", "v"):
        li = (await states_of(admin, topic))[0]
        assert (li.leader, list(li.isr)) == (-1, [b]), (topic, li)
    rc, out, _ = await kctl("cluster", "--json")
    assert json.loads(out)["offline_partitions"] == 2
    # a preferred election cannot help: the preferred replica is down
    rc, out, err = await kctl("leader-election", "--election-type", "PREFERRED", "--topic", "v", "--partition", "0")
    assert rc == 1 and out.startswith("Error completing leader election (PREFERRED) for partition: v-0: "), out
    assert err == "error: 1 replica(s) could not be elected\n"

    # the topic's config allows unclean election: the controller elects a at once
    rc, out, err = await kctl("topics", "--alter", "--topic", "u", "--config", "unclean.leader.election.enable=true")
    assert (rc, out) == (0, "Updated config for topic u.\n"), err
    li = await until(lambda: leader_is(admin, "u", a), "unclean election of u-0")
    assert (li.leader, list(li.isr), li.leader_epoch) == (a, [a], 3)
    await asyncio.sleep(1.0)
    li = (await states_of(admin, "v"))[0]
    assert li.leader == -1  # v's config does not allow it
    # an operator may still ask for it explicitly (KIP-460), whatever the config
    rc, out, err = await kctl("leader-election", "--election-type", "UNCLEAN", "--topic", "v", "--partition", "0")
    assert (rc, out) == (0, "Successfully completed leader election (UNCLEAN) for partitions v-0\n"), err
    li = (await states_of(admin, "v"))[0]
    assert (li.leader, list(li.isr), li.leader_epoch) == (a, [a], 3)
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["u", "v"]), "metadata after unclean elections")


async def isr_is(admin, topics, isr):
    for t in topics:
        li = (await states_of(admin, t)).get(0)
        if li is None or list(li.isr) != isr:
            return False
    return True


async def all_offline(admin, topics):
    for t in topics:
        li = (await states_of(admin, t)).get(0)
        if li is None or li.leader != -1:
            return False
    return True


async def leader_is(admin, topic, broker):
    li = (await states_of(admin, topic)).get(0)
    return li if li is not None and li.leader == broker else None


# -- controlled shutdown -------------------------------------------------------------------------


async def test_controlled_shutdown_of_each_broker_in_turn(make_cluster, admin, kctl):
    cluster = make_cluster()
    cluster.spawn(1, 2, 3)
    await until(lambda: registered(admin, (1, 2, 3)), "three brokers", timeout=30)
    await until(lambda: a_controller(admin), "a controller")
    await cluster.start(4)  # holds no replica; its metadata cache is what every broker is told
    everyone = (1, 2, 3, 4)
    created = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "adapters.cli", "topics", "--create", "--zookeeper", cluster.connect,
                         "--topic", "t", "--replica-assignment", "1:2:3,2:3:1,3:1:2,1:3:2"],
        capture_output=True, text=True, timeout=60)
    assert (created.returncode, created.stdout) == (0, "Created topic t.\n"), created.stderr
    await until(lambda: settled(admin, "t"), "t online", timeout=30)
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t"]), "metadata of t")
    for broker in (1, 2, 3):
        before = await states_of(admin, "t")
        assert any(li.leader == broker for li in before.values()), (broker, before)  # leaders to move
        assert await cluster.terminate(broker) == 0
        assert "controlled shutdown of broker %d succeeded" % broker in cluster.procs.nodes[broker].log_text()
        states = await states_of(admin, "t")
        for p, li in states.items():
            assert li.leader != broker and li.leader != -1, (broker, p, li)
            if before[p].leader == broker:
                assert li.leader_epoch > before[p].leader_epoch
        await until(lambda: _out_of_isrs(admin, broker), f"broker {broker} out of every ISR")
        await until(lambda: metadata_matches(admin, cluster.in_process(), ["t"]), f"metadata without {broker}")
        cluster.spawn(broker)
        await until(lambda: registered(admin, everyone), f"broker {broker} back", timeout=30)
        await until(lambda: a_controller(admin), "a controller")
        await until(lambda: settled(admin, "t"), f"broker {broker} back in every ISR", timeout=30)
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t"]), "metadata at the end")
    rc, out, _ = await kctl("cluster", "--json")
    summary = json.loads(out)
    assert summary["live_brokers"] == [1, 2, 3, 4] and summary["offline_partitions"] == 0


async def _out_of_isrs(admin, broker):
    return all(broker not in li.isr for li in (await states_of(admin, "t")).values())


# -- topic deletion ------------------------------------------------------------------------------


async def test_topic_deletion_also_with_a_broker_down(make_cluster, admin, kctl):
    cluster = make_cluster()
    await cluster.start(1, 2, 3)
    holder, _ = await until(lambda: a_controller(admin), "a controller")
    rc, _, err = await kctl("topics", "--create", "--topic", "x", "--partitions", "2", "--replication-factor", "3",
                            "--config", "retention.ms=1000")
    assert rc == 0, err
    rc, _, err = await kctl("topics", "--create", "--topic", "y", "--partitions", "2", "--replication-factor", "3")
    assert rc == 0, err
    await until(lambda: settled(admin, "x"), "x online")
    await until(lambda: settled(admin, "y"), "y online")
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["x", "y"]), "metadata of x and y")

    rc, out, err = await kctl("topics", "--delete", "--topic", "x")
    assert rc == 0 and out.startswith("Topic x is marked for deletion.\n"), err
    await until(lambda: _gone(admin, "x"), "x deleted", timeout=30)
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["x", "y"]), "x gone from the metadata")
    for node in cluster.in_process():
        assert not [k for k in node.broker.replicas() if k.startswith("x-")]
        assert "x-0" not in node.broker.metadata()["partitions"]

    # a broker with replicas of y is down: the deletion waits for it
    victim = max(b for b in (1, 2, 3) if b != holder)
    await cluster.fail(victim)
    await until(lambda: registered(admin, [b for b in (1, 2, 3) if b != victim]), "the victim gone")
    rc, out, err = await kctl("topics", "--delete", "--topic", "y")
    assert rc == 0, err
    await until(lambda: _no_metadata(cluster.in_process(), "y"), "y gone from the live brokers' metadata",
                timeout=60)
    await asyncio.sleep(1.5)
    assert not await missing(admin, zkpaths.topic("y"))
    assert not await missing(admin, zkpaths.delete_topic("y"))
    rc, out, _ = await kctl("topics", "--list")
    assert out == "y - marked for deletion\n"
    await cluster.start(victim)
    await until(lambda: _gone(admin, "y"), "y deleted once the victim is back", timeout=30)
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["y"]), "no y in any metadata")
    for node in cluster.in_process():
        assert not [k for k in node.broker.replicas() if k.startswith("y-")]
    rc, out, _ = await kctl("topics", "--list")
    assert (rc, out) == (0, "")


async def _gone(admin, topic):
    for path in (zkpaths.topic(topic), zkpaths.config_topic(topic), zkpaths.delete_topic(topic)):
        if not await missing(admin, path):
            return False
    return True


async def _no_metadata(nodes, topic):
    return all(not [k for k in n.broker.metadata()["partitions"] if k.rsplit("-", 1)[0] == topic] for n in nodes)


async def test_topic_deletion_during_a_halted_reassignment(make_cluster, admin, kctl):
    cluster = make_cluster()
    await cluster.start(1, 2, 3, 4)
    holder, epoch = await until(lambda: a_controller(admin), "a controller")
    assert holder != 4
    rc, _, err = await kctl("topics", "--create", "--topic", "h", "--replica-assignment", "2:3")
    assert rc == 0, err
    await until(lambda: settled(admin, "h"), "h-0 online")
    await cluster.fail(4)
    await until(lambda: registered(admin, (1, 2, 3)), "broker 4 gone")
    await admin.create(zkpaths.REASSIGN_PARTITIONS, zkdata.encode_reassignment([(TopicPartition("h", 0), [3, 4])]))
    await until(lambda: _adding(admin, "h"), "the reassignment halted in RS = OAR + RAR")
    rc, _, err = await kctl("topics", "--delete", "--topic", "h")
    assert rc == 0, err
    await asyncio.sleep(1.0)
    assert not await missing(admin, zkpaths.topic("h"))  # waits: a replica is down, a reassignment runs
    await cluster.start(4)
    await until(lambda: _gone(admin, "h"), "h deleted once broker 4 is back", timeout=15)
    await until(lambda: missing(admin, zkpaths.REASSIGN_PARTITIONS), "no reassignment left for h", timeout=10)
    # the controller survived: same one, and it still creates topics
    assert await controller(admin) == (holder, epoch)
    rc, _, err = await kctl("topics", "--create", "--topic", "after", "--replica-assignment", "1:2")
    assert rc == 0, err
    await until(lambda: settled(admin, "after"), "a new topic online", timeout=10)


async def _adding(admin, topic):
    return bool((await topic_json(admin, topic)).get("adding_replicas"))


async def test_a_preferred_election_right_after_an_isr_expansion_decides_on_zookeepers_isr(make_cluster, admin, kctl):
    """The preferred replica is back in the ISR in ZooKeeper, but the leader's ISR change
    notification has not reached the controller when the election request does (here it never
    does: the expansion is written as the leader writes it, without the notification). Kafka
    reads the state before electing; so must the controller, or it refuses the election on its
    cached ISR and deletes the operator's request."""
    cluster = make_cluster(**{"replica.catch.up.delay.ms": "600000"})  # the leader itself never expands
    await cluster.start(1, 2)
    await until(lambda: a_controller(admin), "a controller")
    rc, _, err = await kctl("topics", "--create", "--topic", "t", "--replica-assignment", "2:1")
    assert rc == 0, err
    await until(lambda: settled(admin, "t"), "t online")
    await cluster.fail(2)

    async def led_by_1():
        li = (await states_of(admin, "t")).get(0)
        return li if li is not None and (li.leader, li.isr) == (1, (1,)) else None
    shrunk = await until(led_by_1, "leadership moved to 1, ISR [1]")
    await cluster.start(2)
    await until(lambda: registered(admin, (1, 2)), "broker 2 back")
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t"]), "broker 2 told about t-0")

    path = zkpaths.partition_state("t", 0)
    _, stat = await admin.get(path)
    expanded = LeaderIsr(1, shrunk.leader_epoch, (1, 2), shrunk.controller_epoch, stat.version + 1)
    await admin.set(path, zkdata.encode_partition_state(expanded), version=stat.version)
    await admin.create(zkpaths.PREFERRED_REPLICA_ELECTION,
                       zkdata.encode_preferred_replica_election([TopicPartition("t", 0)]))
    await until(lambda: missing(admin, zkpaths.PREFERRED_REPLICA_ELECTION), "the preferred election znode handled")
    li = (await states_of(admin, "t"))[0]
    assert (li.leader, li.leader_epoch, li.isr) == (2, shrunk.leader_epoch + 1, (1, 2))
    await until(lambda: metadata_matches(admin, cluster.in_process(), ["t"]), "brokers told the new leader")
    for node in cluster.in_process():
        if node.loop.state.active:
            await node.loop.wait_idle()
    await cluster.close()

    # the journals replay to the same decisions, the re-read included
    result = local.replay(cluster.base)
    assert [f for f in result.findings if f["severity"] == "violation"] == []
    types = [r["type"] for r in result.tables["events"]]
    assert "PartitionStatesRechecked" in types
