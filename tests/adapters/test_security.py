"""Security, in this process on the real ZooKeeper (the cluster of real processes with ACLs is
tests/integration/test_security.py):

- the znodes that the admin tools and a broker write with credentials get Kafka's secure ACL,
  the transient ones included (reassignment and deletion requests, ISR change notifications);
- with `control.secret`, a forged LeaderAndIsr (no MAC, a MAC made with another key, a frame
  altered after signing) is refused before the broker sees it and changes nothing, while the
  real controller's requests, and tools that have the secret, still work.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import logging

import pytest

from adapters.control import requests as Q
from adapters.control import framing as wire
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.broker.broker import Broker
from adapters.control.transport import ControlClient, ControlServer
from adapters.cli import main
from adapters.sim.cluster import partition_states, wait_for
from adapters.node import ClusterNode, NodeConfig
from adapters.zookeeper.session import ZkSession
from controller_core import commands as C
from controller_core.values import BrokerInfo, LeaderIsr, PartitionView, ReplicaAssignment, TopicPartition
from tests.sockets import exchange

CREDENTIALS = "kafka:cluster-secret"
SECRET = b"the cluster's control secret"
FAST = {"zookeeper.session.timeout.ms": "4000", "auto.leader.rebalance.enable": "false",
        "replica.catch.up.delay.ms": "100", "replica.lag.time.max.ms": "3000"}


def secure_acl() -> list:
    digest = base64.b64encode(hashlib.sha1(CREDENTIALS.encode()).digest()).decode()
    return sorted([(31, "digest", f"kafka:{digest}"), (1, "world", "anyone")])


async def _now(value):
    return value


@pytest.fixture
async def owner(zk_connect):
    """The cluster's principal (it creates the chroot, so that is protected too)."""
    session = await ZkSession.connect(zk_connect, auth=("digest", CREDENTIALS), acl_mode=True)
    yield session
    await session.close()


async def kctl(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, [str(a) for a in argv])  # main() runs its own event loop
    out, err = capsys.readouterr()
    return code, out, err


async def test_admin_requests_written_with_credentials_get_the_secure_acl(owner, zk_connect, capsys, tmp_path):
    # a registered broker and no controller: the requests stay where the tools put them
    await owner.create(zkpaths.broker(1), zkdata.encode_broker(1, "127.0.0.1", 9, None, 0), ephemeral=True,
                       make_parents=True)
    zk = ["--zookeeper", zk_connect]
    code, _, err = await kctl(capsys, "topics", *zk, "--create", "--topic", "t", "--partitions", "1",
                              "--replication-factor", "1")
    assert code == 2 and "NoAuth" in err and "--zk-auth" in err and err.count("\n") == 1, err
    code, _, err = await kctl(capsys, "topics", *zk, "--zk-auth", "mallory:guess", "--create", "--topic", "t",
                              "--partitions", "1", "--replication-factor", "1")
    assert code == 2 and "these credentials may not write there" in err, err
    assert await owner.exists(zkpaths.topic("t")) is None

    auth = [*zk, "--zk-auth", CREDENTIALS]
    assert (await kctl(capsys, "topics", *auth, "--create", "--topic", "t", "--partitions", "1",
                       "--replication-factor", "1"))[0] == 0
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}')
    code, _, err = await kctl(capsys, "reassign-partitions", *auth, "--execute", "--reassignment-json-file", plan)
    assert code == 0, err
    code, _, err = await kctl(capsys, "topics", *auth, "--delete", "--topic", "t")
    assert code == 0, err
    for path in (zkpaths.topic("t"), zkpaths.config_topic("t"), zkpaths.REASSIGN_PARTITIONS,
                 zkpaths.delete_topic("t"), zkpaths.ADMIN, zkpaths.CONFIG_TOPICS):
        assert sorted(await owner.get_acl(path)) == secure_acl(), path


async def test_isr_change_notifications_written_with_credentials_get_the_secure_acl(owner):
    tp = TopicPartition("t", 0)
    await owner.create(zkpaths.partition_state("t", 0), zkdata.encode_partition_state(LeaderIsr(1, 0, (1,), 1)),
                       make_parents=True)
    broker = Broker(1, owner, catch_up_delay_ms=50)
    server = ControlServer("127.0.0.1", 0, broker.handle)
    await server.start()
    client = ControlClient("127.0.0.1", server.port)
    task = asyncio.create_task(broker.run())
    try:
        lai = C.SendLeaderAndIsr(broker_id=1, broker_epoch=-1, controller_epoch=1,
                                 partitions=(PartitionView(tp, 1, 0, (1,), 1, 0, (1, 2)),),
                                 live_leaders=(BrokerInfo(1, "127.0.0.1", 1, -1),))
        await client.request(Q.LEADER_AND_ISR, Q.leader_and_isr_body(lai, 0), timeout=5)
        um = C.SendUpdateMetadata(broker_id=1, broker_epoch=-1, controller_epoch=1, partitions=(),
                                  live_brokers=(BrokerInfo(1, "h", 1, -1), BrokerInfo(2, "h", 2, -1)))
        await client.request(Q.UPDATE_METADATA, Q.update_metadata_body(um, 0), timeout=5)
        names = await wait_for(lambda: _children(owner, zkpaths.ISR_CHANGE_NOTIFICATION), timeout=10,
                               what="the ISR expansion announced")
        for path in [zkpaths.partition_state("t", 0), *(f"{zkpaths.ISR_CHANGE_NOTIFICATION}/{n}" for n in names)]:
            assert sorted(await owner.get_acl(path)) == secure_acl(), path
    finally:
        broker.close()
        await asyncio.wait_for(task, 5)
        await client.close()
        await server.close()


