"""Real `kctl node` processes on a real three-server ZooKeeper ensemble, whose members die.

The faults operators see: the server the controller's session is on is SIGKILLed (idle, and in
the middle of a broker failure's write), the ensemble's leader is SIGKILLed, quorum is lost for
longer than the session timeout, and every member is restarted in turn under admin load. After
each: the session moved without expiring where it should, the failover completed, no leader
epoch was skipped or repeated (ZooKeeper before/after, and the journals' replay audit), and what
ZooKeeper holds equals every broker's metadata cache (the chaos soak's checks).

Each fault's recovery time is measured; with KCTL_ENSEMBLE_FIGURES=FILE every measurement is
appended to FILE as a JSON line (benchmarks/README.md has the figures and how they were made).
The 10,000-partition broker failure is under the `slow` marker (`make test-ensemble-10k`);
KCTL_ENSEMBLE_ROUNDS=N repeats each repeated fault N times (2 and 1 in make test) and
KCTL_ENSEMBLE_PARTITIONS the size of the mid-write broker failure (2,000).
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim.chaos.checks import cluster_checks, replay_local
from adapters.sim.cluster import LocalCluster, controller, live_broker_ids, partition_states, wait_for
from adapters.zookeeper.session import ZkSession
from adapters.zookeeper.server import free_loopback_port
from controller_core.values import ReplicaAssignment

SESSION_MS = 6000  # the nodes' zookeeper.session.timeout.ms
VICTIM_SESSION_MS = 2000  # the broker that fails: its registration goes 2 s after the SIGKILL
BROKERS = (1, 2, 3)
ROUNDS = int(os.environ.get("KCTL_ENSEMBLE_ROUNDS", "0"))  # >0: that many rounds of each repeated fault


def record(fault: str, **figures) -> None:
    line = json.dumps({"fault": fault, **figures})
    print(line)
    path = os.environ.get("KCTL_ENSEMBLE_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


class _Nodes(LocalCluster):
    """Nodes that serve their metrics, each on a port picked here."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.metrics_ports = {b: free_loopback_port() for b in BROKERS}

    def node_args(self, broker_id, rack=None, settings=None):
        return super().node_args(broker_id, rack, settings) + ["--metrics-port", str(self.metrics_ports[broker_id])]


