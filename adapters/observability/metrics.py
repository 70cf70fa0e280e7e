"""Prometheus metrics of one node, under the names Kafka's dashboards already query.

Kafka publishes its controller metrics as JMX MBeans; most sites export them with the
Prometheus JMX exporter and its standard Kafka rules (`example_configs/kafka-2_0_0.yml`,
`lowercaseOutputName: true`). `prometheus_name()` applies those rules, so
`kafka.controller:type=KafkaController,name=OfflinePartitionsCount` is served as
`kafka_controller_kafkacontroller_offlinepartitionscount` here as it would be from a Kafka
broker, and a dashboard or alert written for Kafka works unchanged. What the rules make of each
kind of Yammer metric:

- Gauge (`Value`): a gauge of the same name.
- Meter named `...PerSec` (`Count`): a counter `kafka_<domain>_<type>_<name without PerSec>_total`.
- Timer / Histogram (`Count`, `50thPercentile` ... `999thPercentile`): a summary, quantiles
  0.50 0.75 0.95 0.98 0.99 0.999 and `_count` (plus `_sum`, which the exporter lacks).
- Other MBean keys (`broker-id=1`) become labels, with invalid characters replaced (`broker_id`).

Metrics of our own (no Kafka counterpart) are prefixed `kctl_`. `METRICS` lists every family a
node serves; the README table is `markdown_table()`; a test checks a scrape against it.

Cost: gauges derived from the controller state (offline partitions, imbalance, deletion
counts...) are computed when scraped, in the HTTP server's thread, from the immutable state
value the loop last published (`node.loop.state`; reading one reference is safe), and cached
per state value. The event loop pays only the `ControllerStats` observer: O(1) per event plus
O(commands) for the write bookkeeping, never O(partitions).
"""
from __future__ import annotations

import collections
import math
import re
import socketserver
import threading
import time
from typing import Iterable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import attrs
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import make_wsgi_app
from prometheus_client.registry import Collector

from controller_core import commands as C
from controller_core import events as E
from controller_core import queries

# -- names ------------------------------------------------------------------------------------------

QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))
"""The percentile attributes of a Yammer timer/histogram and the label the exporter gives them."""

_JMX = re.compile(r"^kafka\.(\w+):(.+)$")
_PER_SEC = re.compile(r"^(.+)PerSec\w*$")


class MetricNameError(ValueError):
    pass


def prometheus_name(jmx: str) -> tuple[str, tuple[str, ...]]:
    """The Prometheus family name and label names the JMX exporter's standard Kafka rules give
    the MBean `jmx` (e.g. `kafka.controller:type=ControllerChannelManager,name=QueueSize,broker-id=1`
    -> (`kafka_controller_controllerchannelmanager_queuesize`, (`broker_id`,))). Counters (meters
    named ...PerSec) end in `_total`; timers and histograms are summaries of the base name."""
    m = _JMX.match(jmx)
    if m is None:
        raise MetricNameError(f"not a kafka.<domain>:key=value,... MBean name: {jmx!r}")
    domain, keys = m.groups()
    props = []
    for item in keys.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise MetricNameError(f"bad key=value {item!r} in {jmx!r}")
        props.append((key.strip(), value.strip()))
    if len(props) < 2 or props[0][0] != "type" or props[1][0] != "name" or len(props) > 4:
        raise MetricNameError(f"the standard rules match type=T,name=N and at most two more keys: {jmx!r}")
    kind, name = props[0][1], props[1][1]
    labels = tuple(re.sub(r"[^A-Za-z0-9_]", "_", k) for k, _ in props[2:])
    per_sec = _PER_SEC.match(name)
    if per_sec is not None:
        return _safe(f"kafka_{domain}_{kind}_{per_sec.group(1)}_total"), labels
    return _safe(f"kafka_{domain}_{kind}_{name}"), labels


def _safe(name: str) -> str:
    # the exporter lowercases (lowercaseOutputName) and turns what a metric name cannot hold into _
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9_:]", "_", name.lower()))