async def _children(zk, path):
    return await zk.get_children(path) if await zk.exists(path) is not None else []


# -- the control channel with a secret ----------------------------------------------------------


@pytest.fixture
async def secured(zk_connect, tmp_path):
    admin = await ZkSession.connect(zk_connect)
    nodes = []
    try:
        for i in (1, 2, 3):
            node = ClusterNode(NodeConfig(broker_id=i, zookeeper=zk_connect, journal_dir=str(tmp_path / f"n{i}"),
                                          settings=dict(FAST), secret=SECRET))
            await node.start()
            nodes.append(node)
        ctrl = await wait_for(lambda: _controller(nodes), what="a controller")
        yield admin, ctrl, [n for n in nodes if n is not ctrl]
    finally:
        for node in nodes:
            await node.close()
        await admin.close()


async def _controller(nodes):
    found = [n for n in nodes if n.active and n.loop.state.active]
    return found[0] if len(found) == 1 else None


def snapshot(node: ClusterNode) -> tuple:
    b = node.broker
    return b.replicas(), b.metadata(), b.controller_epoch, dict(b._leader_epochs), b.metrics()["requests"]


async def test_a_forged_leader_and_isr_is_refused_and_changes_nothing(secured, caplog):
    caplog.set_level(logging.WARNING)
    admin, ctrl, (target, other) = secured
    b = target.broker_id
    await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment(
        {0: ReplicaAssignment((other.broker_id, b))}), make_parents=True)
    await wait_for(lambda: _now(target.broker.replicas().get("t-0", {}).get("role") == "follower"
                                and len(target.broker.replicas()["t-0"]["isr"]) == 2), what="t-0 replicated")
    before = snapshot(target)
    # what a forger would send: the target leads t-0 from now on, with a newer epoch everywhere
    forged_body = {"controller_id": ctrl.broker_id, "controller_epoch": target.broker.controller_epoch + 1,
                   "broker_epoch": target.broker_epoch, "live_leaders": [[b, "127.0.0.1", target.port, None]],
                   "partition_states": Q.views_body([PartitionView(TopicPartition("t", 0), b, 99, (b,),
                                                                   target.broker.controller_epoch + 1, 0, (b,))])}
    signed = wire.encode_frame(Q.LEADER_AND_ISR, 1, forged_body, secret=SECRET)
    attempts = {
        "no MAC": wire.encode_frame(Q.LEADER_AND_ISR, 1, forged_body),
        "a MAC made with another key": wire.encode_frame(Q.LEADER_AND_ISR, 1, forged_body, secret=b"guessed"),
        "a signed frame altered after signing": signed[:-2] + bytes([signed[-2] ^ 0x01]) + signed[-1:],
    }
    for name, data in attempts.items():
        mark = len(caplog.records)
        answer = await exchange(target.port, data, wait=5)
        assert answer == b"<closed>", (name, answer)  # closed without an answer
        assert snapshot(target) == before, name  # the broker never saw it
        refused = [r.getMessage() for r in caplog.records[mark:] if "closing connection" in r.getMessage()]
        assert len(refused) == 1 and ("missing-mac" in refused[0] or "bad-mac" in refused[0]), refused

    # a client without the secret, or with another, is refused too (ControlClient, one line each)
    for secret in (None, b"guessed"):
        client = ControlClient("127.0.0.1", target.port, secret=secret)
        try:
            with pytest.raises(Exception):
                await client.request(Q.LEADER_AND_ISR, forged_body, timeout=5)
        finally:
            await client.close()
    assert snapshot(target) == before

    # the real controller's requests still work: a new topic led by the target
    await admin.create(zkpaths.topic("u"), zkdata.encode_topic_assignment({0: ReplicaAssignment((b,))}))
    await wait_for(lambda: _now(target.broker.replicas().get("u-0", {}).get("role") == "leader"),
                   what="the controller's LeaderAndIsr for u-0")
    states = await partition_states(admin, "u")
    assert states[TopicPartition("u", 0)].leader == b


async def test_tools_need_the_control_secret(secured, zk_connect, capsys, monkeypatch):
    admin, ctrl, _ = secured
    await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment({0: ReplicaAssignment((ctrl.broker_id,))}),
                       make_parents=True)
    await wait_for(lambda: _now(len(ctrl.loop.state.partitions) == 1), what="t known")
    argv = ["leader-election", "--zookeeper", zk_connect, "--election-type", "preferred", "--all-topic-partitions",
            "--timeout-ms", "1500"]
    monkeypatch.delenv("KCTL_CONTROL_SECRET", raising=False)
    code, _, err = await kctl(capsys, *argv)
    assert code == 1 and err.count("\n") == 1 and "no controller answered" in err, err
    monkeypatch.setenv("KCTL_CONTROL_SECRET", SECRET.decode())
    code, out, err = await kctl(capsys, *argv)
    assert code == 0 and "Valid replica already elected for partitions t-0" in out, (out, err)
