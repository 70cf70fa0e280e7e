"""Small immutable values shared by events, commands and state.

Everything here is a frozen value: two equal values are interchangeable, and nothing mutates
after construction. `TopicPartition` is a NamedTuple rather than an attrs class because it is the
key of maps with 100,000 entries: tuple hashing and equality are done in C.
"""
from __future__ import annotations

from typing import NamedTuple

import attrs

NO_LEADER = -1
"""Kafka's `LeaderAndIsr.NoLeader`: the partition has no leader."""

LEADER_DURING_DELETE = -2
"""Kafka's `LeaderAndIsr.LeaderDuringDelete`: sent in UpdateMetadata for topics being deleted."""

INITIAL_LEADER_EPOCH = 0
NO_ZK_VERSION = -1
"""Expected znode version meaning "the znode does not exist yet: create it"."""


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:  # Kafka prints partitions as topic-0
        return f"{self.topic}-{self.partition}"


def _int_tuple(value) -> tuple[int, ...]:
    return value if type(value) is tuple else tuple(value)


class _LeaderIsrFields(NamedTuple):
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = NO_ZK_VERSION


class LeaderIsr(_LeaderIsrFields):
    """The content of a partition's state znode, plus the znode version it was read at.

    `zk_version` is the version of `/brokers/topics/<t>/partitions/<p>/state` this value was
    read from or written as; the next conditional write must expect it.

    A NamedTuple (built in C, compared and hashed as a tuple): a failover makes 10,000 of them,
    and a frozen attrs instance costs three times as much to build. `isr` is always a tuple.
    """

    __slots__ = ()

    def __new__(cls, leader: int, leader_epoch: int, isr, controller_epoch: int, zk_version: int = NO_ZK_VERSION):
        return tuple.__new__(cls, (leader, leader_epoch, isr if type(isr) is tuple else tuple(isr),
                                   controller_epoch, zk_version))

    def with_leader(self, leader: int, isr: tuple[int, ...], controller_epoch: int) -> "LeaderIsr":
        """Kafka's `newLeaderAndIsr`: a controller-made change always bumps the leader epoch."""
        return LeaderIsr(leader, self[1] + 1, isr, controller_epoch, self[4])

    def with_version(self, zk_version: int) -> "LeaderIsr":
        return tuple.__new__(LeaderIsr, (self[0], self[1], self[2], self[3], zk_version))


@attrs.frozen(slots=True)
class ReplicaAssignment:
    """Kafka 2.4's `ReplicaAssignment`: the full replica set RS, and during a reassignment the
    replicas being added (AR) and removed (RR). The first replica is the preferred leader."""

    replicas: tuple[int, ...] = attrs.field(converter=_int_tuple)
    adding: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)
    removing: tuple[int, ...] = attrs.field(default=(), converter=_int_tuple)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """OAR: what the partition had before the reassignment started."""
        adding = self.adding
        return tuple(r for r in self.replicas if r not in adding) if adding else self.replicas

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """TRS (RAR): what the partition will have when the reassignment completes."""
        removing = self.removing
        return tuple(r for r in self.replicas if r not in removing) if removing else self.replicas

    def reassign_to(self, target: tuple[int, ...]) -> "ReplicaAssignment":
        """Kafka's `reassignTo`: RS = target + OAR (deduplicated, target order first)."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys(tuple(target) + origin))
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )


_SHARED: dict[tuple, ReplicaAssignment] = {}
_SHARED_CAP = 1 << 16  # distinct assignments shared; past this, new ones are simply built


def shared_assignment(replicas: tuple[int, ...], adding: tuple[int, ...] = (),
                      removing: tuple[int, ...] = ()) -> ReplicaAssignment:
    """`ReplicaAssignment(replicas, adding, removing)` from tuples, one shared value per distinct
    assignment (they are immutable): a cluster has a few dozen distinct ones among 100,000
    partitions, and the partition image and a new controller's read of the topic znodes build
    one per partition. Sharing saves memory and makes equal values compare by identity. (Threads
    may share the table: an entry is only ever added, and a race costs one more value.)"""
    key = (replicas, adding, removing)
    a = _SHARED.get(key)
    if a is None:
        a = ReplicaAssignment(replicas, adding, removing)
        if len(_SHARED) < _SHARED_CAP:
            _SHARED[key] = a
    return a


@attrs.frozen(slots=True)
class BrokerInfo:
    """A registered broker, as read from `/brokers/ids/<id>`.

    `epoch` is the czxid of the ephemeral znode: a broker that restarts gets a larger one, which
    is how the controller tells a bounce from a broker that never left.
    """

    broker_id: int
    host: str
    port: int
    epoch: int
    rack: str | None = None


class PartitionView(NamedTuple):
    """One partition as the controller sends it to brokers (LeaderAndIsr / UpdateMetadata).

    Kafka's `LeaderAndIsrPartitionState` / `UpdateMetadataPartitionState` carry the same fields.
    A NamedTuple, like `TopicPartition`, because a failover builds 10,000 of them on the
    controller and every broker decodes as many: a tuple is made in C, three times faster than
    a frozen attrs instance. Change a field with `view._replace(...)`.
    """

    tp: TopicPartition
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    is_new: bool = False
