"""Events: past-tense facts fed to `step()`, one at a time, through the controller's FIFO queue.

Every event carries `at` (ms since the epoch), stamped by the adapter that saw the fact; the core
never reads a clock. Events are level-triggered: a watch that fired is turned into the *current*
content of what it watched, and the core diffs it against its state. The core never sees znode
paths, watch types or ZooKeeper exceptions; malformed admin input arrives as a `problem` string
so that rejecting it is a decision of the core (and lands in the journal).

Each docstring says which adapter emits the event.
"""
from __future__ import annotations

import attrs

from .snapshot_states import SnapshotStates
from .values import BrokerInfo, LeaderIsr, ReplicaAssignment, TopicPartition

frozen = attrs.frozen(kw_only=True)


def _tuple(value):
    return value if type(value) is tuple else tuple(value)


def _states(value):
    """A snapshot's partition states: the reader's columns as they are, anything else a tuple."""
    return value if type(value) is tuple or type(value) is SnapshotStates else tuple(value)


@frozen
class ClusterSnapshot:
    """Everything a new controller reads from ZooKeeper before it acts.

    - `topics`: (topic, ((partition, ReplicaAssignment), ...)) for every parsable topic znode.
    - `malformed_topics`: (topic, problem) for topic znodes that could not be parsed.
    - `topic_configs`: (topic, ((key, value), ...)).
    - `partition_states`: (TopicPartition, LeaderIsr) for every existing state znode: a tuple
      of pairs, or the same pairs as columns (`SnapshotStates`, what the election adapter
      reads), which iterate and compare as that tuple.
    - `reassignment` / `preferred_election`: the admin znodes, as their events would carry them.
    """

    brokers: tuple[BrokerInfo, ...] = attrs.field(default=(), converter=_tuple)
    topics: tuple[tuple[str, tuple[tuple[int, ReplicaAssignment], ...]], ...] = attrs.field(default=(), converter=_tuple)
    malformed_topics: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_tuple)
    topic_configs: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = attrs.field(default=(), converter=_tuple)
    partition_states: tuple[tuple[TopicPartition, LeaderIsr], ...] = attrs.field(default=(), converter=_states)
    topics_to_delete: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    reassignment: ReassignmentRequested | None = None
    preferred_election: PreferredElectionRequested | None = None


@frozen
class ControllerElected:
    """This node won the election: its multi-op created `/controller` and moved
    `/controller_epoch` to `epoch` (znode version `epoch_zk_version`, the fencing token).
    Emitted by the election adapter after it registered every watch and read the whole tree."""

    at: int
    epoch: int
    epoch_zk_version: int
    snapshot: ClusterSnapshot


@frozen
class ControllerResigned:
    """This node is no longer the controller (another node holds `/controller`, or the
    ZooKeeper session was lost). Emitted by the election adapter, which has already stopped
    the controller's watches."""

    at: int
    reason: str


@frozen
class ControllerFenced:
    """A write's `/controller_epoch` version check failed: a newer controller exists, and
    nothing of that write was applied. Emitted by the ZooKeeper writer."""

    at: int
    reason: str


@frozen
class BrokersChanged:
    """The full current listing of `/brokers/ids` with each broker's registration.
    Emitted by the child watch on `/brokers/ids`."""

    at: int
    brokers: tuple[BrokerInfo, ...] = attrs.field(converter=_tuple)


@frozen
class TopicsChanged:
    """The current topic names under `/brokers/topics`, plus the assignment of each topic the
    watcher (re)read: new topics, and topics whose znode data changed (partition expansion,
    or the controller's own reassignment writes). Emitted by the topic watches."""

    at: int
    topics: frozenset[str] = attrs.field(converter=frozenset)
    assignments: tuple[tuple[str, tuple[tuple[int, ReplicaAssignment], ...]], ...] = attrs.field(
        default=(), converter=_tuple
    )
    malformed: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_tuple)


@frozen
class TopicConfigsChanged:
    """The current overrides of the named topics (`/config/topics/<t>`; a missing znode is an
    empty config). Emitted by the config watches."""

    at: int
    configs: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = attrs.field(converter=_tuple)


@frozen
class BrokerDefaultConfigChanged:
    """The node's dynamic broker-level `unclean.leader.election.enable` (the default of topics
    without an override) is now this value (None: set nowhere dynamically): its own
    `/config/brokers/<id>` if that sets it, else the cluster-wide `/config/brokers/<default>`.
    Emitted by every node's dynamic-config follower (adapters/broker/config_watch.py, node.py),
    controller or not, when the value changes, and at start when it is set: like Kafka's dynamic
    broker config, it is the node's setting, kept across terms. (Journals before 2026-12-06
    carry the cluster default alone.)"""

    at: int
    unclean_leader_election_enable: bool | None = None


@frozen
class LogDirEventNotified:
    """Brokers reported a failed log dir (`/log_dir_event_notification/log_dir_event_<seq>`,
    each `{"version":1,"broker":B,"event":1}`); `brokers` lists the broker of every notification
    read, which the adapter then deleted. Emitted by the controller's log-dir event watch
    (adapters/controller/log_dir_events.py)."""

    at: int
    brokers: tuple[int, ...] = attrs.field(converter=_tuple)


@frozen
class TopicDeletionsRequested:
    """The current children of `/admin/delete_topics`. Emitted by its child watch."""

    at: int
    topics: frozenset[str] = attrs.field(converter=frozenset)


