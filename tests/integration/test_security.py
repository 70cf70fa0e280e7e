"""`zookeeper.set.acl=true` with digest credentials, with real `kctl node` processes.

Every znode the cluster creates gets Kafka's secure ACL (all rights for the cluster's principal,
read for the world); a foreign client, without credentials or with others, can read the
cluster but cannot overwrite `/controller_epoch` or a partition state, nor take `/controller`,
nor file admin requests; the admin tools work with `--zk-auth` and refuse clearly without it;
and the cluster works: topics, a reassignment, a controller failover.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib

import pytest

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.cli import main
from adapters.sim.cluster import LocalCluster, controller, live_broker_ids, partition_states, wait_for
from adapters.zookeeper.session import NoAuth, ZkSession, parse_connect_string
from controller_core.values import ReplicaAssignment, TopicPartition

CREDENTIALS = "kafka:cluster-secret"
SETTINGS = {"zookeeper.session.timeout.ms": "3000", "auto.leader.rebalance.enable": "false",
            "replica.catch.up.delay.ms": "100", "zookeeper.set.acl": "true"}


def secure_acl(credentials: str = CREDENTIALS) -> list:
    user = credentials.split(":", 1)[0]
    digest = base64.b64encode(hashlib.sha1(credentials.encode()).digest()).decode()
    return sorted([(31, "digest", f"{user}:{digest}"), (1, "world", "anyone")])


async def tree(zk: ZkSession, path: str = "/") -> list[str]:
    """Every znode under `path` (the session's chroot), parents first."""
    out = [path]
    for child in sorted(await zk.get_children(path)):
        out += await tree(zk, f"{path.rstrip('/')}/{child}")
    return out


async def kctl(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))  # main() runs its own event loop
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cluster(zk_connect, tmp_path):
    # the credentials travel in the environment, not on the command line (`ps` shows that)
    with LocalCluster(zk_connect, tmp_path, settings=SETTINGS, env={"KCTL_ZOOKEEPER_AUTH": CREDENTIALS}) as c:
        yield c


