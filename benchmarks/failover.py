"""`kctl bench failover`: how long a cluster is without leaders when a broker or the controller
dies, with 10,000 partitions by default, against the floor of this ZooKeeper.

Scenarios (CONTRACT section 4):

- broker-failure: broker 1 leads every partition (RF 3, 5 brokers); its session is expired at
  t0, as a crash would after the session timeout. End: every partition's state names a new
  leader and every surviving broker acknowledged its LeaderAndIsr.
- controlled-shutdown: broker 1 asks to shut down at t0. End: the controller answered that it
  leads nothing, and the new leaders are acknowledged (the LeaderAndIsr of the request's decision
  and its writes' releases; not those of the victim's departure, which follows: SHUTDOWN_DECISIONS).
- controller-failover: the controller is killed and its session expired at t0. End: a new
  controller loaded every partition and every broker acknowledged the UpdateMetadata it sent
  on taking over (not the requests of the ISR shrinks the dead node's broker causes, which
  follow).

Modes, measured in the same run. The same controller and cluster with three ZooKeeper patterns
(adapters/controller/zkpattern.py): `batched` (the product), `sequential` (one conditional write per
partition, one after another, as Kafka <= 1.0 did) and `kafka-2.4` (Kafka 2.4's: one two-op
multi, epoch check plus setData, per partition, at most 10 in flight; its controller-failover
reads one getData per state, 10 in flight). And the floors, the same ZooKeeper work with no
controller at all (benchmarks/floors.py): `zk-floor` (the product's frames, encoded before t0,
over the product's connection code), `java-floor` (ZooKeeper's own Java client: the server's
limit on this machine) and `aiozk-reference` (aiozk's high-level transactions, a reference, not
a floor).

The client-visible end (benchmarks/client_visible.py), in the batched and kafka-2.4 runs: a
stock Kafka client (librdkafka, through confluent-kafka), in a process of its own, polls the
metadata of broker 6 (a sixth broker process that hosts no replica, started in every cluster mode
when the end is measured; see CLIENT_BROKER) every 10 ms (`--client-poll-ms`) and stamps the first
answer that shows every partition led by a broker other than the victim (controller-failover: a
controller id other than the old one). It is reported beside the end above (`client_visible_*`
keys), not instead of it: the end above waits for the acknowledgements of brokers 1-5, the client
for the UpdateMetadata of the one broker it asks.

Each measured cluster run starts right after `gc.collect()` and a 0.5 s sleep (`restore()`), so
that a collection left over from restoring the cluster does not land in it; one more run per
scenario and mode starts without them (`unprepared_ms`): the figure a user meets. Before the first
mode at each size, ZooKeeper is warmed up (`floors.warm_up`: that many states written and read
until about 100,000 of each), as a server that has been up for a while is: a fresh server's JIT
took about 3 s of CPU over its first such writes, all of it inside the runs of whichever mode
came first (`--no-warm-up` measures that cold server). `--partitions`
takes a list (`1000,10000,100000`): every scenario and mode runs at each size, and a log-log
chart (`scaling.png`) draws each mode's end-to-end median against partitions.

The controller runs in this process, so that one probe sees every phase of its work: broker 5
(the first controller) and, in controller-failover, broker 1 (which takes over). In
broker-failure the victim (broker 1, which leads every partition) is in this process too, so
that its session can be expired at t0; it is crashed first and does nothing after t0. Every
other broker is a real `kctl node` process with `process.roles=broker`, so its handling of
10,000-partition requests runs beside the controller, as on separate machines; in particular
the controlled-shutdown victim is a `kctl node` process shut down by SIGTERM at t0, as an
operator would (it then asks the controller, as Kafka's brokers do).
"""
from __future__ import annotations

import asyncio
import gc
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.sim import stock_client
from benchmarks import client_visible, floors
from benchmarks.meters import CPU_GROUPS, CpuMeter, PeakRss
from adapters.node import ClusterNode, NodeConfig
from adapters.zookeeper.session import ZkSession, force_expire
from controller_core import commands as C
from controller_core import events as E
from controller_core.columns import PAD
from controller_core.values import ReplicaAssignment
from adapters.runtime.stalls import StallWatch
from adapters.sim.cluster import LocalCluster
from adapters.zookeeper.server import EmbeddedZooKeeper
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
import logging

bench_log = logging.getLogger("kctl.bench")

SCENARIOS = ("broker-failure", "controlled-shutdown", "controller-failover")
CLUSTER_MODES = ("batched", "sequential", "kafka-2.4")  # the controller, with adapters/controller/zkpattern.py's patterns
FLOOR_MODES = ("zk-floor", "java-floor", "aiozk-reference")  # benchmarks/floors.py
MODES = CLUSTER_MODES + FLOOR_MODES
PREPARE_SLEEP_S = 0.5
STALL_S = 3.0
"""A stretch this long without the benchmark's loop turning is logged with its stack
(adapters/runtime/stalls.py): a sixth of the sessions' timeout."""
PHASES = ("watch_delivery", "queue", "step", "journal", "zk_writes", "broker_round_trip", "other")
BROKERS = (1, 2, 3, 4, 5)
VICTIM = 1
PER_TOPIC = 100
NODE_SETTINGS = {"zookeeper.session.timeout.ms": "18000", "auto.leader.rebalance.enable": "false",
                 "replica.catch.up.delay.ms": "200", "replica.lag.time.max.ms": "30000", "journal.fsync": "batch"}
"""18 s sessions: Kafka's default since 2.5 (KIP-537, raised from 2.4's 6 s because large
clusters lost sessions to pauses). Every measured run ends a session by forced expiry, so the
timeout is in no figure; it decides only whether the cluster survives the set-up and the resets
between runs. At 100,000 partitions, with 6 s, the in-process nodes (the controller and the
victim share the benchmark's event loop) lost their sessions there: the victim flapped after
each restart and the controller resigned mid-run."""

CREATE_WINDOW = 50
"""Topic znodes created at once during set-up. One at a time, the controller decided each
topic alone (about 0.45 s per 100-partition topic at 100,000 partitions: 7.5 minutes per
cluster); in windows, one TopicsChanged covers many."""