@attrs.frozen
class MetricDef:
    """One family a node serves. `jmx` is Kafka's MBean (None for kctl_ metrics); `name` is the
    family name as queried (counters with `_total`); `kind` gauge, counter or summary."""

    name: str
    kind: str
    help: str
    jmx: str | None = None
    labels: tuple[str, ...] = ()


def _kafka(jmx: str, kind: str, help: str) -> MetricDef:
    name, labels = prometheus_name(jmx)
    return MetricDef(name=name, kind=kind, help=help, jmx=jmx, labels=labels)


_KC = "kafka.controller:type=KafkaController,name="
_CS = "kafka.controller:type=ControllerStats,name="

CONTROLLER_STATES: dict[str, int] = {
    "Idle": 0, "ControllerChange": 1, "BrokerChange": 2, "TopicChange": 3, "TopicDeletion": 4,
    "AlterPartitionReassignment": 5, "AutoLeaderBalance": 6, "ManualLeaderBalance": 7, "ControlledShutdown": 8,
    "IsrChange": 9, "LeaderAndIsrResponseReceived": 10, "LogDirChange": 11, "ControllerShutdown": 12,
    "UncleanLeaderElectionEnable": 13, "TopicUncleanLeaderElectionEnable": 14, "ListPartitionReassignment": 15,
}
"""Kafka 2.4's `ControllerState` values (the ControllerState gauge)."""

EVENT_STATES: dict[str, str] = {
    "ControllerElected": "ControllerChange", "ControllerResigned": "ControllerChange",
    "ControllerFenced": "ControllerChange", "BrokersChanged": "BrokerChange", "TopicsChanged": "TopicChange",
    "TopicConfigsChanged": "TopicUncleanLeaderElectionEnable", "TopicDeletionsRequested": "TopicDeletion",
    "StopReplicaResponded": "TopicDeletion", "TopicZnodesDeleted": "TopicDeletion",
    "ReassignmentRequested": "AlterPartitionReassignment",
    "PreferredElectionRequested": "ManualLeaderBalance", "LeaderElectionRequested": "ManualLeaderBalance",
    "PartitionStatesObserved": "IsrChange", "ControlledShutdownRequested": "ControlledShutdown",
    "LeaderAndIsrResponded": "LeaderAndIsrResponseReceived", "TimerFired": "AutoLeaderBalance",
    "BrokerDefaultConfigChanged": "UncleanLeaderElectionEnable", "LogDirEventNotified": "LogDirChange",
}
"""Our events as the Kafka controller states whose work they do. Kafka's config-change event
that matters to the controller is TopicUncleanLeaderElectionEnable; a PartitionStatesObserved
from a reassignment watch is AlterPartitionReassignment (see `state_of`). `PartitionStatesWritten`
and `ZnodeWriteFailed` have no state of their own: they finish the decision whose write they
report (Kafka's writes are synchronous, inside that decision's event), so they take its state."""

TIMERS: dict[str, str] = {
    "ControllerChange": "ControllerChangeRateAndTimeMs", "BrokerChange": "LeaderElectionRateAndTimeMs",
    "TopicChange": "TopicChangeRateAndTimeMs", "TopicDeletion": "TopicDeletionRateAndTimeMs",
    "AlterPartitionReassignment": "PartitionReassignmentRateAndTimeMs",
    "AutoLeaderBalance": "AutoLeaderBalanceRateAndTimeMs", "ManualLeaderBalance": "ManualLeaderBalanceRateAndTimeMs",
    "ControlledShutdown": "ControlledShutdownRateAndTimeMs", "IsrChange": "IsrChangeRateAndTimeMs",
    "LeaderAndIsrResponseReceived": "LeaderAndIsrResponseReceivedRateAndTimeMs",
    "TopicUncleanLeaderElectionEnable": "TopicUncleanLeaderElectionEnableRateAndTimeMs",
    "UncleanLeaderElectionEnable": "UncleanLeaderElectionEnableRateAndTimeMs",
    "LogDirChange": "LogDirChangeRateAndTimeMs",
    "ControllerShutdown": "ControllerShutdownRateAndTimeMs",
}
"""Kafka's per-state `ControllerStats` timers (BrokerChange keeps its historical name,
LeaderElectionRateAndTimeMs). Each measures a decision from the start of its step until its
partition-state writes are confirmed and its broker requests released (Kafka's event thread
holds the state through its synchronous writes), or the step alone when it writes nothing.
ControllerShutdownRateAndTimeMs is registered as Kafka 2.4 registers it, and stays at count 0 as
Kafka's does: its event thread drops the ShutdownEventThread event untimed (here the controller
stops in the node's teardown, with no event through the loop).
(ListPartitionReassignmentRateAndTimeMs is not: there is no ListPartitionReassignments API.)"""