@frozen
class ReassignmentRequested:
    """The current content of `/admin/reassign_partitions` (`exists` false when absent) and the
    znode version it was read at (-1: absent, or unknown in journals before v2). Emitted by its
    data watch; `problem` is set when the znode could not be parsed."""

    at: int
    exists: bool
    partitions: tuple[tuple[TopicPartition, tuple[int, ...]], ...] = attrs.field(default=(), converter=_tuple)
    problem: str | None = None
    zk_version: int = -1


@frozen
class PreferredElectionRequested:
    """The current content of `/admin/preferred_replica_election` and the znode version it was
    read at (-1: absent or unknown). Emitted by its data watch."""

    at: int
    exists: bool
    partitions: tuple[TopicPartition, ...] = attrs.field(default=(), converter=_tuple)
    problem: str | None = None
    zk_version: int = -1


@frozen
class LeaderElectionRequested:
    """An ElectLeaders request (`kctl leader-election`) received on the control channel.
    `partitions` None means every partition. Emitted by the control-channel server."""

    at: int
    request_id: int
    election_type: str  # "preferred" | "unclean"
    partitions: tuple[TopicPartition, ...] | None = None


@frozen
class PartitionStatesObserved:
    """Current state znodes of some partitions, read after an ISR change notification
    (`source="isr_change"`) or a watch on a reassigning partition (`source="reassignment"`).
    None means the znode does not exist. Emitted by the ISR watches."""

    at: int
    states: tuple[tuple[TopicPartition, LeaderIsr | None], ...] = attrs.field(converter=_tuple)
    source: str = "isr_change"


@frozen
class PartitionStatesRechecked:
    """The state znodes of partitions whose election the controller was about to refuse on
    its cached ISR, read again before the refusal is final (Kafka reads every partition's state
    before it elects). Emitted by the watches in answer to `ReadPartitionStates`, whose
    `read_id` it carries; None means the znode does not exist."""

    at: int
    read_id: int
    states: tuple[tuple[TopicPartition, LeaderIsr | None], ...] = attrs.field(converter=_tuple)


@frozen
class ControlledShutdownRequested:
    """A broker asked to shut down cleanly. Emitted by the control-channel server."""

    at: int
    request_id: int
    broker_id: int
    broker_epoch: int


@frozen
class LeaderAndIsrResponded:
    """A broker acknowledged a LeaderAndIsr request; `errors` lists per-partition failures.
    Emitted by the broker's send queue."""

    at: int
    broker_id: int
    errors: tuple[tuple[TopicPartition, str], ...] = attrs.field(default=(), converter=_tuple)


@frozen
class StopReplicaResponded:
    """A broker answered a StopReplica request for `partitions`; `errors` lists failures.
    Emitted by the broker's send queue."""

    at: int
    broker_id: int
    delete: bool
    partitions: tuple[TopicPartition, ...] = attrs.field(converter=_tuple)
    errors: tuple[tuple[TopicPartition, str], ...] = attrs.field(default=(), converter=_tuple)


@frozen
class PartitionStatesWritten:
    """The outcome of a `WritePartitionStates`: for each conflict the state znode's current
    content (None if missing); every other write of the command landed. `versions` gives the new
    znode version of a landed write only where it differs from the one the write predicted
    (its `leader_isr.zk_version`); ZooKeeper's conditional writes make that list empty, and
    older journals list every landed write. Emitted by the ZooKeeper writer after it split,
    diagnosed and retried the batch.

    A large write also reports progress before it finishes: `final=False` outcomes list in
    `landed` writes that have landed (at their predicted versions) so far, and nothing else; the
    core sends those partitions' LeaderAndIsr and UpdateMetadata at once, so brokers work while
    ZooKeeper is still writing the rest. The write stays in flight until its final outcome."""

    at: int
    write_id: int
    versions: tuple[tuple[TopicPartition, int], ...] = attrs.field(default=(), converter=_tuple)
    conflicts: tuple[tuple[TopicPartition, LeaderIsr | None], ...] = attrs.field(default=(), converter=_tuple)
    landed: tuple[TopicPartition, ...] = attrs.field(default=(), converter=_tuple)
    final: bool = True


@frozen
class ZnodeWriteFailed:
    """A write other than a partition state failed for a reason other than fencing (e.g. the
    znode vanished). Emitted by the ZooKeeper writer; the core reports it."""

    at: int
    what: str
    reason: str


@frozen
class TopicZnodesDeleted:
    """The ZooKeeper writer is done with a `DeleteTopic`: the topic's znodes are gone (or the
    delete gave up, which `ZnodeWriteFailed` reported first). Emitted by the ZooKeeper writer
    after the multi-op's answer, so any topic listing read after the deletion is queued after
    this event, and any listing queued before it may have been read before the deletion."""

    at: int
    topic: str


@frozen
class TimerFired:
    """A timer the core scheduled went off. Emitted by the timer adapter."""

    at: int
    name: str


Event = (
    ControllerElected
    | ControllerResigned
    | ControllerFenced
    | BrokersChanged
    | TopicsChanged
    | TopicConfigsChanged
    | TopicDeletionsRequested
    | ReassignmentRequested
    | PreferredElectionRequested
    | LeaderElectionRequested
    | PartitionStatesObserved
    | PartitionStatesRechecked
    | ControlledShutdownRequested
    | LeaderAndIsrResponded
    | StopReplicaResponded
    | PartitionStatesWritten
    | ZnodeWriteFailed
    | TopicZnodesDeleted
    | TimerFired
    | BrokerDefaultConfigChanged
    | LogDirEventNotified
)

EVENT_TYPES: tuple[type, ...] = Event.__args__  # type: ignore[attr-defined]