class Probe:
    """Collects what the nodes report after t0 (instruments of adapters.node.ClusterNode), and
    the CPU the cluster used from t0 to the end of the run (`meter`, if set) and this process's
    peak RSS over the run."""

    def __init__(self, meter: CpuMeter | None = None):
        self.t0: float | None = None
        self.meter = meter
        self.cpu: dict | None = None
        self.peak_rss_mb: float | None = None
        self._rss: PeakRss | None = None
        self.on_change = None  # called after each report (end-of-run detection)
        self.events: list = []
        self.acks: list = []
        self.writes: list = []

    def start(self) -> None:
        self.reset()  # empty already (see run_mode): freeing a run's reports is not timed
        self._rss = PeakRss()
        if self.meter is not None:
            self.meter.start()
        self.t0 = time.perf_counter()

    def finish(self) -> None:
        """The end of the run (called by the end-of-run check, at once)."""
        if self.meter is not None:
            self.cpu = self.meter.stop()
        self.peak_rss_mb = self._rss.peak_mb() if self._rss is not None else None

    def reset(self) -> None:
        self.t0 = None
        self.cpu = None
        self.peak_rss_mb = None
        self.events, self.acks, self.writes = [], [], []

    def on_event(self, event, timing) -> None:
        if self.t0 is not None:
            self.events.append((event, timing))
            self._changed()

    def on_ack(self, broker, api, elapsed_ms, tag) -> None:
        if self.t0 is not None:
            self.acks.append((time.perf_counter(), broker, api, elapsed_ms))
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            asyncio.get_running_loop().call_soon(self.on_change)

    def on_written(self, write_id, count, seconds) -> None:
        if self.t0 is not None:
            self.writes.append((time.perf_counter(), write_id, count, seconds))

    def expected(self, cls, decided_by=None) -> dict[int, int]:
        """How many requests of a kind the controller queued per broker since t0 (only in its
        decisions on `decided_by` events, if given)."""
        out: dict[int, int] = {}
        for event, timing in self.events:
            if decided_by is not None and not isinstance(event, decided_by):
                continue
            for c in timing["commands"]:
                if isinstance(c, cls):
                    out[c.broker_id] = out.get(c.broker_id, 0) + 1
        return out

    def acked(self, api: str) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for t, broker, a, _ in self.acks:
            if a == api:
                out.setdefault(broker, []).append(t)
        return out