def scrape(port: int) -> dict:
    """{(sample name, labels): value} from a node's /metrics."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


class EnsembleCluster:
    """Three nodes on the ensemble, an admin session, and the checks every test ends with."""

    def __init__(self, ensemble, connect: str, base: Path):
        self.ensemble = ensemble
        self.connect = connect
        self.base = base
        self.local = _Nodes(connect, base / "nodes", settings={
            "zookeeper.session.timeout.ms": str(SESSION_MS), "auto.leader.rebalance.enable": "false",
            "replica.catch.up.delay.ms": "100"})
        self.admin: ZkSession | None = None

    async def start(self, victim: int | None = None) -> tuple[int, int]:
        self.admin = await ZkSession.connect(self.connect, session_timeout_ms=20000)
        for b in BROKERS:
            self.local.start_node(b, settings={"zookeeper.session.timeout.ms": str(VICTIM_SESSION_MS)}
                                  if b == victim else None)
        await wait_for(lambda: self._registered(BROKERS), timeout=90, what="brokers registered")
        return await wait_for(self._controller, timeout=60, what="a controller")

    async def close(self) -> None:
        self.local.stop_all()
        if self.admin is not None:
            await self.admin.close()

    async def _registered(self, ids) -> bool:
        return set(ids) <= set(await live_broker_ids(self.admin))

    async def _controller(self):
        holder, epoch = await controller(self.admin)
        return (holder, epoch) if holder is not None else None

    async def create_topic(self, name: str, partitions: int, rf: int = 3) -> None:
        assignment = {p: ReplicaAssignment(tuple(BROKERS[(p + i) % 3] for i in range(rf))) for p in range(partitions)}
        await self.admin.create(zkpaths.topic(name), zkdata.encode_topic_assignment(assignment))

        async def complete():
            states = await partition_states(self.admin, name)
            return len(states) == partitions and all(len(li.isr) == rf for li in states.values())

        await wait_for(complete, timeout=120, interval=0.25, what=f"{name}'s {partitions} partitions with full ISRs")

    async def controller_session(self) -> int:
        stat = await self.admin.exists(zkpaths.CONTROLLER)
        return stat.ephemeral_owner

    async def session_member(self, session_id: int, timeout: float = 30.0, not_on=None):
        """The member holding `session_id`'s connection (not `not_on`), polled with `cons`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            member = await asyncio.to_thread(self.ensemble.member_with_session, session_id)
            if member is not None and member is not not_on:
                return member
            await asyncio.sleep(0.02)
        raise TimeoutError(f"session 0x{session_id:x} is on no member after {timeout} s")

    async def settle(self, timeout: float = 90.0) -> float:
        """Wait until ZooKeeper and every broker's cache agree (checks 1-4 of the chaos soak);
        returns the time it took."""
        start = time.monotonic()
        last = None
        while time.monotonic() - start < timeout:
            last = await cluster_checks(self.admin, set())
            if all(check.ok for check in last):
                return time.monotonic() - start
            await asyncio.sleep(0.5)
        raise AssertionError(f"not settled after {timeout} s: {[c.to_json() for c in last if not c.ok]}")

    def audit(self) -> None:
        """The journals' replay audit: one controller per epoch, every write raises the leader
        epoch (none repeated), no write accepted from a fenced controller."""
        self.local.stop_all()
        out = self.base / "replay"
        out.mkdir(exist_ok=True)
        check, stats = replay_local(self.local.base, out)
        assert check.ok, check.to_json()
        assert stats.get("events", 0) > 0

    def reconnections(self, broker_id: int) -> list[float]:
        """The node's own account (adapters/zookeeper/connection.py's log line): seconds without a
        connection, per reconnection."""
        text = self.local.nodes[broker_id].log_text()
        return [float(s) for s in re.findall(r"reconnection \d+ after ([0-9.]+) s without a connection", text)]


@pytest.fixture
async def cluster(zk_ensemble, zk_ensemble_connect, tmp_path):
    c = EnsembleCluster(zk_ensemble, zk_ensemble_connect, tmp_path)
    yield c
    await c.close()


def _median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2


async def test_sigkill_of_the_server_the_controller_is_on_moves_its_session(cluster):
    holder, epoch = await cluster.start()
    await cluster.create_topic("idle", 50)
    session = await cluster.controller_session()
    moves = []
    for _ in range(ROUNDS or 2):
        member = await cluster.session_member(session)
        killed = time.monotonic()
        await asyncio.to_thread(member.kill)
        await cluster.session_member(session, not_on=member)
        moves.append(time.monotonic() - killed)
        await asyncio.to_thread(member.start)  # back before the next round: two of three stay up
    assert await controller(cluster.admin) == (holder, epoch)  # the controller never changed
    assert await cluster.controller_session() == session  # nor did its session
    own = cluster.reconnections(holder)
    assert len(own) >= len(moves), own
    on = await cluster.session_member(session)
    seen = await asyncio.to_thread(scrape, cluster.local.metrics_ports[holder])
    assert seen[("kctl_zookeeper_connected", (("server", on.connect_string),))] == 1
    assert seen[("kafka_server_sessionexpirelistener_zookeeperdisconnects_total", ())] == len(own)
    assert seen[("kafka_server_sessionexpirelistener_zookeepersyncconnects_total", ())] == len(own) + 1
    assert seen[("kafka_server_sessionexpirelistener_zookeeperexpires_total", ())] == 0
    assert seen[("kctl_zookeeper_disconnected_seconds_total", ())] == pytest.approx(sum(own), abs=0.01)
    await cluster.settle()
    record("session-server-kill (idle)", runs=len(moves), median_s=round(_median(moves), 3),
           max_s=round(max(moves), 3), controller_reported_s=[round(x, 3) for x in own])
    cluster.audit()


async def _sample(admin, topic: str, partitions: list[int]) -> dict[int, int]:
    states = await admin.get_many([zkpaths.partition_state(topic, p) for p in partitions])
    return {p: zkdata.decode_partition_state(*_value(states[zkpaths.partition_state(topic, p)])).leader_epoch
            for p in partitions}