_GAUGES = (
    ("ActiveControllerCount", "1 on the active controller, else 0"),
    ("OfflinePartitionsCount", "partitions without a live leader, not counting topics queued for deletion"),
    ("PreferredReplicaImbalanceCount", "partitions whose leader is not their first (preferred) replica, "
                                       "not counting topics queued for deletion"),
    ("GlobalTopicCount", "topics"),
    ("GlobalPartitionCount", "partitions"),
    ("TopicsToDeleteCount", "topics queued for deletion"),
    ("ReplicasToDeleteCount", "replicas of topics queued for deletion not yet deleted"),
    ("TopicsIneligibleToDeleteCount", "topics whose deletion cannot proceed now"),
    ("ReplicasIneligibleToDeleteCount", "replicas of topics queued for deletion in ReplicaDeletionIneligible"),
    ("ControllerState", "the Kafka ControllerState of the decision in progress (0 Idle, 1 ControllerChange, "
                        "2 BrokerChange, 3 TopicChange, 4 TopicDeletion, 5 AlterPartitionReassignment, "
                        "6 AutoLeaderBalance, 7 ManualLeaderBalance, 8 ControlledShutdown, 9 IsrChange, "
                        "10 LeaderAndIsrResponseReceived, 11 LogDirChange, 13 UncleanLeaderElectionEnable, 14 TopicUncleanLeaderElectionEnable)"),
)

_SEL = "kafka.server:type=SessionExpireListener,name="
_ZK_METERS = (  # Kafka's ZooKeeperClient meters, one per session state change
    ("ZooKeeperSyncConnectsPerSec", "connections of this node's ZooKeeper session established (the first included)"),
    ("ZooKeeperDisconnectsPerSec", "connections of this node's ZooKeeper session lost"),
    ("ZooKeeperExpiresPerSec", "sessions of this node found expired on reconnecting"),
)

