"""A local cluster of real `kctl node` processes (tests, demo, benchmark, chaos).

Each node is a separate OS process started from this Python install, so faults are real:
`kill()` is SIGKILL, `pause()`/`resume()` are SIGSTOP/SIGCONT, `stop()` is SIGTERM (controlled
shutdown). Reading the cluster's state goes through ZooKeeper like any operations tool.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from adapters.admin.cluster_state import read_children, read_states, read_topic_names
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import NoNode, ZkSession
from adapters.zookeeper.server import die_with_parent
from controller_core.values import TopicPartition


def _kill_with_parent() -> None:
    # a killed test, demo or benchmark must not leave nodes running
    die_with_parent(signal.SIGKILL)


class NodeProcess:
    def __init__(self, broker_id: int, args: list[str], log_path: Path, env: dict):
        self.broker_id = broker_id
        self.args = args
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True, preexec_fn=_kill_with_parent)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.running():
            os.kill(self.proc.pid, sig)

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


class LocalCluster:
    """`LocalCluster(connect, base_dir).start_node(1)`; node N's journal is base_dir/node-N."""

    def __init__(self, zookeeper: str, base_dir: str | os.PathLike, *, settings: dict | None = None,
                 extra_args: list[str] | None = None, env: dict | None = None):
        self.zookeeper = zookeeper
        self.base = Path(base_dir)
        self.base.mkdir(parents=True, exist_ok=True)
        self.settings = {"zookeeper.session.timeout.ms": "3000", **(settings or {})}
        self.extra_args = extra_args or []
        self.env = {**os.environ, **(env or {})}
        self.nodes: dict[int, NodeProcess] = {}

    def node_args(self, broker_id: int, rack: str | None = None, settings: dict | None = None) -> list[str]:
        args = [sys.executable, "-m", "adapters.cli", "node", "--broker-id", str(broker_id),
                "--zookeeper", self.zookeeper, "--journal-dir", str(self.base / f"node-{broker_id}")]
        if rack:
            args += ["--rack", rack]
        for k, v in {**self.settings, **(settings or {})}.items():
            args += ["--set", f"{k}={v}"]
        return args + self.extra_args

    def start_node(self, broker_id: int, rack: str | None = None, settings: dict | None = None) -> NodeProcess:
        node = NodeProcess(broker_id, self.node_args(broker_id, rack, settings),
                           self.base / f"node-{broker_id}.log", self.env)
        node.start()
        self.nodes[broker_id] = node
        return node

    def kill(self, broker_id: int) -> None:
        node = self.nodes[broker_id]
        node.signal(signal.SIGKILL)
        node.wait(10)

    def pause(self, broker_id: int) -> None:
        self.nodes[broker_id].signal(signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        self.nodes[broker_id].signal(signal.SIGCONT)

    def stop(self, broker_id: int, timeout: float = 60) -> int | None:
        node = self.nodes[broker_id]
        node.signal(signal.SIGCONT)
        node.signal(signal.SIGTERM)
        return node.wait(timeout)

    def stop_all(self) -> None:
        for broker_id, node in self.nodes.items():
            if node.running():
                node.signal(signal.SIGCONT)
                node.signal(signal.SIGKILL)
                node.wait(10)

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()


# -- reading the cluster through ZooKeeper ---------------------------------------------------------


async def controller(zk: ZkSession) -> tuple[int | None, int]:
    """(controller broker id or None, controller epoch)."""
    try:
        data, _ = await zk.get(zkpaths.CONTROLLER)
        holder = zkdata.decode_controller(data)
    except NoNode:
        holder = None
    try:
        data, _ = await zk.get(zkpaths.CONTROLLER_EPOCH)
        epoch = zkdata.decode_controller_epoch(data)
    except NoNode:
        epoch = 0
    return holder, epoch


async def live_broker_ids(zk: ZkSession) -> list[int]:
    """The registered broker ids, sorted (`adapters.admin.live_brokers` reads their registrations too)."""
    try:
        return sorted(int(b) for b in await zk.get_children(zkpaths.BROKERS_IDS))
    except NoNode:
        return []


async def partition_states(zk: ZkSession, topic: str | None = None) -> dict:
    """{(topic, partition): LeaderIsr} for every state znode (of one topic), read as the admin
    tools read them (`adapters.admin.cluster_state.read_states`)."""
    topics = [topic] if topic else await read_topic_names(zk)
    tps = []
    for t in topics:
        tps += [TopicPartition(t, int(p)) for p in await read_children(zk, zkpaths.partitions(t)) if p.isdigit()]
    return await read_states(zk, tps)


async def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, what: str = "condition"):
    """Poll an async predicate until it returns a truthy value; return it."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await predicate()
        if last:
            return last
        await asyncio.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
