"""The controller's state: Kafka's ControllerContext as one immutable value.

`ControllerState` is what `step()` takes and returns. Per-partition data lives in the columnar
partition image (`columns.py`): a persistent vector of column chunks, so an event touching one
partition of 100,000 copies one chunk, and a decision touching every partition is a few array
operations. Handlers read one partition as a `PartitionInfo` value built from its row.
"""
from __future__ import annotations

from typing import Iterator

import attrs

from .events import Event
from .columns import EMPTY_IMAGE, as_image
from .partition_info import PartitionInfo, _pair  # noqa: F401 (re-exported: the core imports them from here)
from .plain_attrs import builder
from .pmap import EMPTY, PMap
from .values import TopicPartition


@attrs.frozen(kw_only=True)
class ControllerConfig:
    """The node configuration keys the controller's decisions depend on (Kafka's names in the
    `kctl node --set` keys; see README)."""

    broker_id: int
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    delete_topic_enable: bool = True
    rules: int = 4
    """Not a node setting: the decision rules this controller follows, as KRaft's
    `metadata.version` gates what a controller does. 4: a replica its broker reported on a
    failed log dir is left out of elections and of its partition's LeaderAndIsr recipients
    until the broker restarts (`replicas_on_offline_dirs`, log_dirs.py). 3: a topic whose
    deletion this controller completed is not created again from a listing that may have been
    read before its znodes were removed (`removing_topics`, deletion.py). 2: an election
    refused on a cached ISR is confirmed against ZooKeeper before it is final (step.py), and
    KAFKA_STORAGE_ERROR in a LeaderAndIsr answer takes the replica offline (log_dirs.py). 1:
    neither, as the controllers that wrote the journals before them decided (states decoded
    from those journals' snapshots say 1). The journals keep the rules their controller
    followed, so that the replay re-executes each as it was decided."""
    dynamic_unclean_leader_election_enable: bool | None = None
    """The node's dynamic value: its own `/config/brokers/<id>`, else the cluster default
    `/config/brokers/<default>` (None: set in neither); it wins over the node's static
    `unclean_leader_election_enable` (BrokerDefaultConfigChanged)."""

    def unclean_default(self) -> bool:
        """`unclean.leader.election.enable` for a topic without an override: the dynamic cluster
        default, then the node's static setting."""
        if self.dynamic_unclean_leader_election_enable is not None:
            return self.dynamic_unclean_leader_election_enable
        return self.unclean_leader_election_enable


@attrs.frozen(slots=True)
class TopicInfo:
    """A topic's partition count (its partitions are numbered 0..count-1)."""

    partition_count: int


def config_value(config: tuple[tuple[str, str], ...] | None, key: str) -> str | None:
    for k, v in config or ():
        if k == key:
            return v
    return None