async def test_with_zookeeper_set_acl_only_the_cluster_can_write_and_it_works(cluster, zk_connect, capsys, tmp_path):
    for broker_id in (1, 2, 3):
        cluster.start_node(broker_id)  # the first one creates the chroot, with the secure ACL
    hosts, chroot = parse_connect_string(zk_connect)
    server = await ZkSession.connect(hosts)  # connecting to the chroot first would create it, open
    try:
        await wait_for(lambda: _exists(server, chroot), timeout=60, what="the chroot created by a node")
    finally:
        await server.close()
    reader = await ZkSession.connect(zk_connect)  # no credentials: the world
    intruder = await ZkSession.connect(zk_connect, auth=("digest", "mallory:guess"))
    # ZooKeeper 3.9 shows a digest ACL's hash only to a session with ADMIN permission
    owner = await ZkSession.connect(zk_connect, auth=("digest", CREDENTIALS))
    try:
        await wait_for(lambda: _brokers(reader, {1, 2, 3}), timeout=60, what="three brokers")
        holder, epoch = await wait_for(lambda: _controller(reader), what="a controller")
        auth = ["--zookeeper", zk_connect, "--zk-auth", CREDENTIALS]

        # the admin tools: refused without the credentials (nothing written), fine with them
        code, _, err = await kctl(capsys, "topics", "--zookeeper", zk_connect, "--create", "--topic", "t",
                                  "--replica-assignment", "1:2:3,2:3:1")
        assert code == 2 and err.count("\n") == 1 and "NoAuth" in err and "--zk-auth" in err, err
        assert await reader.exists(zkpaths.topic("t")) is None
        code, out, err = await kctl(capsys, "topics", *auth, "--create", "--topic", "t",
                                    "--replica-assignment", "1:2:3,2:3:1")
        assert code == 0 and "Created topic t." in out, err
        states = await wait_for(lambda: _led(reader, "t", 2), what="t online")

        # every znode the cluster and the tools created carries Kafka's secure ACL
        paths = await tree(reader)
        for expected in ("/controller", "/controller_epoch", "/brokers/ids/1", "/cluster/id",
                         "/brokers/topics/t/partitions/0/state", "/config/topics/t", "/admin/delete_topics",
                         "/isr_change_notification"):
            assert expected in paths, expected
        for path in paths:
            assert sorted(await owner.get_acl(path)) == secure_acl(), path

        # a foreign client reads everything but cannot write any of it
        state_path = zkpaths.partition_state("t", 0)
        data, stat = await reader.get(state_path)
        assert zkdata.decode_partition_state(data, stat.version) == states[TopicPartition("t", 0)]
        epoch_data, epoch_stat = await reader.get(zkpaths.CONTROLLER_EPOCH)
        for stranger in (reader, intruder):
            with pytest.raises(NoAuth):
                await stranger.set(zkpaths.CONTROLLER_EPOCH, b"999", epoch_stat.version)
            with pytest.raises(NoAuth):
                await stranger.set(state_path, zkdata.encode_partition_state(
                    states[TopicPartition("t", 0)]._replace(leader=3, leader_epoch=99)), stat.version)
            with pytest.raises(NoAuth):
                await stranger.delete(zkpaths.CONTROLLER)
            with pytest.raises(NoAuth):
                await stranger.create(zkpaths.REASSIGN_PARTITIONS, zkdata.encode_reassignment(
                    [(TopicPartition("t", 0), (3,))]))
            with pytest.raises(NoAuth):
                await stranger.create(zkpaths.delete_topic("t"))
            with pytest.raises(NoAuth):
                await stranger.delete(zkpaths.broker(2))
        assert (await reader.get(zkpaths.CONTROLLER_EPOCH))[0] == epoch_data
        assert (await reader.get(state_path))[1].version == stat.version
        assert await controller(reader) == (holder, epoch)

        # the cluster works: a reassignment through the tool, then a controller failover
        path = tmp_path / "reassignment.json"
        path.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}')
        code, out, err = await kctl(capsys, "reassign-partitions", *auth, "--execute", "--reassignment-json-file", str(path))
        assert code == 0, err
        await wait_for(lambda: _absent(reader, zkpaths.REASSIGN_PARTITIONS), timeout=30, what="reassignment done")
        data, _ = await reader.get(zkpaths.topic("t"))
        assert zkdata.decode_topic_assignment(data)[0] == ReplicaAssignment((2, 3))
        cluster.kill(holder)
        new_holder, new_epoch = await wait_for(lambda: _moved(reader, holder), timeout=30, what="a new controller")
        assert new_epoch == epoch + 1
        survivors = {1, 2, 3} - {holder}
        await wait_for(lambda: _led_by(reader, "t", survivors), timeout=30, what="t led by the survivors")
        for path in await tree(reader):
            assert sorted(await owner.get_acl(path)) == secure_acl(), path
    finally:
        for session in (reader, intruder, owner):
            await session.close()


async def _brokers(zk, wanted):
    return set(wanted) <= set(await live_broker_ids(zk))


async def _controller(zk):
    holder, epoch = await controller(zk)
    return (holder, epoch) if holder is not None else None


async def _moved(zk, old):
    holder, epoch = await controller(zk)
    return (holder, epoch) if holder not in (None, old) else None


async def _led(zk, topic, partitions):
    states = await partition_states(zk, topic)
    return states if len(states) == partitions and all(li.leader >= 0 for li in states.values()) else None


async def _led_by(zk, topic, brokers):
    states = await partition_states(zk, topic)
    return states if states and all(li.leader in brokers for li in states.values()) else None


async def _exists(zk, path):
    return await zk.exists(path) is not None


async def _absent(zk, path):
    return await zk.exists(path) is None
