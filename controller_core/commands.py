"""Commands: imperative values returned by `step()` for the runtime to execute, in order.

Every ZooKeeper write a command asks for is issued by the runtime as a multi-op whose first
op checks the `/controller_epoch` version. Broker requests go to each broker's send queue.
Each docstring says which adapter executes the command and what comes back (as an event).
"""
from __future__ import annotations

import attrs

from .values import BrokerInfo, LeaderIsr, PartitionView, ReplicaAssignment, TopicPartition

frozen = attrs.frozen(kw_only=True)


@attrs.frozen(slots=True)
class PartitionWrite:
    """One state znode to write: the content of `leader_isr` (whose `zk_version` is the version
    it will have once written), conditional on the znode being at `expected_version`
    (-1: create the znode)."""

    tp: TopicPartition
    leader_isr: LeaderIsr
    expected_version: int


@frozen
class WritePartitionStates:
    """Write these partition state znodes, batched into epoch-checked multi-ops.
    Executed by the ZooKeeper writer; answered by `PartitionStatesWritten(write_id)`."""

    write_id: int
    writes: tuple[PartitionWrite, ...]


@frozen
class WriteTopicAssignment:
    """Overwrite `/brokers/topics/<topic>` with this full assignment (RS, adding, removing).
    Executed by the ZooKeeper writer; only a failure comes back (`ZnodeWriteFailed`)."""

    topic: str
    partitions: tuple[tuple[int, ReplicaAssignment], ...]


@frozen
class DeleteTopic:
    """Remove a deleted topic's znodes: `/brokers/topics/<t>` (recursively),
    `/config/topics/<t>` and `/admin/delete_topics/<t>`. Executed by the ZooKeeper writer."""

    topic: str


@frozen
class DeleteTopicDeletionRequests:
    """Remove `/admin/delete_topics/<t>` for topics that do not exist."""

    topics: tuple[str, ...]


@frozen
class WriteReassignmentPlan:
    """Rewrite `/admin/reassign_partitions` with the partitions still pending; an empty plan
    deletes the znode. Conditional on the znode being at `expected_version` (-1: any): when an
    admin wrote a new request meanwhile, the write is dropped and the watch delivers the new
    content. Executed by the ZooKeeper writer."""

    partitions: tuple[tuple[TopicPartition, tuple[int, ...]], ...]
    expected_version: int = -1


@frozen
class DeletePreferredElectionRequest:
    """Delete `/admin/preferred_replica_election` once handled, if it is still at
    `expected_version` (-1: any): a request written meanwhile is not lost."""

    expected_version: int = -1


@frozen
class SendLeaderAndIsr:
    """Queue a LeaderAndIsr request for one broker. Executed by that broker's send queue;
    answered by `LeaderAndIsrResponded`."""

    broker_id: int
    broker_epoch: int
    controller_epoch: int
    partitions: tuple[PartitionView, ...]
    live_leaders: tuple[BrokerInfo, ...]


@frozen
class SendUpdateMetadata:
    """Queue an UpdateMetadata request for one broker (the same `partitions` tuple object is
    shared by every broker of a decision, so the sender can encode it once). `shutting_down`
    names the live brokers in controlled shutdown: leaders stop counting their replicas as
    fetching (Kafka's followers simply stop fetching; our simulated brokers need telling)."""

    broker_id: int
    broker_epoch: int
    controller_epoch: int
    partitions: tuple[PartitionView, ...]
    live_brokers: tuple[BrokerInfo, ...]
    shutting_down: tuple[int, ...] = ()


@frozen
class SendStopReplica:
    """Queue a StopReplica request (with `delete`, the broker removes the replica's data);
    answered by `StopReplicaResponded`."""

    broker_id: int
    broker_epoch: int
    controller_epoch: int
    delete: bool
    partitions: tuple[TopicPartition, ...]


@frozen
class ReplyControlledShutdown:
    """Answer a ControlledShutdown request: the partitions the broker still leads (empty
    when it may shut down), or an error. Executed by the control-channel server."""

    request_id: int
    broker_id: int
    error: str | None
    partitions_remaining: tuple[TopicPartition, ...] = ()


@frozen
class ReplyLeaderElection:
    """Answer an ElectLeaders request, one (partition, error or None) per partition."""

    request_id: int
    results: tuple[tuple[TopicPartition, str | None], ...]


@frozen
class ScheduleTimer:
    """Fire `TimerFired(name)` after `delay_ms` (replacing a pending timer of that name)."""

    name: str
    delay_ms: int


@frozen
class CancelTimer:
    name: str


@frozen
class WatchPartitionStates:
    """Watch these partitions' state znodes (reassignments wait for their ISR); changes come
    back as `PartitionStatesObserved(source="reassignment")`."""

    partitions: tuple[TopicPartition, ...]


@frozen
class ReadPartitionStates:
    """Read these partitions' state znodes now and answer with
    `PartitionStatesRechecked(read_id=...)`: a decision refused their election on a cached ISR
    that a partition leader may have changed since (its ISR change notification still queued),
    and waits for ZooKeeper's word before the refusal is final. Executed by the watches."""

    read_id: int
    partitions: tuple[TopicPartition, ...]


@frozen
class UnwatchPartitionStates:
    partitions: tuple[TopicPartition, ...]


@frozen
class Resign:
    """Stop acting as controller: stop watches and senders, and delete `/controller` if it
    still names this node so that a fresh election runs. Executed by the election adapter."""

    reason: str


@frozen
class RejectRequest:
    """Report one rejected input (an admin request, a broker request) with the reason; the
    runtime logs it as one error line and counts it."""

    kind: str
    reason: str


@attrs.frozen(slots=True)
class StateChange:
    """A group of state-change-log entries: the same transition applied to `partitions`
    (`replica` -1 for partition transitions), or refused (`ok` false, `detail` says why).
    Grouping keeps a 10,000-partition failover at a handful of entries."""

    from_state: str
    to_state: str
    partitions: tuple[TopicPartition, ...]
    replica: int = -1
    ok: bool = True
    detail: str = ""


@frozen
class LogStateChanges:
    """The state-change log of one decision, and the event that caused it."""

    cause: str
    entries: tuple[StateChange, ...]


Command = (
    WritePartitionStates
    | WriteTopicAssignment
    | DeleteTopic
    | DeleteTopicDeletionRequests
    | WriteReassignmentPlan
    | DeletePreferredElectionRequest
    | SendLeaderAndIsr
    | SendUpdateMetadata
    | SendStopReplica
    | ReplyControlledShutdown
    | ReplyLeaderElection
    | ScheduleTimer
    | CancelTimer
    | WatchPartitionStates
    | ReadPartitionStates
    | UnwatchPartitionStates
    | Resign
    | RejectRequest
    | LogStateChanges
)

COMMAND_TYPES: tuple[type, ...] = Command.__args__  # type: ignore[attr-defined]