@attrs.frozen(kw_only=True)
class ControllerState:
    """Kafka's ControllerContext plus the bookkeeping of an asynchronous shell.

    - `brokers`: live or shutting-down brokers (Kafka's liveOrShuttingDownBrokers) by id
      (`PMap[int, BrokerInfo]`).
    - `topics`: `PMap[str, TopicInfo]`; `topic_configs`: `PMap[str, tuple[(key, value), ...]]`,
      kept apart so that a config may arrive before or after its topic.
    - `partitions`: the columnar image (`columns.PartitionImage`), read as a mapping
      `TopicPartition -> PartitionInfo`.
    - `seen_brokers`: every broker id this controller has seen registered (a reassignment to a
      broker that is neither seen nor hosting any replica is rejected as unknown).
    - `pending`: decisions whose partition-state writes are in flight, by write id; their
      broker requests go out only when ZooKeeper has accepted the writes.
    - `plan_zk_version`: the version `/admin/reassign_partitions` has as far as this controller
      knows (read, or written by itself; -1: absent): its rewrites are conditional on it, and a
      listing older than it is an echo of its own earlier writes, not a request.
    - `deferred`: events that arrived while a write was pending, in arrival order. They are
      decided once the write's outcome is known (see `step.py`): no decision is ever made on
      a partition state that ZooKeeper has not confirmed.
    - `rechecking`: the event (zero or one) whose decision refused an election on a cached ISR
      and waits for the states it re-reads (`recheck_id`, the `ReadPartitionStates` read id);
      it is decided again when they arrive, and events behind it are deferred meanwhile.
    - `removing_topics`: topics whose deletion this controller completed and whose znodes the
      ZooKeeper writer is removing (`DeleteTopic` sent, `TopicZnodesDeleted` not yet seen). A
      topic listing queued meanwhile may have been read before the removal: these topics in it
      are not new topics (rules 3).
    - `replicas_on_offline_dirs`: `(partition, broker)` pairs whose broker answered a
      LeaderAndIsr with KAFKA_STORAGE_ERROR for them (Kafka's replicasOnOfflineDirs): such a
      replica counts as offline in elections although its broker is live. A broker's pairs go
      when it starts or fails (a failed disk is replaced with the broker down), a topic's when
      it is deleted or forgotten. A new controller starts with none, as Kafka's does: its
      LeaderAndIsr to every replica brings the errors back (rules 4).
    """

    config: ControllerConfig
    active: bool = False
    epoch: int = 0
    epoch_zk_version: int = -1
    brokers: PMap = EMPTY
    shutting_down: frozenset[int] = frozenset()
    seen_brokers: frozenset[int] = frozenset()
    topics: PMap = EMPTY
    topic_configs: PMap = EMPTY
    partitions: PMap = attrs.field(default=EMPTY_IMAGE, converter=as_image)
    """A `columns.PartitionImage` (any partitions mapping given is converted to one); the hint
    says PMap because the codec encodes it as that map."""
    reassigning: frozenset[TopicPartition] = frozenset()
    reassignment_plan: tuple[tuple[TopicPartition, tuple[int, ...]], ...] = ()
    topics_to_delete: frozenset[str] = frozenset()
    topics_deletion_started: frozenset[str] = frozenset()
    topics_ineligible_for_deletion: frozenset[str] = frozenset()
    pending: PMap = EMPTY  # PMap[int, request_batch.Outbox]
    next_write_id: int = 1
    deferred: tuple[Event, ...] = ()
    plan_zk_version: int = -1
    rechecking: tuple[Event, ...] = ()
    recheck_id: int = 0
    removing_topics: frozenset[str] = frozenset()
    replicas_on_offline_dirs: frozenset[tuple[TopicPartition, int]] = frozenset()

    # -- read helpers (Kafka's ControllerContext queries) -------------------------------------

    @property
    def live_broker_ids(self) -> frozenset[int]:
        """Live brokers that are not shutting down (Kafka's liveBrokerIds)."""
        return frozenset(self.brokers.keys()) - self.shutting_down

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        return self.partitions.get(tp)

    def partitions_of(self, topic: str) -> Iterator[TopicPartition]:
        info = self.topics.get(topic)
        if info is not None:
            for p in range(info.partition_count):
                yield TopicPartition(topic, p)

    def unclean_allowed(self, topic: str) -> bool:
        """The topic's `unclean.leader.election.enable`, falling back to the node default."""
        value = config_value(self.topic_configs.get(topic), "unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_default()
        return value.strip().lower() == "true"

    def is_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete


STATE_FIELDS = tuple(f.name for f in attrs.fields(ControllerState))
"""`ControllerState`'s fields in declaration order."""

state_from = builder(ControllerState, frozenset({"partitions"}))
"""`state_from(*values)`: a `ControllerState` of every field's value in `STATE_FIELDS` order
(`partitions` an image), built by setting its slots (plain_attrs.py): every decision makes
one."""


def initial_state(config: ControllerConfig) -> ControllerState:
    """The state of a node that is not (yet) the controller."""
    return ControllerState(config=config)