def _value(found):
    data, stat = found
    return data, stat.version


async def broker_failure_with_a_server_kill(cluster, partitions: int) -> None:
    victim = 3
    holder, epoch = await cluster.start(victim=victim)
    if holder == victim:  # the failing broker must not be the controller: move it
        cluster.local.kill(victim)
        holder, epoch = await wait_for(lambda: _moved(cluster.admin, victim), timeout=60, what="another controller")
        cluster.local.start_node(victim, settings={"zookeeper.session.timeout.ms": str(VICTIM_SESSION_MS)})
        await wait_for(lambda: cluster._registered(BROKERS), timeout=60, what="the victim back")
    await cluster.create_topic("big", partitions)
    before = await partition_states(cluster.admin, "big")
    led = sorted(tp.partition for tp, li in before.items() if li.leader == victim)
    sample = led[:: max(1, len(led) // 30)]
    base = await _sample(cluster.admin, "big", sample)
    session = await cluster.controller_session()
    member = await cluster.session_member(session)

    cluster.local.kill(victim)
    failed = time.monotonic()
    while True:  # the first of the victim's partitions re-elected: the controller is writing
        now = await _sample(cluster.admin, "big", sample)
        changed = sum(now[p] != base[p] for p in sample)
        if changed:
            break
        assert time.monotonic() - failed < 60, "the controller never started the failover"
    await asyncio.to_thread(member.kill)
    killed = time.monotonic()
    await cluster.session_member(session, not_on=member)
    moved = time.monotonic() - killed

    async def failed_over():
        states = await partition_states(cluster.admin, "big")
        return all(li.leader not in (victim, -1) for tp, li in states.items() if tp.partition in led)

    await wait_for(failed_over, timeout=120, interval=0.1, what="the victim's partitions led elsewhere")
    done = time.monotonic() - failed
    after = await partition_states(cluster.admin, "big")
    assert await controller(cluster.admin) == (holder, epoch)  # no controller change
    assert await cluster.controller_session() == session  # the session moved, it did not expire
    steps = {tp: after[tp].leader_epoch - li.leader_epoch for tp, li in before.items()}
    # one broker failure: each partition's leader epoch went up by one (a new leader or a
    # smaller ISR) or not at all; two would mean a write applied twice
    assert set(steps.values()) <= {0, 1}, {tp: s for tp, s in steps.items() if s not in (0, 1)}
    assert all(steps[tp] == 1 for tp in before if tp.partition in led)
    settle = await cluster.settle()
    await asyncio.to_thread(member.start)
    record(f"session-server-kill during a {partitions:,}-partition broker failure", session_moved_s=round(moved, 3),
           failover_s=round(done, 3), settled_after_s=round(settle, 3),
           sample_written_at_kill=f"{changed}/{len(sample)}", controller_reported_s=cluster.reconnections(holder))
    cluster.audit()


async def _moved(admin, old):
    holder, epoch = await controller(admin)
    return (holder, epoch) if holder not in (None, old) else None


async def test_sigkill_of_the_controllers_server_in_the_middle_of_a_broker_failure(cluster):
    await broker_failure_with_a_server_kill(cluster, int(os.environ.get("KCTL_ENSEMBLE_PARTITIONS", "2000")))


@pytest.mark.slow
async def test_sigkill_of_the_controllers_server_in_the_middle_of_a_10000_partition_broker_failure(cluster):
    await broker_failure_with_a_server_kill(cluster, 10_000)


async def test_sigkill_of_the_ensemble_leader(cluster):
    holder, epoch = await cluster.start()
    await cluster.create_topic("t", 50)
    session = await cluster.controller_session()
    recoveries, elections = [], []
    for n in range(ROUNDS or 1):
        leader = await asyncio.to_thread(cluster.ensemble.wait_leader)
        killed = time.monotonic()
        await asyncio.to_thread(leader.kill)
        await asyncio.to_thread(cluster.ensemble.wait_leader, 60, leader)
        elections.append(time.monotonic() - killed)
        await cluster.session_member(session, not_on=leader)
        await cluster.create_topic(f"after-{n}", 3)  # the controller acts again
        recoveries.append(time.monotonic() - killed)
        await asyncio.to_thread(leader.start)
    assert await controller(cluster.admin) == (holder, epoch)
    assert await cluster.controller_session() == session  # moved twice, never expired
    await cluster.settle()
    record("ensemble-leader-kill", runs=len(recoveries), election_median_s=round(_median(elections), 3),
           election_max_s=round(max(elections), 3), controller_acting_median_s=round(_median(recoveries), 3),
           controller_acting_max_s=round(max(recoveries), 3), controller_reported_s=cluster.reconnections(holder))
    cluster.audit()


async def test_quorum_lost_for_longer_than_the_session_timeout_then_restored(cluster):
    holder, epoch = await cluster.start()
    await cluster.create_topic("t", 50)
    before = await partition_states(cluster.admin, "t")
    leader = await asyncio.to_thread(cluster.ensemble.wait_leader)
    down = [leader, next(m for m in cluster.ensemble.members if m is not leader)]
    for member in down:
        await asyncio.to_thread(member.kill)
    await asyncio.sleep(SESSION_MS / 1000 + 3)
    assert all(cluster.local.nodes[b].running() for b in BROKERS)  # nobody crashed on a lost quorum
    restored = time.monotonic()
    for member in down:
        await asyncio.to_thread(member.launch)
    await asyncio.to_thread(cluster.ensemble.wait_leader, 120)
    quorum_back = time.monotonic() - restored
    await wait_for(lambda: cluster._registered(BROKERS), timeout=60, what="every broker registered again")
    new_holder, new_epoch = await wait_for(cluster._controller, timeout=60, what="one controller")
    settle = await cluster.settle()
    converged = time.monotonic() - restored
    after = await partition_states(cluster.admin, "t")
    assert all(after[tp].leader_epoch >= li.leader_epoch for tp, li in before.items())
    assert new_epoch in (epoch, epoch + 1)  # kept its session, or exactly one election
    assert all(cluster.local.nodes[b].running() for b in BROKERS)
    record("quorum-loss", outage_s=SESSION_MS / 1000 + 3, quorum_back_s=round(quorum_back, 3),
           converged_s=round(converged, 3), settle_s=round(settle, 3),
           controller=f"{holder}@{epoch} -> {new_holder}@{new_epoch}")
    cluster.audit()  # in particular: no write accepted from a controller that had lost its epoch


async def test_rolling_restart_of_every_member_under_admin_load(cluster):
    holder, epoch = await cluster.start()
    await cluster.create_topic("base", 30)
    session = await cluster.controller_session()
    stop = asyncio.Event()
    created, latencies = [], []

    async def admin_load():
        n = 0
        while not stop.is_set():
            started = time.monotonic()
            await cluster.create_topic(f"load-{n}", 2)
            latencies.append(time.monotonic() - started)
            created.append(f"load-{n}")
            n += 1
            await asyncio.sleep(0.25)  # an operator's pace, not a flood

    load = asyncio.create_task(admin_load())
    leader = await asyncio.to_thread(cluster.ensemble.wait_leader)
    restarts = []
    for member in [m for m in cluster.ensemble.members if m is not leader] + [leader]:  # the leader last
        began = time.monotonic()
        await asyncio.to_thread(member.stop)  # SIGTERM: a clean shutdown, as a rolling restart does
        await asyncio.to_thread(member.start)  # back and synced with the leader
        restarts.append(time.monotonic() - began)
        await asyncio.sleep(0.5)
    stop.set()
    await asyncio.wait_for(load, 120)
    assert len(created) >= 3, created
    assert await controller(cluster.admin) == (holder, epoch)  # no controller change needed
    assert await cluster.controller_session() == session
    states = await partition_states(cluster.admin)
    assert all(any(tp.topic == name for tp in states) for name in created)  # nothing lost
    await cluster.settle()
    record("rolling-restart", topics_created=len(created), create_median_s=round(_median(latencies), 3),
           create_max_s=round(max(latencies), 3), member_restart_s=[round(r, 3) for r in restarts],
           controller_reported_s=cluster.reconnections(holder))
    cluster.audit()