METRICS: tuple[MetricDef, ...] = (
    *(_kafka(_KC + n, "gauge", h) for n, h in _GAUGES),
    _kafka("kafka.controller:type=ControllerEventManager,name=EventQueueSize", "gauge",
           "events waiting in the controller's queue"),
    _kafka("kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs", "summary",
           "time events waited in the queue (ms)"),
    *(_kafka(_CS + t, "summary", f"{s} decisions: time from the start of the step until their partition-state "
                                 f"writes were confirmed and their requests released (ms)")
      for s, t in TIMERS.items() if s != "ControllerShutdown"),
    _kafka(_CS + TIMERS["ControllerShutdown"], "summary",
           "ControllerShutdown: never observed, as in Kafka 2.4 (its shutdown event is not timed); kept for dashboards"),
    _kafka(_CS + "UncleanLeaderElectionsPerSec", "counter", "unclean leader elections"),
    _kafka("kafka.controller:type=ControllerChannelManager,name=QueueSize,broker-id=N", "gauge",
           "requests queued for (or in flight to) one broker"),
    _kafka("kafka.controller:type=ControllerChannelManager,name=TotalQueueSize", "gauge",
           "requests queued for (or in flight to) every broker"),
    *(_kafka(_SEL + n, "counter", h) for n, h in _ZK_METERS),
    MetricDef("kctl_zookeeper_connected", "gauge", "1 and the server (host:port) while this node's ZooKeeper "
              "session has a connection; 0 with server=\"\" while it has none", labels=("server",)),
    MetricDef("kctl_zookeeper_disconnected_seconds_total", "counter",
              "time this node's ZooKeeper client spent without a connection since its first one (s)"),
    MetricDef("kctl_zookeeper_handshake_failures_total", "counter",
              "servers that closed the session handshake: behind the last zxid this client saw, or not serving"),
    _kafka("kafka.controller:type=ControllerChannelManager,name=RequestRateAndQueueTimeMs,broker-id=N", "summary",
           "time requests to one broker waited in its queue before being sent (ms)"),
    MetricDef("kctl_controller_events_total", "counter", "events decided, by event type", labels=("event",)),
    MetricDef("kctl_controller_leader_elections_total", "counter",
              "partitions that got a new leader by an election (OfflinePartition or OnlinePartition -> OnlinePartition)"),
    MetricDef("kctl_controller_rejected_total", "counter", "admin and broker requests the controller rejected"),
    MetricDef("kctl_controller_partition_state_writes_total", "counter", "partition state znodes written"),
    MetricDef("kctl_controller_zookeeper_write_time_ms", "summary",
              "partition-state write batches: from issuing the multi-ops to their outcome (ms)"),
    MetricDef("kctl_controller_journal_time_ms", "summary",
              "journal append and the event's share of the group fsync, per event (ms)"),
    MetricDef("kctl_controller_step_time_ms", "summary", "time in step(), per event (ms)"),
    MetricDef("kctl_controller_epoch", "gauge", "the controller epoch of this node's term (0 when not controller)"),
    MetricDef("kctl_controller_live_brokers", "gauge", "live or shutting-down brokers the controller knows"),
    MetricDef("kctl_controller_under_replicated_partitions", "gauge",
              "partitions whose ISR is smaller than their replica set (controller's view)"),
    MetricDef("kctl_controller_pending_writes", "gauge", "decisions waiting for their partition-state writes"),
    MetricDef("kctl_controller_deferred_events", "gauge", "events waiting for a pending write before being decided"),
)

_BY_JMX_NAME = {d.jmx.split("name=")[1].split(",")[0]: d for d in METRICS if d.jmx}


def metric(kafka_name: str) -> MetricDef:
    """The definition of a Kafka metric by its `name=` (e.g. "OfflinePartitionsCount")."""
    return _BY_JMX_NAME[kafka_name]


def markdown_table() -> str:
    """The README's table: Kafka's MBean -> the Prometheus family served."""
    rows = ["| Kafka MBean (JMX) | Prometheus | type | meaning |", "|---|---|---|---|"]
    for d in METRICS:
        labels = "{" + ",".join(d.labels) + "}" if d.labels else ""
        rows.append(f"| {f'`{d.jmx}`' if d.jmx else '(kctl)'} | `{d.name}{labels}` | {d.kind} | {d.help} |")
    return "\n".join(rows)


# -- per-event observations (the loop's thread) -------------------------------------------------------


class Window:
    """A Kafka timer or histogram: count and sum since start, quantiles over the most recent
    `size` observations (Yammer's default reservoir also holds 1028). Observed on the loop,
    read by scrapes on another thread: a lock keeps the pair consistent."""

    def __init__(self, size: int = 1028):
        self._lock = threading.Lock()
        self._recent: collections.deque = collections.deque(maxlen=size)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        with self._lock:
            self._recent.append(value)
            self.count += 1
            self.sum += value

    def snapshot(self) -> tuple[list[float], int, float]:
        with self._lock:
            return sorted(self._recent), self.count, self.sum


def quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of sorted values (NaN when empty, Prometheus's convention)."""
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def state_of(event) -> str | None:
    """The Kafka ControllerState of an event (None: it continues the decision of its write)."""
    kind = type(event)
    if kind is E.PartitionStatesRechecked:
        return None  # finishes the decision of the event that asked for the read
    if kind is E.PartitionStatesObserved and event.source == "reassignment":
        return "AlterPartitionReassignment"
    return EVENT_STATES.get(kind.__name__)


def _state_of_cause(cause: str) -> str | None:
    # a decision's cause is its event's type name, sometimes with details: "ControllerElected(epoch 2)"
    return EVENT_STATES.get(cause.split("(", 1)[0])


class ControllerStats:
    """The loop observer behind the timers and counters (registered in `loop.observers`).

    Per event: the queue time, journal and step times, and the Kafka state timer. A decision
    that writes partition states is timed until the outcome of its write (carried across a
    retry after version conflicts); `_writes` maps each write in flight to (state, start of
    the decision, time the write was issued), and also tells the ControllerState gauge which
    decision the controller is busy with while it waits for ZooKeeper."""

    def __init__(self):
        self.event_queue_time = Window()
        self.journal_time = Window()
        self.step_time = Window()
        self.zk_write_time = Window()
        self.timers = {state: Window() for state in TIMERS}
        self.partition_state_writes = 0
        self._writes: dict[int, tuple[str, float, float]] = {}

    def __call__(self, event, timing: dict) -> None:
        done = timing["done"]
        started = done - (timing["step_ms"] + timing["execute_ms"]) / 1000
        self.event_queue_time.observe(timing["queue_ms"])
        self.journal_time.observe(timing["journal_ms"])
        self.step_time.observe(timing["step_ms"])
        before, state = timing["before"], timing["state"]
        kind = type(event)
        if not state.active:
            self._writes.clear()  # a resigned controller's writes decide nothing any more
            if before.active:
                self._time("ControllerChange", done - started)
            return
        origin = None
        if kind is E.PartitionStatesWritten:
            origin = self._writes.pop(event.write_id, None)
            if origin is not None and timing.get("enqueued"):
                self.zk_write_time.observe(max(0.0, timing["enqueued"] - origin[2]) * 1000)
        carried = wrote = False
        for c in timing["commands"]:
            if type(c) is not C.WritePartitionStates:
                continue
            self.partition_state_writes += len(c.writes)
            outbox = state.pending.get(c.write_id)
            decided = _state_of_cause(getattr(outbox, "cause", "") or "")
            if decided is None and origin is not None:  # the retry of the write just reported
                self._writes[c.write_id] = (origin[0], origin[1], done)
                carried = True
            else:
                self._writes[c.write_id] = (decided or state_of(event) or "Idle", started, done)
                wrote = True
        if origin is not None:
            if not carried:
                self._time(origin[0], done - origin[1])
        elif not wrote and kind is not E.PartitionStatesWritten and not _deferred(event, before, state):
            self._time(state_of(event), done - started)

    def _time(self, state: str | None, seconds: float) -> None:
        window = self.timers.get(state)
        if window is not None:
            window.observe(seconds * 1000)

    def state_while(self, processing) -> int:
        """The ControllerState value: the event being decided, else the oldest decision waiting
        for its writes, else Idle (called from a scrape)."""
        writes = dict(self._writes)  # one C-level copy: the loop may change the dict meanwhile
        name = None
        if processing is not None:
            if type(processing) is E.PartitionStatesWritten:
                origin = writes.get(processing.write_id)
                name = origin[0] if origin else None
            else:
                name = state_of(processing)
        elif writes:
            name = writes[min(writes)][0]
        return CONTROLLER_STATES.get(name or "Idle", 0)


def _deferred(event, before, state) -> bool:
    deferred = getattr(state, "deferred", ())
    return bool(deferred) and deferred[-1] is event and len(deferred) > len(getattr(before, "deferred", ()))


# -- scrape-time gauges (the HTTP server's thread) ----------------------------------------------------


@attrs.frozen
class ClusterCounts:
    offline: int = 0
    imbalance: int = 0
    under_replicated: int = 0
    replicas_to_delete: int = 0
    replicas_ineligible: int = 0


def cluster_counts(state) -> ClusterCounts:
    """Kafka's definitions (KafkaController.updateMetrics), over one immutable state: see
    controller_core/queries.py, which counts over the columns of the partition image."""
    return ClusterCounts(*queries.cluster_counts(state))


class NodeCollector(Collector):
    """Builds every family at scrape time from the node's live objects (`node.loop`,
    `node.senders`, `node.executor`), which may not exist yet early in `start()`."""

    def __init__(self, node, stats: ControllerStats):
        self.node = node
        self.stats = stats
        self._cache: tuple | None = None  # (state.partitions, brokers, topics_to_delete, counts)

    def _counts(self, state) -> ClusterCounts:
        key = (state.partitions, state.brokers, state.topics_to_delete)
        cached = self._cache
        if cached is not None and all(a is b for a, b in zip(cached[:3], key)):
            return cached[3]
        counts = cluster_counts(state)
        self._cache = (*key, counts)
        return counts

    def collect(self) -> Iterable[Metric]:
        node = self.node
        loop = getattr(node, "loop", None)
        state = loop.state if loop is not None else None
        active = bool(getattr(node, "active", False) and state is not None and state.active)
        counts = self._counts(state) if active else ClusterCounts()
        values = {
            "ActiveControllerCount": 1 if active else 0,
            "OfflinePartitionsCount": counts.offline,
            "PreferredReplicaImbalanceCount": counts.imbalance,
            "GlobalTopicCount": len(state.topics) if active else 0,
            "GlobalPartitionCount": len(state.partitions) if active else 0,
            "TopicsToDeleteCount": len(state.topics_to_delete) if active else 0,
            "ReplicasToDeleteCount": counts.replicas_to_delete,
            "TopicsIneligibleToDeleteCount": len(state.topics_ineligible_for_deletion) if active else 0,
            "ReplicasIneligibleToDeleteCount": counts.replicas_ineligible,
            "ControllerState": self.stats.state_while(loop.processing if loop is not None else None),
            "EventQueueSize": loop.queue.qsize() if loop is not None else 0,
        }
        for kafka_name, value in values.items():
            d = metric(kafka_name)
            yield GaugeMetricFamily(d.name, d.help, value=value)
        yield _summary(metric("EventQueueTimeMs"), self.stats.event_queue_time)
        for state_name, timer in TIMERS.items():
            yield _summary(metric(timer), self.stats.timers[state_name])
        executor = getattr(node, "executor", None)
        d = metric("UncleanLeaderElectionsPerSec")
        yield CounterMetricFamily(d.name, d.help, value=getattr(executor, "unclean_elections", 0))
        sizes = _queue_sizes(getattr(node, "senders", None)) if active else {}
        d = metric("QueueSize")
        family = GaugeMetricFamily(d.name, d.help, labels=d.labels)
        for broker_id, size in sorted(sizes.items()):
            family.add_metric([str(broker_id)], size)
        yield family
        d = metric("TotalQueueSize")
        yield GaugeMetricFamily(d.name, d.help, value=sum(sizes.values()))
        d = metric("RequestRateAndQueueTimeMs")
        family = Metric(d.name, d.help, "summary")
        windows = dict(getattr(getattr(node, "senders", None), "queue_times", {}) or {}) if active else {}
        for broker_id, window in sorted(windows.items()):
            ordered, count, total = window.snapshot()
            labels = {"broker_id": str(broker_id)}
            for label, q in QUANTILES:
                family.add_sample(d.name, {**labels, "quantile": label}, quantile(ordered, q))
            family.add_sample(d.name + "_count", labels, count)
            family.add_sample(d.name + "_sum", labels, total)
        yield family
        yield from self._kctl(loop, state, active, counts, executor)
        yield from self._zookeeper(getattr(node, "zk", None))

    def _zookeeper(self, zk) -> Iterable[Metric]:
        """The node's ZooKeeper client as it sees its connection (adapters/zookeeper/connection.py's
        ConnectionView; plain numbers read from the loop's thread without a lock)."""
        view = zk.connection if zk is not None else None
        for name, attr in (("ZooKeeperSyncConnectsPerSec", "connections"), ("ZooKeeperDisconnectsPerSec", "disconnects"),
                           ("ZooKeeperExpiresPerSec", "expiries")):
            d = metric(name)
            yield CounterMetricFamily(d.name, d.help, value=getattr(view, attr, 0))
        defs = {d.name: d for d in METRICS if d.name.startswith("kctl_zookeeper_")}
        d = defs["kctl_zookeeper_connected"]
        family = GaugeMetricFamily(d.name, d.help, labels=d.labels)
        server = view.server if view is not None else None
        family.add_metric([server or ""], 1 if server else 0)
        yield family
        d = defs["kctl_zookeeper_disconnected_seconds_total"]
        yield CounterMetricFamily(d.name, d.help,
                                  value=view.seconds_without_connection(time.monotonic()) if view is not None else 0.0)
        d = defs["kctl_zookeeper_handshake_failures_total"]
        yield CounterMetricFamily(d.name, d.help, value=getattr(view, "handshake_failures", 0))

    def _kctl(self, loop, state, active, counts: ClusterCounts, executor) -> Iterable[Metric]:
        defs = {d.name: d for d in METRICS if d.jmx is None}
        d = defs["kctl_controller_events_total"]
        family = CounterMetricFamily(d.name, d.help, labels=d.labels)
        by_type = dict(loop.stats.by_type) if loop is not None else {}  # a C-level copy
        for name, count in sorted(by_type.items()):
            family.add_metric([name], count)
        yield family
        for name, value in (("kctl_controller_leader_elections_total", getattr(executor, "leader_elections", 0)),
                            ("kctl_controller_rejected_total", getattr(executor, "rejections", 0)),
                            ("kctl_controller_partition_state_writes_total", self.stats.partition_state_writes)):
            yield CounterMetricFamily(name, defs[name].help, value=value)
        yield _summary(defs["kctl_controller_zookeeper_write_time_ms"], self.stats.zk_write_time)
        yield _summary(defs["kctl_controller_journal_time_ms"], self.stats.journal_time)
        yield _summary(defs["kctl_controller_step_time_ms"], self.stats.step_time)
        gauges = {
            "kctl_controller_epoch": state.epoch if active else 0,
            "kctl_controller_live_brokers": len(state.brokers) if active else 0,
            "kctl_controller_under_replicated_partitions": counts.under_replicated,
            "kctl_controller_pending_writes": len(state.pending) if active else 0,
            "kctl_controller_deferred_events": len(getattr(state, "deferred", ())) if active else 0,
        }
        for name, value in gauges.items():
            yield GaugeMetricFamily(name, defs[name].help, value=value)


def _summary(d: MetricDef, window: Window) -> Metric:
    ordered, count, total = window.snapshot()
    family = Metric(d.name, d.help, "summary")
    for label, q in QUANTILES:
        family.add_sample(d.name, {"quantile": label}, quantile(ordered, q))
    family.add_sample(d.name + "_count", {}, count)
    family.add_sample(d.name + "_sum", {}, total)
    return family


def _queue_sizes(senders) -> dict[int, int]:
    if senders is None:
        return {}
    for _ in range(3):
        try:
            return senders.queue_sizes()
        except RuntimeError:  # the loop added or removed a broker's queue while we iterated
            continue
    return {}


# -- the endpoint -------------------------------------------------------------------------------------


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass  # one stderr line per scrape is noise (and not JSON)


class MetricsError(OSError):
    """The metrics endpoint could not be served (e.g. the port is taken): the OSError of the
    bind, naming the metrics address as its `filename`, so that `kctl node` reports it as it
    reports a taken --listen port."""


class NodeMetrics:
    """One node's metrics: a registry of its own (several nodes may share a process), the loop
    observer, and the HTTP endpoint serving `/metrics` (any path, as prometheus-client does)."""

    def __init__(self, node):
        self.stats = ControllerStats()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(NodeCollector(node, self.stats))
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    def serve(self, host: str, port: int) -> int:
        """Start serving on host:port (0: any free port); return the port."""
        try:
            server = make_server(host, port, make_wsgi_app(self.registry), _Server, handler_class=_QuietHandler)
        except OSError as exc:
            raise MetricsError(exc.errno, exc.strerror or str(exc), f"metrics endpoint {host}:{port}") from exc
        self._server = server
        self.port = server.server_port
        # a short poll interval: close() waits for the serving loop to notice the shutdown
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"metrics-{self.port}", daemon=True)
        self._thread.start()
        return self.port

    def close(self) -> None:
        """Stop serving (blocks for up to one poll interval)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