class BenchCluster:
    def __init__(self, connect: str, base: Path, partitions: int, mode: str, probe: Probe, scenario: str,
                 client_broker: bool = False):
        self.scenario = scenario
        # with the client-visible end, a broker that hosts no replica for the client to ask
        # (CLIENT_BROKER); in every cluster mode, so that the modes run the same cluster
        self.broker_ids = BROKERS + ((CLIENT_BROKER,) if client_broker else ())
        self.processes = LocalCluster(connect, base / "processes", settings=NODE_SETTINGS)
        self.connect = connect
        self.base = base
        self.partitions = partitions
        self.mode = mode
        self.probe = probe
        self.nodes: dict[int, ClusterNode] = {}
        self.client: client_visible.MetadataPoller | None = None  # the client-visible end, where measured
        self.topics = [f"bench-{i:04d}" for i in range((partitions + PER_TOPIC - 1) // PER_TOPIC)]

    def in_process(self, broker_id: int) -> bool:
        return broker_id == 5 or (broker_id == VICTIM and self.scenario != "controlled-shutdown")

    def _settings(self, broker_id: int) -> dict:
        eligible = broker_id == 5 or (broker_id == VICTIM and self.scenario == "controller-failover")
        return {**NODE_SETTINGS, "process.roles": "broker,controller" if eligible else "broker"}

    async def start_node(self, broker_id: int):
        if self.in_process(broker_id):
            config = NodeConfig(broker_id=broker_id, zookeeper=self.connect, journal_dir=str(self.base / f"node-{broker_id}"),
                                settings=self._settings(broker_id), zk_pattern=self.mode)
            node = ClusterNode(config, instruments=self.probe)
            await node.start()
            self.nodes[broker_id] = node
            return node
        self.processes.start_node(broker_id, settings=self._settings(broker_id))
        return None

    def controller(self) -> ClusterNode | None:
        found = [n for n in self.nodes.values() if n.active and n.loop.state.active]
        return found[0] if len(found) == 1 else None

    def assignment(self, index: int) -> tuple[int, ...]:
        others = [b for b in BROKERS if b != VICTIM]
        return (VICTIM, others[index % 4], others[(index + 1) % 4])

    async def setup(self, admin: ZkSession, progress, client_poll_ms: float | None = None) -> None:
        """Start the brokers and create the partitions, broker 1 leading each; with
        `client_poll_ms`, start the metadata poller meanwhile (it takes a second or so)."""
        for b in (5, 2, 3, 4, VICTIM, *self.broker_ids[len(BROKERS):]):  # broker 5 first: it becomes the controller
            await self.start_node(b)
            if b == 5:
                await until(lambda: self.controller() is not None, 30, "the first controller")
        await until(lambda: len(self.controller().loop.state.brokers) == len(self.broker_ids), 30, "all brokers")
        poller = asyncio.create_task(self.start_client(admin, client_poll_ms)) if client_poll_ms else None
        try:
            task = progress.add_task(f"[{self.mode}] creating {self.partitions:,} partitions", total=self.partitions)
            creates = []
            for t, topic in enumerate(self.topics):
                index = t * PER_TOPIC
                count = min(PER_TOPIC, self.partitions - index)
                parts = {p: ReplicaAssignment(self.assignment(index + p)) for p in range(count)}
                creates.append((zkpaths.topic(topic), zkdata.encode_topic_assignment(parts)))
            for i in range(0, len(creates), CREATE_WINDOW):
                await asyncio.gather(*(admin.create(path, data) for path, data in creates[i:i + CREATE_WINDOW]))
            await until(lambda: self._settled(progress, task), 600, "partitions created")
            progress.remove_task(task)
        except BaseException:
            if poller is not None:
                poller.cancel()  # close() ends its process
            raise
        if poller is not None:
            await poller

    def _settled(self, progress=None, task=None) -> bool:
        ctrl = self.controller()
        if ctrl is None:
            return False
        led_full, _ = _isr_counts(ctrl.loop.state.partitions)
        if progress is not None:
            progress.update(task, completed=led_full)
        return (led_full == self.partitions and not ctrl.loop.state.pending and ctrl.loop.queue.empty()
                and all(n == 0 for n in ctrl.senders.queue_sizes().values()))

    async def restore(self, admin: ZkSession, prepare: bool = True) -> None:
        """Back to a freshly settled cluster: every broker up, broker 1 leading everything with
        full ISRs, nothing in flight. With `prepare`, then a sleep and a full collection, so
        that the run starts without the garbage of the restore."""
        for b in self.broker_ids:
            if self.in_process(b):
                node = self.nodes.get(b)
                if node is None or node._stopping:
                    await self.start_node(b)
            elif not self.processes.nodes[b].running():
                await self.start_node(b)
        await until(lambda: self.controller() is not None and len(self.controller().loop.state.brokers) == len(self.broker_ids),
                    60, "all brokers back")
        await until(self._isrs_full, 300, "ISRs complete")
        ctrl = self.controller()
        if ctrl.broker_id != 5:
            # hand the controller back to broker 5, once nothing is in flight (closing a
            # controller mid-write is the chaos soak's job, not the benchmark's)
            await ctrl.close()
            await until(lambda: self.controller() is not None and self.controller().broker_id == 5, 60, "broker 5")
            await self.start_node(ctrl.broker_id)
        for attempt in range(10):
            await until(lambda: self.controller() is not None and len(self.controller().loop.state.brokers) == len(self.broker_ids),
                        60, "all brokers back")
            await until(self._isrs_full, 300, "ISRs complete")
            tps = sorted(tp for tp, info in self.controller().loop.state.partitions.items()
                         if info.leader_isr.leader != VICTIM)
            # in requests of at most PREFERRED_BATCH partitions: a znode must stay under ZooKeeper's
            # 1 MiB request limit (100,000 partitions would not)
            for i in range(0, len(tps), PREFERRED_BATCH):
                await until_async(lambda: _absent(admin, zkpaths.PREFERRED_REPLICA_ELECTION), 120,
                                  "the previous preferred election handled")
                await admin.create(zkpaths.PREFERRED_REPLICA_ELECTION,
                                   zkdata.encode_preferred_replica_election(tps[i:i + PREFERRED_BATCH]))
            try:
                await until(self._settled, 30, "preferred leaders back")
                break
            except TimeoutError:
                continue
        if prepare:
            await asyncio.sleep(PREPARE_SLEEP_S)
            t = time.perf_counter()
            gc.collect()
            bench_log.info("prepared: full collection in %.2f s", time.perf_counter() - t)

    def _isrs_full(self) -> bool:
        ctrl = self.controller()
        return ctrl is not None and _isr_counts(ctrl.loop.state.partitions)[1] == len(ctrl.loop.state.partitions)

    async def start_client(self, admin: ZkSession, interval_ms: float) -> None:
        """A stock client polling broker CLIENT_BROKER's metadata, in its own process
        (benchmarks/client_visible.py)."""
        data, stat = await admin.get(zkpaths.broker(CLIENT_BROKER))
        info = zkdata.decode_broker(CLIENT_BROKER, data, stat.czxid)
        self.client = client_visible.MetadataPoller(CLIENT_BROKER, f"{info.host}:{info.port}", interval_ms,
                                                    self.base / "metadata-poller.log")
        await self.client.start()

    async def watch_client(self, condition: dict) -> None:
        """Before t0: the poller is polling and has seen the state from before the fault."""
        if self.client is not None:
            await self.client.watch(condition)

    async def client_seen(self) -> dict:
        """After the run's end: the client-visible figures of the run (none where not measured)."""
        return await self.client.seen(self.probe.t0) if self.client is not None else {}

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
        self.processes.stop_all()
        for node in self.nodes.values():
            if not node._stopping:
                await node.close()
            elif node.zk is not None:
                await node.zk.close()


def _isr_counts(image) -> tuple[int, int]:
    """(partitions led by the victim with a full ISR, partitions with a full ISR), read from the
    controller's columns: the harness polls this every 50 ms while it waits, and a walk over
    100,000 partition values would take the measured process's loop for a good part of that."""
    present = image.column("present") & image.column("has_state")
    full = present & ((image.column("isr") != PAD).sum(axis=1) == 3)
    return int((full & (image.column("leader") == VICTIM)).sum()), int(full.sum())


PREFERRED_BATCH = 10_000
CLIENT_BROKER = 6
"""The broker the stock client polls: a sixth `kctl node` process, never the victim nor a
controller, hosting no replica. It gets every UpdateMetadata, as every live broker does, but no
LeaderAndIsr, so the end above never waits for it: after each UpdateMetadata the broker encodes
its Metadata answer for every partition again, a long stretch of its event loop at 10,000
partitions (`python -m benchmarks.kafka_metadata`), and a broker that also had LeaderAndIsr
requests to acknowledge would answer them that much later, lengthening the very end the client's
figure is reported beside."""


async def _absent(admin: ZkSession, path: str) -> bool:
    return await admin.exists(path) is None


async def until_async(predicate, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(interval)


async def until(predicate, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(interval)


# -- one measured run ------------------------------------------------------------------------------


async def run_broker_failure(cluster: BenchCluster) -> dict:
    victim = cluster.nodes[VICTIM]
    session_id, password = victim.zk.session_id, victim.zk.password
    await victim.crash()
    await cluster.watch_client({"leaders_off": VICTIM, "partitions": cluster.partitions})
    cluster.probe.start()
    await force_expire(cluster.connect, session_id, password)
    survivors = [b for b in BROKERS if b != VICTIM]
    end = await _until_acked(cluster, C.SendLeaderAndIsr, "LeaderAndIsr", survivors,
                             lambda ctrl: _moved_off(ctrl, VICTIM))
    seen = await cluster.client_seen()
    await victim.zk.close()
    return {**_phases(cluster.probe, end, "BrokersChanged", E.PartitionStatesWritten), **seen}


SHUTDOWN_DECISIONS = (E.ControlledShutdownRequested, E.PartitionStatesWritten)
"""The decisions whose LeaderAndIsr requests a controlled shutdown's end waits for: the request
and the releases of its writes. Not the victim's departure: once answered, the victim closes
its session, and the controller's BrokersChanged sends the survivors LeaderAndIsr of the
partitions it followed (no leader moves). Its answer comes with the last release, so those
requests queue behind the shutdown's at every broker. Counted until 2026-12-06 (night), they
made the end a race between the victim's exit and the brokers' acknowledgements: batched runs
of one command took 247-298 ms or 394-668 ms depending on which came first, and `kafka-2.4`,
slower than the victim's exit, always waited for them."""


async def run_controlled_shutdown(cluster: BenchCluster) -> dict:
    victim = cluster.processes.nodes[VICTIM]
    await cluster.watch_client({"leaders_off": VICTIM, "partitions": cluster.partitions})
    cluster.probe.start()
    victim.signal(signal.SIGTERM)  # `kctl node` asks the controller, then leaves
    survivors = [b for b in BROKERS if b != VICTIM]
    end = await _until_acked(cluster, C.SendLeaderAndIsr, "LeaderAndIsr", survivors,
                             lambda ctrl: _moved_off(ctrl, VICTIM), decided_by=SHUTDOWN_DECISIONS)
    seen = await cluster.client_seen()
    if await asyncio.to_thread(victim.wait, 60) != 0:  # restore() starts it again
        raise RuntimeError(f"broker {VICTIM} did not shut down cleanly (see its log in the run's directory)")
    return {**_phases(cluster.probe, end, "ControlledShutdownRequested", E.PartitionStatesWritten), **seen}


async def run_controller_failover(cluster: BenchCluster) -> dict:
    old = cluster.controller()
    if old is None:
        raise RuntimeError("no controller among the benchmark's in-process nodes when the run began "
                           "(a lost ZooKeeper session? see nodes.log in the run's directory)")
    session_id, password = old.zk.session_id, old.zk.password
    await old.crash()
    # no leader moves (broker 1 leads everything and survives): what a client can see change is
    # the controller id in the metadata
    await cluster.watch_client({"controller_not": old.broker_id})
    cluster.probe.start()
    await force_expire(cluster.connect, session_id, password)
    await until(lambda: cluster.controller() is not None and cluster.controller() is not old, 60, "a new controller")
    new = cluster.controller()
    others = [b for b in BROKERS if cluster.nodes.get(b) is not old]
    # "its UpdateMetadata": the one the new controller sends on taking over. The dead node's
    # broker leaves every ISR in the same decision (Kafka's replica state machine startup), and
    # the requests released by those writes come later: counting them would make the end
    # depend on the mode (in `sequential` they are still being written when this one is acked).
    end = await _until_acked(cluster, C.SendUpdateMetadata, "UpdateMetadata", others,
                             lambda ctrl: ctrl is new and len(ctrl.loop.state.partitions) == cluster.partitions,
                             decided_by=E.ControllerElected)
    seen = await cluster.client_seen()
    await old.zk.close()
    return {**_phases(cluster.probe, end, "ControllerElected", E.ControllerElected), **seen}


def _moved_off(ctrl: ClusterNode, broker: int) -> bool:
    # the cheap test first: this runs on the measured process's loop after each acknowledgement
    if ctrl.loop.state.pending:
        return False
    image = ctrl.loop.state.partitions
    led = image.column("present") & image.column("has_state") & (image.column("leader") == broker)
    return not led.any()


async def _until_acked(cluster: BenchCluster, cls, api: str, brokers, condition, decided_by=None) -> float:
    """Wait until the controller's condition holds and every request of `cls` it queued since
    t0 (in its decisions on `decided_by` events, if given) was acknowledged by each of
    `brokers`; returns the moment of the last acknowledgement. A broker answers its requests in
    order, so the first acknowledgements are those of the first requests.

    Checked when something happens (an acknowledgement or a processed event), never by busy
    polling: the harness must not take CPU from the system it measures."""
    probe = cluster.probe
    finished = asyncio.get_running_loop().create_future()

    def check() -> None:
        if finished.done():
            return
        ctrl = cluster.controller()
        if ctrl is None or not ctrl.loop.queue.empty():
            return
        expected = probe.expected(cls, decided_by)
        acked = probe.acked(api)
        if all(expected.get(b, 0) > 0 and len(acked.get(b, ())) >= expected[b] for b in brokers) and condition(ctrl):
            probe.finish()
            finished.set_result(max(acked[b][expected[b] - 1] for b in brokers))

    probe.on_change = check
    check()
    try:
        return await asyncio.wait_for(finished, 600)
    finally:
        probe.on_change = None


def _phases(probe: Probe, end: float, trigger: str, release_type) -> dict:
    """Attribute the time from t0 to `end` to phases. Broker round trip runs from the end of
    the last `release_type` event (the one whose step queued the requests) to `end`.

    The probe keeps reporting after the end (the runner closes a session before it calls
    this, and the loop goes on with the events that followed: the last acknowledgements, the
    rest of a write's progress), so the queue, step and journal phases count only the part of
    each event before `end`; the rest is reported beside them (`after_end`)."""
    t0 = probe.t0
    total = (end - t0) * 1000
    first = next((timing for event, timing in probe.events if type(event).__name__ == trigger), None)
    watch = ((first["enqueued"] - t0) * 1000) if first and first["enqueued"] else 0.0
    by_type: dict[str, dict] = {}  # where the step and journal phases go, event type by event type
    after = {"events": 0, "step_ms": 0.0, "journal_ms": 0.0, "queue_ms": 0.0}
    for event, t in probe.events:
        parts = _before_end(t, end)
        if t["done"] > end:
            after["events"] += 1
            whole = {"queue_ms": t["queue_ms"], "journal_ms": t["journal_ms"], "step_ms": t["step_ms"] + t["execute_ms"]}
            for k in whole:
                after[k] += whole[k] - parts[k]
            if not any(parts.values()):
                continue  # wholly after the end
        row = by_type.setdefault(type(event).__name__, {"count": 0, "step_ms": 0.0, "journal_ms": 0.0, "queue_ms": 0.0})
        row["count"] += 1
        for k in parts:
            row[k] += parts[k]
    queue = sum(row["queue_ms"] for row in by_type.values())
    step = sum(row["step_ms"] for row in by_type.values())
    journal = sum(row["journal_ms"] for row in by_type.values())
    zk_writes, write_counts = _zk_writes(probe, end)
    release = max((t["done"] for e, t in probe.events if isinstance(e, release_type) and t["done"] <= end),
                  default=None)
    round_trip = ((end - release) * 1000) if release else 0.0
    known = watch + queue + step + journal + zk_writes + round_trip
    out = {"total_ms": total, "phases_ms": {"watch_delivery": watch, "queue": queue, "step": step, "journal": journal,
                                            "zk_writes": zk_writes, "broker_round_trip": round_trip,
                                            "other": max(total - known, 0.0)}}
    out["events"] = by_type
    out["after_end"] = after
    out["zk_write_counts"] = write_counts
    out["timeline"] = timeline(probe, end)
    if probe.cpu is not None:
        out["cpu"] = probe.cpu
    if probe.peak_rss_mb is not None:
        out["peak_rss_mb"] = probe.peak_rss_mb
    return out


def timeline(probe: Probe, end: float) -> list[dict]:
    """What happened in one run, in ms from t0, for reading where its time went (the result's
    `timeline_of_median_run`, `failover_report --timeline`): each event the controller
    processed (from when it was queued to when its commands were executed), each partition-state
    write (from its start to its outcome) and each broker's acknowledgement of a request (from
    when the controller queued it for that broker). Entries reported after the end are kept."""
    t0 = probe.t0
    rows = []
    for event, t in probe.events:
        spent = t["queue_ms"] + t["journal_ms"] + t["step_ms"] + t["execute_ms"]
        done = (t["done"] - t0) * 1000
        rows.append({"what": "event", "name": type(event).__name__, "start_ms": round(done - spent, 2),
                     "end_ms": round(done, 2), "queue_ms": round(t["queue_ms"], 2),
                     "journal_ms": round(t["journal_ms"], 2), "step_ms": round(t["step_ms"] + t["execute_ms"], 2)})
    for at, write_id, count, seconds in probe.writes:
        rows.append({"what": "zk_write", "name": f"write {write_id}", "partitions": count,
                     "start_ms": round((at - seconds - t0) * 1000, 2), "end_ms": round((at - t0) * 1000, 2)})
    for at, broker, api, elapsed_ms in probe.acks:
        rows.append({"what": "ack", "name": api, "broker": broker,
                     "start_ms": round((at - t0) * 1000 - elapsed_ms, 2), "end_ms": round((at - t0) * 1000, 2)})
    rows.sort(key=lambda r: (r["start_ms"], r["end_ms"]))
    return [{"what": "end", "name": "end", "start_ms": round((end - t0) * 1000, 2),
             "end_ms": round((end - t0) * 1000, 2)}] + rows


def _before_end(timing: dict, end: float) -> dict:
    """The part of one processed event's queue, journal and step (with execute) time that lay
    before `end`. The loop reports durations and the moment it was done, so the spans are laid
    back from `done` in the order they ran: execute, the journal sync the decision waited for,
    the step, the queue (a record appended before the step is counted with the sync: an
    approximation only for an event that straddles the end)."""
    if timing["done"] <= end:
        return {"queue_ms": timing["queue_ms"], "journal_ms": timing["journal_ms"],
                "step_ms": timing["step_ms"] + timing["execute_ms"]}
    cursor = timing["done"]
    out = {"queue_ms": 0.0, "journal_ms": 0.0, "step_ms": 0.0}
    for key, ms in (("step_ms", timing["execute_ms"]), ("journal_ms", timing["journal_ms"]),
                    ("step_ms", timing["step_ms"]), ("queue_ms", timing["queue_ms"])):
        start = cursor - ms / 1000
        out[key] += max(0.0, min(cursor, end) - start) * 1000
        cursor = start
    return out


def _zk_writes(probe: Probe, end: float) -> tuple[float, dict]:
    """The zk_writes phase: the time partition-state writes were in flight between t0 and
    `end`, summed over writes (concurrent writes each count), and how many writes ran.

    The writer reports a write once, when it is done (`on_written`). A write still in flight
    at the end has no report yet: in controller-failover the end is the acknowledgement of the
    new controller's UpdateMetadata, which does not wait for the ISR shrinks written in the
    same decision, so at 10,000 partitions and more (and in the slower patterns at any size)
    the whole phase was missing. Such a write counts from the end of the decision that issued
    it (the writer starts it a few ms later, when its task first runs) to the end; a write
    reported after the end counts up to the end only."""
    t0 = probe.t0
    spent = 0.0
    reported: set[int] = set()
    for at, write_id, _count, seconds in probe.writes:
        start = at - seconds
        if start < end:
            spent += min(at, end) - max(start, t0)
            reported.add(write_id)
    in_flight = {}
    for _, t in probe.events:
        for c in t["commands"]:
            if isinstance(c, C.WritePartitionStates) and c.write_id not in reported and t["done"] < end:
                in_flight.setdefault(c.write_id, (t["done"], len(c.writes)))
    spent += sum(end - issued for issued, _ in in_flight.values())
    counts = {"reported": len(reported), "in_flight_at_end": len(in_flight),
              "partitions_in_flight_at_end": sum(n for _, n in in_flight.values())}
    return spent * 1000, counts


RUNNERS = {"broker-failure": run_broker_failure, "controlled-shutdown": run_controlled_shutdown,
           "controller-failover": run_controller_failover}


# -- the whole benchmark -------------------------------------------------------------------------------

PREPARED_NOTE = (f"each measured cluster run starts right after gc.collect() and a {PREPARE_SLEEP_S} s sleep; "
                 "'unprepared' is one more run per scenario and mode started without them (what a user meets); "
                 "each floor's first pass warms its client up and is not reported; before the first mode at each "
                 "size, ZooKeeper's JIT is warmed up by writing and reading that many states (--no-warm-up: not)")


def summarize(samples: list[dict], unprepared: dict | None = None) -> dict:
    totals = [s["total_ms"] for s in samples]
    phases = {p: statistics.median(s["phases_ms"][p] for s in samples) for p in PHASES}
    out = {"runs": len(samples), "median_ms": statistics.median(totals), "min_ms": min(totals),
           "max_ms": max(totals), "samples_ms": totals, "phases_ms": phases}
    measured = [s["cpu"] for s in samples if "cpu" in s]
    if measured:  # medians, key by key, of the runs that have the figure
        keys = [k for k in measured[0]]
        out["cpu"] = {k: (statistics.median(vs) if (vs := [m[k] for m in measured if m[k] is not None]) else None)
                      for k in keys}
    rss = [s["peak_rss_mb"] for s in samples if s.get("peak_rss_mb") is not None]
    if rss:
        out["peak_rss_mb"] = statistics.median(rss)
    if samples and "events" in samples[0]:  # the median run's breakdown by event type
        median_run = sorted(samples, key=lambda s: s["total_ms"])[len(samples) // 2]
        out["events_of_median_run"] = median_run["events"]
        if "zk_write_counts" in median_run:  # writes still in flight at the end are part of zk_writes
            out["zk_writes_of_median_run"] = median_run["zk_write_counts"]
        if "after_end" in median_run:  # what the probe saw after the end, left out of the phases
            out["after_end_of_median_run"] = median_run["after_end"]
        if "timeline" in median_run:
            out["timeline_of_median_run"] = median_run["timeline"]
    if unprepared is not None:
        out["unprepared_ms"] = unprepared["total_ms"]
        out["unprepared_phases_ms"] = unprepared["phases_ms"]
    if samples and "client_visible_ms" in samples[0]:
        out.update(client_visible.summarize(samples, unprepared))
    return out


async def run(args, console) -> dict:



    base = Path(tempfile.mkdtemp(prefix="kctl-bench-"))
    # the in-process nodes' sessions live on this loop: say in nodes.log what held it, if anything
    stalls = StallWatch(threshold=STALL_S)
    stalls.start()
    server = None
    connect = args.zookeeper
    if not connect:
        server = EmbeddedZooKeeper(base / "zookeeper")
        server.start()
        connect = server.connect_string
    zk_version = server.version() if server else "external"

    def zk_pids() -> list[int] | None:
        return [server.pid] if server is not None and server.pid else None

    def floor_meter() -> CpuMeter:
        return CpuMeter(lambda: {"controller_process": [os.getpid()], "zookeeper": zk_pids(), "brokers": []})

    sizes = args.partitions
    results: dict = {"partitions": sizes[-1], "sizes": sizes, "runs": args.runs, "scenarios": {}, "ratios": {},
                     "by_partitions": {}, "absent": {}, "skipped": {}, "note": PREPARED_NOTE,
                     "environment": {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                                     "platform": platform.platform(), "zookeeper": zk_version,
                                     "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                     "load_average_at_start": _loadavg()}}
    java = None
    if "java-floor" in args.modes:
        try:
            java = floors.JavaFloor(base)
            results["environment"]["java_floor"] = java.how
        except floors.JavaFloorAbsent as exc:
            results["absent"]["java-floor"] = str(exc)
            console.print(f"  java-floor is absent: {exc}")
    if any(m in client_visible.MODES for m in args.modes):
        reason = "not measured (--no-client)" if args.no_client else client_visible.absent_reason()
        if reason:
            results["absent"]["client-visible"] = reason
            console.print(f"  the client-visible end is absent: {reason}")
        else:
            results["environment"]["stock_client"] = stock_client.client_version()
    console.print(f"  {PREPARED_NOTE}")
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as progress:
            for partitions in sizes:
                by_size = results["by_partitions"][str(partitions)] = {"scenarios": {}}
                if not args.no_warm_up:
                    warm = await floors.warm_up(connect, partitions)
                    results["environment"].setdefault("zookeeper_warm_up", {})[str(partitions)] = warm
                    console.print(f"  {partitions:>7,} ZooKeeper warmed up: {warm['passes']} passes of {partitions:,} "
                                  f"writes and reads in {warm['seconds']:.1f} s (a write pass {warm['first_write_ms']:.0f}"
                                  f" ms at first, {warm['last_write_ms']:.0f} ms at last)")
                for scenario in args.scenarios:
                    by_size["scenarios"][scenario] = {}
                    reads = scenario == "controller-failover"
                    for mode in args.modes:
                        if mode == "sequential" and partitions > args.sequential_max:
                            results["skipped"].setdefault(str(partitions), {})[mode] = (
                                f"sequential is run up to --sequential-max {args.sequential_max:,} partitions "
                                "(one write at a time takes minutes beyond)")
                            continue
                        unprepared = None
                        if mode == "zk-floor":
                            samples = await floors.zk_floor(connect, partitions, reads, args.runs, floor_meter(), PHASES)
                        elif mode == "aiozk-reference":
                            try:
                                samples = await floors.aiozk_reference(connect, partitions, reads, args.runs,
                                                                       floor_meter(), PHASES)
                            except Exception as exc:  # noqa: BLE001 (a third-party client's failure, reported)
                                # a reference, not a floor: aiozk failing under the load (its session
                                # timed out on 100,000 concurrent reads) is a finding, not the run's end
                                reason = f"aiozk failed: {type(exc).__name__}: {exc}".rstrip(": ")
                                results["skipped"].setdefault(str(partitions), {})[f"{scenario} {mode}"] = reason
                                console.print(f"  {partitions:>7,} {scenario:20s} {mode:16s} {reason}")
                                bench_log.warning("%s at %d partitions, %s: %s", mode, partitions, scenario, reason,
                                                  exc_info=True)
                                _save_partial(results, args.out)
                                continue
                        elif mode == "java-floor":
                            if java is None:
                                continue
                            pids = zk_pids()
                            samples = await java.run(connect, partitions, reads, args.runs, pids[0] if pids else None,
                                                     PHASES)
                        else:
                            samples, unprepared = await run_mode(connect, base, scenario, mode, partitions, args,
                                                                 progress, zk_pids)
                        summary = summarize(samples, unprepared)
                        summary["partitions"] = partitions
                        by_size["scenarios"][scenario][mode] = summary
                        extra = (f", unprepared {summary['unprepared_ms']:.1f}" if "unprepared_ms" in summary else "")
                        console.print(f"  {partitions:>7,} {scenario:20s} {mode:16s} median {summary['median_ms']:9.1f} ms "
                                      f"(min {summary['min_ms']:.1f}, max {summary['max_ms']:.1f}, "
                                      f"{summary['runs']} runs{extra})")
                        by_size["ratios"] = ratios(by_size)
                        _save_partial(results, args.out)
    finally:
        stalls.stop()
        results["environment"]["loop_stalls"] = {"threshold_s": STALL_S, "count": len(stalls.stalls),
                                                 "longest_s": round(max(stalls.stalls, default=0.0), 1)}
        if server is not None:
            server.stop()
        if args.keep:
            console.print(f"kept the cluster's files (journals, node logs) in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    largest = results["by_partitions"][str(sizes[-1])]
    results["scenarios"], results["ratios"] = largest["scenarios"], largest["ratios"]
    results["environment"]["load_average_at_end"] = _loadavg()
    return results


def _save_partial(results: dict, out) -> None:
    """What is measured so far, after each mode: a long scaling run stopped midway keeps it."""
    path = Path(out) / "result.partial.json"
    path.write_text(json.dumps(results, indent=2))


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


async def run_mode(connect, base, scenario, mode, partitions, args, progress,
                   zk_pids=lambda: None) -> tuple[list[dict], dict | None]:
    """`args.runs` prepared runs of one scenario in one mode, then one unprepared run."""
    # unique per run of the benchmark: two runs in one process (the tests) must not share a cluster
    chroot = f"/bench-{scenario}-{mode}-{partitions}-{os.getpid()}-{time.monotonic_ns()}"
    chroot_connect = f"{connect}{chroot}"
    probe = Probe()
    cluster = BenchCluster(chroot_connect, base / f"{scenario}-{mode}-{partitions}", partitions, mode, probe, scenario,
                           client_broker=client_measured(args))
    probe.meter = CpuMeter(lambda: {"controller_process": [os.getpid()], "zookeeper": zk_pids(),
                                    "brokers": [n.pid for n in cluster.processes.nodes.values() if n.running()]})
    admin = await ZkSession.connect(chroot_connect, session_timeout_ms=int(NODE_SETTINGS["zookeeper.session.timeout.ms"]))
    samples = []
    unprepared = None
    try:
        polled = client_measured(args) and mode in client_visible.MODES
        await cluster.setup(admin, progress, args.client_poll_ms if polled else None)
        task = progress.add_task(f"[{mode}] {scenario}", total=args.runs + (0 if args.no_unprepared else 1))
        for _ in range(args.runs):
            await cluster.restore(admin)
            samples.append(await RUNNERS[scenario](cluster))
            probe.reset()
            progress.advance(task)
        if not args.no_unprepared:
            await cluster.restore(admin, prepare=False)
            unprepared = await RUNNERS[scenario](cluster)
            probe.reset()
            progress.advance(task)
        progress.remove_task(task)
    finally:
        await cluster.close()
        await admin.close()
        await _drop_chroot(connect, chroot)
    return samples, unprepared


async def _drop_chroot(connect: str, chroot: str) -> None:
    """Delete a finished cluster's tree (outside any measurement). Kept, the trees of a scaling
    run add up in the one ZooKeeper server: after three 100,000-partition clusters its snapshots
    were 133 MB, written every 100,000 transactions, its log fsyncs took over a second, and the
    next cluster's controller lost its session in the middle of a run."""
    t = time.perf_counter()
    root = await ZkSession.connect(connect, session_timeout_ms=int(NODE_SETTINGS["zookeeper.session.timeout.ms"]))
    try:
        await root.delete_recursive(chroot)
    finally:
        await root.close()
    bench_log.info("deleted the cluster's tree %s in %.1f s", chroot, time.perf_counter() - t)


def client_measured(args) -> bool:
    """Whether this run measures the client-visible end: one of its modes is run, the client is
    installed and not switched off."""
    return (any(m in client_visible.MODES for m in args.modes) and not args.no_client
            and client_visible.absent_reason() is None)


def ratios(results: dict) -> dict:
    """Same-run ratios of end-to-end medians, per scenario."""
    out = {}
    for scenario, modes in results["scenarios"].items():
        r = {}

        def median(mode):
            return modes.get(mode, {}).get("median_ms")

        b = median("batched")
        if b and median("zk-floor"):
            r["batched_over_floor"] = b / median("zk-floor")
            r["batched_zk_writes_over_floor"] = modes["batched"]["phases_ms"]["zk_writes"] / median("zk-floor")
        if b and median("sequential"):
            r["sequential_over_batched"] = median("sequential") / b
        if b and median("kafka-2.4"):
            r["kafka24_over_batched"] = median("kafka-2.4") / b
        if b and median("java-floor"):
            r["batched_over_java_floor"] = b / median("java-floor")
        if median("zk-floor") and median("java-floor"):
            r["zk_floor_over_java_floor"] = median("zk-floor") / median("java-floor")
        out[scenario] = r
    return out


def table(results: dict, console) -> None:
    cpu_cols = ("cpu ctrl", "cpu zk", "cpu brokers", "cores busy", "peak RSS MB")

    def ms(value) -> str:
        return "-" if value is None else f"{value:.0f}"

    for size in results["sizes"]:
        by_size = results["by_partitions"][str(size)]
        t = Table(title=f"Failover latency, {size:,} partitions, {results['runs']} runs (median ms)")
        for col in ("scenario", "mode", "median", "min", "max", "unprepared", "client-visible", *PHASES, *cpu_cols):
            t.add_column(col, justify="right" if col not in ("scenario", "mode") else "left")
        for scenario, modes in by_size["scenarios"].items():
            for mode, s in modes.items():
                cpu = s.get("cpu") or {}
                busy = cpu.get("cores_busy")
                t.add_row(scenario, mode, f"{s['median_ms']:.0f}", f"{s['min_ms']:.0f}", f"{s['max_ms']:.0f}",
                          ms(s.get("unprepared_ms")), client_cell(results, mode, s),
                          *(f"{s['phases_ms'][p]:.0f}" for p in PHASES),
                          *(ms(cpu.get(f"{g}_ms")) for g in CPU_GROUPS), "-" if busy is None else f"{busy:.0%}",
                          ms(s.get("peak_rss_mb")))
        console.print(t)
        for scenario, r in by_size["ratios"].items():
            console.print(f"{size:,} {scenario}: " + ", ".join(f"{k} {v:.2f}x" for k, v in r.items()))
    for mode, reason in results["absent"].items():
        console.print(f"{mode}: absent ({reason})")
    if "stock_client" in results["environment"]:
        console.print(f"client-visible: when a stock client ({results['environment']['stock_client']}) polling "
                      f"broker {CLIENT_BROKER}'s metadata first saw every new leader (controller-failover: the new "
                      "controller id), from t0; measured in the batched and kafka-2.4 runs")
    for size, skipped in results["skipped"].items():
        for mode, reason in skipped.items():
            console.print(f"{int(size):,} partitions, {mode}: not run ({reason})")
    console.print(results["note"])


def client_cell(results: dict, mode: str, s: dict) -> str:
    """The client-visible column: the median, `absent` where it could not be measured (the
    reason is printed under the table), `-` for the modes it is not measured in."""
    if "client_visible_median_ms" in s:
        return f"{s['client_visible_median_ms']:.0f}"
    if mode in client_visible.MODES and "client-visible" in results["absent"]:
        return "absent"
    return "-"


TARGETS_MS = {"broker-failure": 500, "controlled-shutdown": 500, "controller-failover": 2000}
"""Issue 6's end-to-end targets at 10,000 partitions, drawn on the chart."""


def chart(results: dict, path: Path, partitions: int | None = None) -> None:
    """The phase chart of one size (default: the largest). One column per scenario. Top: each
    mode's phases stacked (they overlap in time: partial releases run while ZooKeeper writes),
    the end-to-end median as a black mark, the target as a dashed line; a bar taller than the
    panel (sequential) is cut and labelled. Bottom: the CPU each group of processes
    used from t0 to the end, against the wall time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import patheffects

    partitions = partitions or results["partitions"]
    by_size = results["by_partitions"][str(partitions)]
    scenarios = [s for s, modes in by_size["scenarios"].items() if modes]  # a partial run's may be empty
    fig, axes = plt.subplots(2, len(scenarios), figsize=(max(4.6 * len(scenarios), 7.0), 7.5), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    slow = ("sequential",)
    client_labelled = False
    for col, scenario in enumerate(scenarios):
        modes = by_size["scenarios"][scenario]
        names = list(modes)
        top, bottom = axes[0][col], axes[1][col]
        # the panel's height: everything but a slow pattern's bar far above the rest
        target = TARGETS_MS.get(scenario) if partitions == 10_000 else None
        heights = {m: max(s["median_ms"], sum(s["phases_ms"].values()), s.get("client_visible_median_ms", 0.0))
                   for m, s in modes.items()}
        usual = [h for m, h in heights.items() if m not in slow] or list(heights.values())
        limit = 1.25 * max(usual + ([target] if target else []))
        cpu_heights = {m: max(s["median_ms"], (s.get("cpu") or {}).get("total_ms") or 0.0) for m, s in modes.items()}
        cpu_usual = [h for m, h in cpu_heights.items() if m not in slow] or list(cpu_heights.values())
        cpu_limit = 1.3 * max(cpu_usual)
        for x, mode in enumerate(names):
            s = modes[mode]
            base = 0.0
            for i, phase in enumerate(PHASES):
                value = s["phases_ms"][phase]
                shown = max(0.0, min(value, limit - base))
                top.bar(x, shown, bottom=base, color=colors[i % len(colors)],
                        label=phase.replace("_", " ") if col == 0 and x == 0 else None)
                base += shown
            if heights[mode] > limit:
                top.text(x, limit * 0.97, f"{s['median_ms']:,.0f} ms\n(cut)", ha="center", va="top", fontsize=7,
                         bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8})
            else:
                top.plot([x - 0.4, x + 0.4], [s["median_ms"]] * 2, color="black", linewidth=2,
                         label="end to end (median)" if col == 0 and x == 0 else None)
                if "client_visible_median_ms" in s:
                    # dotted black on a white halo: readable over any phase's colour
                    top.plot([x - 0.4, x + 0.4], [s["client_visible_median_ms"]] * 2, color="black", linewidth=2,
                             linestyle=(0, (1, 1)), zorder=5, label="client-visible (median)" if not client_labelled else None,
                             path_effects=[patheffects.Stroke(linewidth=4, foreground="white"), patheffects.Normal()])
                    client_labelled = True
            cpu = s.get("cpu") or {}
            cbase = 0.0
            for j, group in enumerate(CPU_GROUPS):
                value = cpu.get(f"{group}_ms") or 0.0
                shown = max(0.0, min(value, cpu_limit - cbase))
                bottom.bar(x, shown, bottom=cbase, color=colors[(len(PHASES) + j) % len(colors)],
                           label=f"CPU: {group.replace('_', ' ')}" if col == 0 and x == 0 else None)
                cbase += shown
            busy = f"{cpu['cores_busy']:.0%} busy" if cpu.get("cores_busy") is not None else ""
            if cpu_heights[mode] > cpu_limit:
                bottom.text(x, cpu_limit * 0.97, f"{cpu.get('total_ms') or 0:,.0f} ms CPU\nin {s['median_ms']:,.0f} ms"
                            f"\n{busy} (cut)", ha="center", va="top", fontsize=7,
                            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8})
            else:
                bottom.plot([x - 0.4, x + 0.4], [s["median_ms"]] * 2, color="black", linewidth=2)
                bottom.text(x, max(cbase, s["median_ms"]), busy, ha="center", va="bottom", fontsize=7)
        if target:
            top.axhline(target, color="gray", linestyle="--", linewidth=1)
            top.text(len(names) - 0.5, target, f"target {target} ms", ha="right", va="bottom", fontsize=8,
                     color="gray")
        top.set_ylim(0, limit)
        bottom.set_ylim(0, cpu_limit)
        top.set_title(scenario)
        top.set_xticks(range(len(names)), names, fontsize=7, rotation=30, ha="right")
        bottom.set_xticks(range(len(names)), names, fontsize=7, rotation=30, ha="right")
        if col == 0:
            top.set_ylabel("ms (phases stacked; they overlap)")
            bottom.set_ylabel("CPU ms from t0 to the end")
    narrow = len(scenarios) < 2  # (one scenario: fewer legend columns, more rows)
    fig.legend(loc="lower center", ncol=4 if narrow else 6, fontsize=8, frameon=False)
    env = results["environment"]
    fig.suptitle(f"kctl failover, {partitions:,} partitions, median of {results['runs']} runs "
                 f"({env['cpu_count']} cores)")
    fig.tight_layout(rect=(0, 0.11 if narrow else 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def timeline_chart(results: dict, path: Path, partitions: int | None = None, mode: str = "batched") -> bool:
    """The median run of `mode` in each scenario at one size, laid out in time: a row for the
    partition-state writes, one per event type the controller processed, one per broker and
    request type acknowledged; each bar from start to end (an event from when it was queued), the
    run's end as a dashed line. False (nothing drawn) if no scenario has a timeline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    partitions = partitions or results["partitions"]
    by_size = results["by_partitions"][str(partitions)]
    runs = [(scenario, modes[mode]["timeline_of_median_run"]) for scenario, modes in by_size["scenarios"].items()
            if mode in modes and modes[mode].get("timeline_of_median_run")]
    if not runs:
        return False
    colors = {"zk_write": "tab:orange", "event": "tab:blue", "ack": "tab:green"}
    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 1.6 + 2.4 * len(runs)), squeeze=False)
    for ax, (scenario, rows) in zip(axes[:, 0], runs):
        end = next(r["end_ms"] for r in rows if r["what"] == "end")
        lanes: dict[str, int] = {}
        for r in rows:
            if r["what"] == "end":
                continue
            lane = ("ZooKeeper writes" if r["what"] == "zk_write" else f"controller: {r['name']}"
                    if r["what"] == "event" else f"broker {r['broker']}: {r['name']}")
            y = lanes.setdefault(lane, len(lanes))
            ax.barh(y, max(r["end_ms"] - r["start_ms"], 0.5), left=r["start_ms"], height=0.6,
                    color=colors[r["what"]], alpha=0.55 if r["what"] == "ack" else 0.85)
        ax.axvline(end, color="black", linestyle="--", linewidth=1)
        ax.text(end, len(lanes) - 0.4, f" end {end:,.0f} ms", fontsize=8, va="top")
        ax.set_yticks(range(len(lanes)), list(lanes), fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{scenario}, {mode}, {partitions:,} partitions: the median run", fontsize=10)
        ax.set_xlabel("ms from t0 (events from when they were queued; acknowledgements from when the request "
                      "was queued for the broker)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def scaling_chart(results: dict, path: Path) -> None:
    """End-to-end median against partitions, log-log, one panel per scenario, one line per
    mode, and a dotted one for the modes with a client-visible end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = list(results["by_partitions"][str(results["sizes"][0])]["scenarios"])
    fig, axes = plt.subplots(1, len(scenarios), figsize=(max(4.6 * len(scenarios), 7.0), 4.4), squeeze=False)
    markers = "osD^v<>"
    for col, scenario in enumerate(scenarios):
        ax = axes[0][col]
        for i, mode in enumerate(MODES):
            points = [(size, results["by_partitions"][str(size)]["scenarios"].get(scenario, {}).get(mode))
                      for size in results["sizes"]]
            measured = [(size, s) for size, s in points if s is not None]
            points = [(size, s["median_ms"]) for size, s in measured]
            if points:
                line, = ax.plot(*zip(*points), marker=markers[i % len(markers)], label=mode if col == 0 else None)
                seen = [(size, s["client_visible_median_ms"]) for size, s in measured if "client_visible_median_ms" in s]
                if seen:  # the same mode's client-visible end, dotted in its colour
                    ax.plot(*zip(*seen), marker=markers[i % len(markers)], linestyle=":", fillstyle="none",
                            color=line.get_color(), label=f"{mode}, client-visible" if col == 0 else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(scenario)
        ax.set_xlabel("partitions")
        ax.grid(True, which="both", linewidth=0.3)
        if col == 0:
            ax.set_ylabel("end-to-end median, ms")
    fig.legend(loc="lower center", ncol=min(len(axes[0][0].get_lines()), 5), fontsize=8, frameon=False)
    env = results["environment"]
    fig.suptitle(f"kctl failover against partitions, median of {results['runs']} runs ({env['cpu_count']} cores)")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(args) -> int:


    # the nodes' own logs go to a file: the terminal shows progress and results
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out / "nodes.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().handlers[:] = [handler]
    logging.getLogger().setLevel(logging.INFO)
    console = Console(width=max(Console().width, 170))
    try:
        results = asyncio.run(run(args, console))
    except (Exception, TimeoutError) as exc:  # one line, as for every kctl command; the details are in nodes.log
        print(f"error: the failover benchmark failed: {type(exc).__name__}: {exc} (see {out / 'nodes.log'})",
              file=sys.stderr)
        logging.getLogger("kctl.bench").exception("the failover benchmark failed")
        return 1
    (out / "result.json").write_text(json.dumps(results, indent=2))
    (out / "result.partial.json").unlink(missing_ok=True)
    charts = [out / "failover.png"]
    chart(results, out / "failover.png")
    if timeline_chart(results, out / "timeline.png"):
        charts.append(out / "timeline.png")
    if len(results["sizes"]) > 1:
        for size in results["sizes"]:
            chart(results, out / f"failover-{size}.png", size)
            charts.append(out / f"failover-{size}.png")
        scaling_chart(results, out / "scaling.png")
        charts.append(out / "scaling.png")
    table(results, console)
    console.print(f"wrote {out / 'result.json'} and " + ", ".join(str(c) for c in charts))
    return 0


def _sizes(text: str, usage_error) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip().replace("_", "")
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise usage_error(f"--partitions takes whole numbers separated by commas, not {text!r}") from None
        if value <= 0:
            raise usage_error("--partitions must be positive")
        sizes.append(value)
    if not sizes:
        raise usage_error("--partitions needs at least one size")
    return sorted(set(sizes))


def add_command(sub, usage_error) -> None:
    p = sub.add_parser("bench", help="benchmarks (failover)")
    bench = p.add_subparsers(dest="bench", metavar="BENCHMARK", parser_class=type(p))
    f = bench.add_parser("failover", help="failover latency with N partitions against Kafka 2.4's pattern and "
                                          "the ZooKeeper floors")
    f.add_argument("--partitions", default="10000",
                   help="partitions, or a list for a scaling run (1000,10000,100000); default 10000")
    f.add_argument("--runs", type=int, default=5, help="measured runs per scenario and mode (default 5)")
    f.add_argument("--out", default="bench-out", help="where result.json, the charts and nodes.log go")
    f.add_argument("--zookeeper", default=None, help="an external ZooKeeper (default: start an embedded one)")
    f.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated (default {','.join(SCENARIOS)})")
    f.add_argument("--modes", default=",".join(MODES), help=f"comma-separated (default {','.join(MODES)})")
    f.add_argument("--sequential-max", type=int, default=20_000,
                   help="run `sequential` only at sizes up to this many partitions (default 20000)")
    f.add_argument("--no-unprepared", action="store_true",
                   help="skip the extra run per scenario and mode that starts without gc.collect() and a sleep")
    f.add_argument("--no-warm-up", action="store_true",
                   help="measure on a cold ZooKeeper: skip the writes and reads that warm its JIT up before the "
                        "first mode at each size (the first mode measured then pays for the compilation)")
    f.add_argument("--keep", action="store_true", help="keep the journals and node logs of the run")
    f.add_argument("--client-poll-ms", type=float, default=client_visible.DEFAULT_INTERVAL_MS,
                   help="the stock client's pause between metadata polls, for the client-visible end of the "
                        f"batched and kafka-2.4 runs (default {client_visible.DEFAULT_INTERVAL_MS})")
    f.add_argument("--no-client", action="store_true",
                   help="do not measure the client-visible end (no metadata poller, and no sixth broker for it "
                        "to ask)")

    def cmd(args) -> int:
        args.partitions = _sizes(str(args.partitions), usage_error)
        if args.runs <= 0:
            raise usage_error("--runs must be positive")
        if not 0 < args.client_poll_ms <= 10_000:
            raise usage_error("--client-poll-ms must be above 0 and at most 10000")
        args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
        args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        for s in args.scenarios:
            if s not in SCENARIOS:
                raise usage_error(f"unknown scenario {s!r} (choose from {', '.join(SCENARIOS)})")
        for m in args.modes:
            if m not in MODES:
                raise usage_error(f"unknown mode {m!r} (choose from {', '.join(MODES)})")
        return main(args)

    f.set_defaults(func=cmd)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


if __name__ == "__main__":
    sys.exit("run it as: kctl bench failover --help")
