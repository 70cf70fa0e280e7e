"""End-to-end: what an operator reaches for, against the session's real ZooKeeper and
real `kctl node` processes: throttled reassignments and dynamic configuration.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import time

from adapters.znodes import dynconfig, paths as zkpaths
from adapters.sim.cluster import live_broker_ids
from tests.integration.test_e2e import (  # noqa: F401 - fixtures
    isr_is,
    leader_is,
    all_offline,
    a_controller,
    kctl,
    make_cluster,
    missing,
    registered,
    settled,
    states_of,
    until,
)

PARTITION_BYTES = 2_000_000


async def config_of(admin, entity_type, name) -> dict:
    config, _ = await dynconfig.read_config(admin, entity_type, name)
    return config


async def notified(admin) -> list[str]:
    out = []
    for n in sorted(await admin.get_children(dynconfig.CONFIG_CHANGES)):
        data, _ = await admin.get(f"{dynconfig.CONFIG_CHANGES}/{n}")
        doc = json.loads(data)
        assert doc["version"] == 2 and n.startswith("config_change_") and len(n) == len("config_change_") + 10
        out.append(doc["entity_path"])
    return out


async def test_throttled_reassignment_sets_changes_and_removes_the_throttle(make_cluster, admin, kctl, tmp_path):
    cluster = make_cluster(**{"simulated.partition.bytes": str(PARTITION_BYTES)})
    cluster.spawn(1, 2, 3, 4)
    await until(lambda: registered(admin, (1, 2, 3, 4)), "four brokers", timeout=30)
    await until(lambda: a_controller(admin), "a controller")
    rc, _, err = await kctl("topics", "--create", "--topic", "big", "--replica-assignment", "1:2,2:1",
                            "--config", "retention.ms=60000")
    assert rc == 0, err
    await until(lambda: settled(admin, "big"), "big online")
    # another tool's key on broker 3 must survive the throttle's writes and its removal
    await dynconfig.write_config(admin, "brokers", "3", {"some.other.key": "kept"}, None)

    bad = tmp_path / "dirs.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "big", "partition": 0, "replicas": [3, 2], "log_dirs": ["/data/d1", "any"]}]}))
    rc, out, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", str(bad), "--throttle", "1000")
    assert (rc, out) == (2, "") and err.startswith("error: ") and "log_dirs" in err and "big-0: /data/d1" in err, err

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "big", "partition": 0, "replicas": [3, 2], "log_dirs": ["any", "any"]},
        {"topic": "big", "partition": 1, "replicas": [2, 1]}]}))
    before = len(await notified(admin))
    started = time.monotonic()
    # 100 kB/s: copying 2 MB would take 20 s
    rc, out, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
                              "--throttle", "100000")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[-2:] == [
        "The inter-broker throttle limit was set to 100000 B/s", "Successfully started reassignment of partitions."]
    assert await config_of(admin, "topics", "big") == {
        "retention.ms": "60000", "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3"}
    rates = {"leader.replication.throttled.rate": "100000", "follower.replication.throttled.rate": "100000"}
    for b in (1, 2):
        assert await config_of(admin, "brokers", str(b)) == rates
    assert await config_of(admin, "brokers", "3") == {"some.other.key": "kept", **rates}
    assert await config_of(admin, "brokers", "4") == {}  # neither holds a replica of big nor is a target
    assert (await notified(admin))[before:] == ["topics/big", "brokers/1", "brokers/2", "brokers/3"]

    await asyncio.sleep(1.5)
    rc, out, _ = await kctl("reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
    assert out.splitlines() == ["Status of partition reassignment: ",
                                "Reassignment of partition big-0 is still in progress",
                                "Reassignment of partition big-1 completed successfully"]
    assert (await config_of(admin, "brokers", "1")) == rates  # kept while anything is in progress

    # rerun with a higher rate: 2 MB/s, the copy is done about 1 s after it started
    rc, out, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
                              "--throttle", "2000000")
    assert (rc, out) == (0, "There is an existing assignment running.\n"
                            "The inter-broker throttle limit was set to 2000000 B/s\n"), err
    for b in (1, 2, 3):
        assert (await config_of(admin, "brokers", str(b)))["follower.replication.throttled.rate"] == "2000000"
    await until(lambda: missing(admin, zkpaths.REASSIGN_PARTITIONS), "the reassignment finished", timeout=15)
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 15, elapsed  # not before the copy at 2 MB/s; far sooner than at 100 kB/s

    rc, out, _ = await kctl("reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
    assert out.splitlines() == ["Status of partition reassignment: ",
                                "Reassignment of partition big-0 completed successfully",
                                "Reassignment of partition big-1 completed successfully",
                                "Throttle was removed."]
    assert await config_of(admin, "topics", "big") == {"retention.ms": "60000"}
    for b in (1, 2, 4):
        assert await config_of(admin, "brokers", str(b)) == {}
    assert await config_of(admin, "brokers", "3") == {"some.other.key": "kept"}
    rc, out, _ = await kctl("reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
    assert "Throttle was removed." not in out  # nothing left to remove


async def test_a_throttled_move_is_slower_than_an_unthrottled_one(make_cluster, admin, kctl, tmp_path):
    cluster = make_cluster(**{"simulated.partition.bytes": str(PARTITION_BYTES)})
    cluster.spawn(1, 2, 3)
    await until(lambda: registered(admin, (1, 2, 3)), "three brokers", timeout=30)
    await until(lambda: a_controller(admin), "a controller")
    for t in ("fast", "slow"):
        rc, _, err = await kctl("topics", "--create", "--topic", t, "--replica-assignment", "1:2")
        assert rc == 0, err
        await until(lambda: settled(admin, t), f"{t} online")
    took = {}
    for t, throttle in (("fast", []), ("slow", ["--throttle", "1000000"])):
        plan = tmp_path / f"{t}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "replicas": [3, 2]}]}))
        started = time.monotonic()
        rc, _, err = await kctl("reassign-partitions", "--execute", "--reassignment-json-file", str(plan), *throttle)
        assert rc == 0, err
        await until(lambda: missing(admin, zkpaths.REASSIGN_PARTITIONS), f"{t} moved", timeout=30)
        took[t] = time.monotonic() - started
    # 2 MB at 1 MB/s: at least 2 s; the unthrottled copy takes the catch-up delay (0.1 s)
    assert took["slow"] >= 2.0 and took["fast"] < took["slow"] - 1.0, took


async def test_configs_describe_and_alter_like_kafka_configs(make_cluster, admin, kctl):
    await admin.ensure_path("/brokers/topics/c")  # the tool only checks that the topic exists
    rc, out, err = await kctl("configs", "--entity-type", "topics", "--entity-name", "c", "--alter",
                              "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")
    assert (rc, out) == (0, "Completed Updating config for entity: topic 'c'.\n"), err
    rc, out, _ = await kctl("configs", "--entity-type", "topics", "--entity-name", "c", "--describe")
    assert out == "Configs for topic 'c' are cleanup.policy=compact,delete,retention.ms=1000\n"
    rc, out, err = await kctl("configs", "--entity-type", "topics", "--entity-name", "c", "--alter",
                              "--delete-config", "retention.ms")
    assert rc == 0, err
    assert await config_of(admin, "topics", "c") == {"cleanup.policy": "compact,delete"}
    rc, out, err = await kctl("configs", "--entity-type", "brokers", "--entity-default", "--alter",
                              "--add-config", "unclean.leader.election.enable=TRUE")
    assert (rc, out) == (0, "Completed Updating config for entity: default brokers.\n"), err
    assert await config_of(admin, "brokers", "<default>") == {"unclean.leader.election.enable": "true"}
    assert (await notified(admin))[-3:] == ["topics/c", "topics/c", "brokers/<default>"]
    rc, out, _ = await kctl("configs", "--entity-type", "brokers", "--describe")
    assert out == "Configs for default brokers are unclean.leader.election.enable=true\n"

    for args, message in [
        (["--entity-type", "topics", "--entity-name", "c", "--alter", "--add-config", "retention.ms=x"],
         "error: Invalid value x for configuration retention.ms: Not a number of type LONG\n"),
        (["--entity-type", "topics", "--entity-name", "c", "--alter", "--add-config", "no.such=1"],
         "error: Unknown topic config name: no.such\n"),
        (["--entity-type", "topics", "--entity-name", "c", "--alter", "--delete-config", "retention.ms"],
         "error: Invalid config(s): retention.ms\n"),
        (["--entity-type", "topics", "--entity-name", "nope", "--alter", "--add-config", "retention.ms=1"],
         "error: Topic 'nope' does not exist as expected\n"),
        (["--entity-type", "topics", "--entity-default", "--describe"],
         "error: --entity-default applies to brokers only\n"),
        (["--entity-type", "brokers", "--entity-name", "x", "--describe"],
         "error: The entity name for brokers must be a valid integer broker id, but it is: x\n"),
        (["--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "log.retention.ms=1"],
         None),
        (["--entity-type", "brokers", "--entity-name", "1", "--alter"],
         "error: At least one of --add-config or --delete-config must be specified with --alter\n"),
    ]:
        rc, out, err = await kctl("configs", *args)
        assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: "), (args, err)
        if message is not None:
            assert err == message, (args, err)


async def test_unclean_election_follows_the_dynamic_cluster_default(make_cluster, admin, kctl):
    cluster = make_cluster()
    cluster.spawn(1, 2, 3)
    await until(lambda: registered(admin, (1, 2, 3)), "three brokers", timeout=30)
    holder, _ = await until(lambda: a_controller(admin), "a controller")
    a, b = [x for x in (1, 2, 3) if x != holder]
    for topic in ("u", "v"):
        rc, _, err = await kctl("topics", "--create", "--topic", topic, "--replica-assignment", f"{b}:{a}")
        assert rc == 0, err
        await until(lambda: settled(admin, topic), f"{topic}-0 online")
    # v's own override says no: it wins over the cluster default
    rc, _, err = await kctl("configs", "--entity-type", "topics", "--entity-name", "v", "--alter",
                            "--add-config", "unclean.leader.election.enable=false")
    assert rc == 0, err
    await cluster.kill(a)  # a leaves the ISRs ...
    await until(lambda: isr_is(admin, ("u", "v"), [b]), "ISRs shrink to b")
    await cluster.kill(b)  # ... then the last ISR member dies: offline
    await until(lambda: all_offline(admin, ("u", "v")), "u-0 and v-0 offline")
    cluster.procs.start_node(a)  # a is live again but not in the ISR
    await until(lambda: registered(admin, (holder, a)), "a back", timeout=30)
    await asyncio.sleep(1.5)
    assert (await states_of(admin, "u"))[0].leader == -1  # the static default is false

    rc, _, err = await kctl("configs", "--entity-type", "brokers", "--entity-default", "--alter",
                            "--add-config", "unclean.leader.election.enable=true")
    assert rc == 0, err
    li = await until(lambda: leader_is(admin, "u", a), "unclean election of u-0 without a restart")
    assert (li.leader, list(li.isr), li.leader_epoch) == (a, [a], 3)
    await asyncio.sleep(1.0)
    assert (await states_of(admin, "v"))[0].leader == -1  # the topic override says false

    # with v's override gone, the cluster default applies to v too
    rc, _, err = await kctl("configs", "--entity-type", "topics", "--entity-name", "v", "--alter",
                            "--delete-config", "unclean.leader.election.enable")
    assert rc == 0, err
    li = await until(lambda: leader_is(admin, "v", a), "unclean election of v-0 once its override is gone")
    assert (li.leader, list(li.isr)) == (a, [a])
    assert sorted(await live_broker_ids(admin)) == sorted((holder, a))


async def test_unclean_election_follows_the_controllers_own_broker_config(make_cluster, admin, kctl):
    """`/config/brokers/<id>` of the controller's broker wins over the cluster default, and
    another broker's says nothing about the controller's decisions (Kafka's dynamic broker
    config: the controller reads its own)."""
    cluster = make_cluster()
    cluster.spawn(1, 2, 3)
    await until(lambda: registered(admin, (1, 2, 3)), "three brokers", timeout=30)
    holder, _ = await until(lambda: a_controller(admin), "a controller")
    a, b = [x for x in (1, 2, 3) if x != holder]
    rc, _, err = await kctl("topics", "--create", "--topic", "u", "--replica-assignment", f"{b}:{a}")
    assert rc == 0, err
    await until(lambda: settled(admin, "u"), "u-0 online")

    async def configure(entity: list[str], value: str) -> None:
        rc, _, err = await kctl("configs", "--entity-type", "brokers", *entity, "--alter",
                                "--add-config", f"unclean.leader.election.enable={value}")
        assert rc == 0, err

    await configure(["--entity-default"], "true")
    await configure(["--entity-name", str(holder)], "false")  # the controller's own says no
    await configure(["--entity-name", str(a)], "true")  # a's says yes, but a is not the controller
    await cluster.kill(a)  # a leaves the ISR ...
    await until(lambda: isr_is(admin, ("u",), [b]), "the ISR shrinks to b")
    await cluster.kill(b)  # ... then the last ISR member dies: offline
    await until(lambda: all_offline(admin, ("u",)), "u-0 offline")
    cluster.procs.start_node(a)  # a is live again but not in the ISR
    await until(lambda: registered(admin, (holder, a)), "a back", timeout=30)
    await asyncio.sleep(1.5)
    assert (await states_of(admin, "u"))[0].leader == -1  # the controller's own false wins

    rc, _, err = await kctl("configs", "--entity-type", "brokers", "--entity-name", str(holder), "--alter",
                            "--delete-config", "unclean.leader.election.enable")
    assert rc == 0, err  # now the cluster default (true) applies, without a restart
    li = await until(lambda: leader_is(admin, "u", a), "unclean election of u-0 once the override is gone")
    assert (li.leader, list(li.isr)) == (a, [a])


async def test_describe_reports_min_isr_and_leaves_out_internal_topics(make_cluster, admin, kctl):
    cluster = make_cluster()
    cluster.spawn(1, 2)
    await until(lambda: registered(admin, (1, 2)), "two brokers", timeout=30)
    await until(lambda: a_controller(admin), "a controller")
    for topic, extra in (("m", ["--config", "min.insync.replicas=2"]), ("n", []), ("__consumer_offsets", [])):
        rc, _, err = await kctl("topics", "--create", "--topic", topic, "--replica-assignment", "1:2", *extra)
        assert rc == 0, err
        await until(lambda: settled(admin, topic), f"{topic} online")
    rc, out, _ = await kctl("topics", "--describe", "--under-min-isr-partitions")
    assert (rc, out) == (0, "")
    rc, out, _ = await kctl("topics", "--describe", "--at-min-isr-partitions", "--exclude-internal")
    assert out == "\tTopic: m\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"

    await cluster.kill(2)
    await until(lambda: isr_is(admin, ("m", "n"), [1]), "ISRs shrink to 1")
    rc, out, _ = await kctl("topics", "--describe", "--under-min-isr-partitions")
    assert out == "\tTopic: m\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1\n"
    rc, out, _ = await kctl("topics", "--describe", "--at-min-isr-partitions")
    assert out.splitlines() == ["\tTopic: __consumer_offsets\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1",
                                "\tTopic: n\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1"]
    rc, out, _ = await kctl("topics", "--describe", "--at-min-isr-partitions", "--exclude-internal")
    assert out == "\tTopic: n\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1\n"
    rc, out, _ = await kctl("topics", "--list", "--exclude-internal")
    assert out == "m\nn\n"
    rc, out, err = await kctl("topics", "--describe", "--at-min-isr-partitions", "--under-replicated-partitions")
    assert (rc, out, err) == (2, "", "error: option --under-replicated-partitions can't be used with "
                                     "--at-min-isr-partitions\n")


async def test_node_takes_a_kafka_server_properties_file(admin, zk_connect, tmp_path):
    import signal
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    props = tmp_path / "server.properties"
    props.write_text("\n".join([
        "# a Kafka broker's file, unchanged", "broker.id=7", "broker.rack=r1",
        f"listeners=PLAINTEXT://127.0.0.1:{port}", f"zookeeper.connect={zk_connect}",
        "num.network.threads=3", "log.retention.hours=168", "zookeeper.session.timeout.ms=3000",
        "controlled.shutdown.enable=false", ""]))
    procs = []

    def start(*flags):
        p = subprocess.Popen([sys.executable, "-m", "adapters.cli", "node", "--config", str(props), *flags],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ, start_new_session=True)
        procs.append(p)
        return p

    try:
        first = start()
        info = await until(lambda: _registration(admin, 7), "broker 7 from broker.id", timeout=30)
        assert (info["port"], info["rack"], info["endpoints"]) == (port, "r1", [f"PLAINTEXT://127.0.0.1:{port}"])
        first.send_signal(signal.SIGTERM)  # controlled.shutdown.enable=false: exits without asking the controller
        assert await asyncio.to_thread(first.wait, 20) == 0
        warnings = [line for line in first.stderr.read().decode().splitlines() if line.startswith("warning:")]
        assert warnings == [f"warning: --config {props}: ignoring 2 key(s) kctl does not use: "
                            "log.retention.hours, num.network.threads"]
        second = start("--broker-id", "8", "--listen", "127.0.0.1:0")  # flags win over the file
        info = await until(lambda: _registration(admin, 8), "broker 8 from the flag", timeout=30)
        assert info["port"] != port and info["rack"] == "r1"
        assert await admin.exists("/brokers/ids/7") is None
        second.send_signal(signal.SIGKILL)
        await asyncio.to_thread(second.wait, 20)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
            p.stderr.close()


async def _registration(admin, broker_id):
    stat = await admin.exists(f"/brokers/ids/{broker_id}")
    if stat is None:
        return None
    data, _ = await admin.get(f"/brokers/ids/{broker_id}")
    return json.loads(data)


async def test_a_failed_log_dir_takes_its_replicas_offline_and_the_broker_keeps_the_rest(make_cluster, admin, kctl,
                                                                                         tmp_path):
    d1, d2 = tmp_path / "disk1", tmp_path / "disk2"
    cluster = make_cluster()
    cluster.spawn(2, 3)
    cluster.procs.start_node(1, settings={"log.dirs": f"{d1},{d2}"})
    await until(lambda: registered(admin, (1, 2, 3)), "three brokers", timeout=30)
    await until(lambda: a_controller(admin), "a controller")
    rc, _, err = await kctl("topics", "--create", "--topic", "p", "--replica-assignment", "1:2,1:3,2:1,3:1")
    assert rc == 0, err
    await until(lambda: settled(admin, "p"), "p online")

    where = await until(lambda: _placed((d1, d2), 4), "a directory per replica of broker 1")
    assert sorted(len(v) for v in where.values()) == [2, 2]  # new replicas go to the emptier dir
    failed = d1 if any(n in where[d1] for n in ("p-0", "p-1")) else d2
    kept = d2 if failed == d1 else d1
    lost = {int(n.rsplit("-", 1)[1]) for n in where[failed]}

    _fail(failed)
    started = asyncio.get_running_loop().time()

    async def moved():
        states = await states_of(admin, "p")
        for p in lost:
            if states[p].leader == 1 or 1 in states[p].isr:
                return None
        return states
    states = await until(moved, "the failed dir's replicas out of leadership and ISRs", timeout=15)
    assert asyncio.get_running_loop().time() - started < 8
    for p in set(range(4)) - lost:  # the other dir still serves
        assert 1 in states[p].isr
    await asyncio.sleep(2.0)  # the failed replicas stay out (their leaders do not let them back in)
    states = await states_of(admin, "p")
    assert all(1 not in states[p].isr for p in lost) and all(1 in states[p].isr for p in set(range(4)) - lost)
    assert 1 in await live_broker_ids(admin)  # still registered
    assert await admin.get_children("/log_dir_event_notification") == []  # read and deleted by the controller
    assert cluster.procs.nodes[1].running()

    shutil.rmtree(kept)  # the last dir: the broker exits non-zero, as Kafka halts
    code = await asyncio.to_thread(cluster.procs.nodes[1].wait, 15)
    assert code not in (None, 0)
    assert "every log dir of broker 1 is offline" in cluster.procs.nodes[1].log_text()


async def test_a_replica_on_a_failed_dir_is_not_elected_uncleanly_when_its_leader_dies(make_cluster, admin, kctl,
                                                                                         tmp_path):
    """Kafka's replicasOnOfflineDirs: broker 2's replica of q-0 is on a failed dir, so when q-0's
    only in-sync replica dies, an unclean election must not pick it (it would answer
    KAFKA_STORAGE_ERROR and go offline again, with q-0's ISR lost to it)."""
    d1, d2 = tmp_path / "disk1", tmp_path / "disk2"
    cluster = make_cluster()
    cluster.spawn(1, 3)
    holder, _ = await until(lambda: a_controller(admin), "a controller", timeout=30)
    lead = 3 if holder == 1 else 1  # q's leader must not be the controller: a new controller knows no failed dir
    cluster.procs.start_node(2, settings={"log.dirs": f"{d1},{d2}"})
    await until(lambda: registered(admin, (1, 2, 3)), "three brokers", timeout=30)
    rc, _, err = await kctl("topics", "--create", "--topic", "q", "--replica-assignment", f"{lead}:2,{lead}:2")
    assert rc == 0, err
    rc, _, err = await kctl("configs", "--entity-type", "topics", "--entity-name", "q", "--alter",
                            "--add-config", "unclean.leader.election.enable=true")
    assert rc == 0, err
    await until(lambda: settled(admin, "q"), "q online")

    where = await until(lambda: _placed((d1, d2), 2), "a directory per replica of broker 2")
    failed = d1 if "q-0" in where[d1] else d2
    assert "q-1" not in where[failed]
    _fail(failed)

    async def q0_left_by_2():
        li = (await states_of(admin, "q"))[0]
        return li if list(li.isr) == [lead] else None
    before = await until(q0_left_by_2, "broker 2's replica of q-0 out of its ISR", timeout=15)
    await cluster.kill(lead)  # q-0's last in-sync replica

    seen = []

    async def q1_moved():
        states = await states_of(admin, "q")
        seen.append(states[0])
        return states if states[1].leader == 2 else None
    await until(q1_moved, "q-1 led by broker 2 (its replica there is fine)", timeout=30)
    await asyncio.sleep(1.5)
    li = (await states_of(admin, "q"))[0]
    seen.append(li)
    assert all(s.leader != 2 for s in seen), seen  # never elected, not even for a moment
    # the dead leader leaves it leaderless, its ISR kept (the last member): one write, as in Kafka
    assert (li.leader, list(li.isr), li.leader_epoch) == (-1, [lead], before.leader_epoch + 1)

    cluster.procs.start_node(lead)  # the in-sync replica returns: a clean election
    li = await until(lambda: leader_is(admin, "q", lead), "q-0 led by its in-sync replica again", timeout=30)
    assert list(li.isr) == [lead]


async def _placed(dirs, count: int) -> dict | None:
    """{log dir: the replica directories in it} once `count` replicas are placed in `dirs`."""
    where = {d: sorted(os.listdir(d)) for d in dirs}
    return where if sum(len(v) for v in where.values()) == count else None


def _fail(log_dir) -> None:
    """A failed disk: the log dir is gone and a file stands in its place."""
    shutil.rmtree(log_dir)
    log_dir.write_text("not a directory any more")
