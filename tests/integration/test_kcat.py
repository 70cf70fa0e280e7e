"""`kcat -L` (Debian's kcat, its own librdkafka) lists what ZooKeeper holds. Skipped where kcat is
not installed; `make test-kcat` installs it (apt-get) and runs this file."""
from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.cluster import LocalCluster, controller, partition_states, wait_for
from controller_core.values import ReplicaAssignment, TopicPartition

from .test_kafka_clients import SESSION_MS, start

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make test-kcat installs it)")


async def kcat_list(port: int) -> dict:
    proc = await asyncio.create_subprocess_exec(KCAT, "-L", "-J", "-b", f"127.0.0.1:{port}", "-m", "10",
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def test_kcat_lists_brokers_controller_and_zookeepers_states(zk_connect, tmp_path, admin):
    settings = {"zookeeper.session.timeout.ms": str(SESSION_MS), "auto.leader.rebalance.enable": "false",
                "replica.catch.up.delay.ms": "100"}
    with LocalCluster(zk_connect, tmp_path, settings=settings) as local:
        port_of = await start(local, admin)
        await admin.create(zkpaths.topic("t"), zkdata.encode_topic_assignment(
            {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))}))

        async def matches():
            listed = await kcat_list(port_of[1])
            states = await partition_states(admin, "t")
            topics = {t["topic"]: t for t in listed["topics"]}
            if "t" not in topics or len(states) != 2:
                return None
            seen = {TopicPartition("t", p["partition"]): (p["leader"], sorted(r["id"] for r in p["isrs"]))
                    for p in topics["t"]["partitions"]}
            want = {tp: (li.leader, sorted(li.isr)) for tp, li in states.items()}
            return listed if seen == want else None

        listed = await wait_for(matches, timeout=60, what="kcat's listing equal to ZooKeeper")
        holder, _ = await controller(admin)
        assert listed["controllerid"] == holder
        assert {b["id"]: b["name"] for b in listed["brokers"]} == {b: f"127.0.0.1:{p}" for b, p in port_of.items()}
