"""Every ZooKeeper path of the Kafka 2.4 layout (CONTRACT.md section 1).

Paths are relative to the chroot of the connect string and start with "/". Functions that build
a path from a name check that the name is one path segment, so a bad topic name can never
address a znode outside its parent.
"""
from __future__ import annotations

import functools

__all__ = [
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "BROKERS",
    "BROKERS_IDS",
    "TOPICS",
    "ADMIN",
    "REASSIGN_PARTITIONS",
    "PREFERRED_REPLICA_ELECTION",
    "DELETE_TOPICS",
    "ISR_CHANGE_NOTIFICATION",
    "ISR_CHANGE_PREFIX",
    "ISR_CHANGE_SEQUENCE_PREFIX",
    "CONFIG",
    "CONFIG_TOPICS",
    "CLUSTER",
    "CLUSTER_ID",
    "PERSISTENT_PATHS",
    "broker",
    "topic",
    "partitions",
    "partition",
    "partition_state",
    "delete_topic",
    "isr_change",
    "isr_change_sequence",
    "config_topic",
]

CONTROLLER = "/controller"
"""Ephemeral; names the current controller."""
CONTROLLER_EPOCH = "/controller_epoch"
"""Persistent; the controller epoch. Its znode version is the fencing token."""

BROKERS = "/brokers"
BROKERS_IDS = "/brokers/ids"
"""Parent of the ephemeral broker registrations `/brokers/ids/<id>`."""
TOPICS = "/brokers/topics"
"""Parent of the topic assignments `/brokers/topics/<topic>`."""

ADMIN = "/admin"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
DELETE_TOPICS = "/admin/delete_topics"
"""Parent of the deletion requests `/admin/delete_topics/<topic>` (no data)."""

ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
"""Name prefix of the persistent sequential notification znodes."""
ISR_CHANGE_SEQUENCE_PREFIX = f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"
"""The path to pass to a sequential create: ZooKeeper appends the 10-digit counter."""

CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
"""Parent of the topic config overrides `/config/topics/<topic>`."""

CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"

PERSISTENT_PATHS = (
    BROKERS_IDS,
    TOPICS,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    CONFIG_TOPICS,
)
"""Parents that must exist before anything watches or writes under them (Kafka creates the
same ones at startup). Creating each with its ancestors is enough."""


def broker(broker_id: int) -> str:
    return f"{BROKERS_IDS}/{_number(broker_id, 'broker id')}"


def topic(name: str) -> str:
    return f"{TOPICS}/{_segment(name, 'topic')}"


def partitions(topic_name: str) -> str:
    return f"{topic(topic_name)}/partitions"


def partition(topic_name: str, partition_id: int) -> str:
    return f"{partitions(topic_name)}/{_number(partition_id, 'partition')}"


@functools.lru_cache(maxsize=1 << 18)
def partition_state(topic_name: str, partition_id: int) -> str:
    # cached: a failover writes the same 10,000 state paths that the previous one did, and
    # building and checking them cost 30 ms of its critical path
    return f"{partition(topic_name, partition_id)}/state"


def delete_topic(name: str) -> str:
    return f"{DELETE_TOPICS}/{_segment(name, 'topic')}"


def config_topic(name: str) -> str:
    return f"{CONFIG_TOPICS}/{_segment(name, 'topic')}"


def isr_change(sequence: str) -> str:
    """The path of one ISR change notification, from its 10-digit sequence or full child name."""
    if sequence.startswith(ISR_CHANGE_PREFIX):
        sequence = sequence[len(ISR_CHANGE_PREFIX):]
    if not (sequence.isascii() and sequence.isdigit()):
        raise ValueError(f"not an ISR change notification sequence number: {sequence!r}")
    return f"{ISR_CHANGE_SEQUENCE_PREFIX}{sequence}"


def isr_change_sequence(name_or_path: str) -> str:
    """The sequence number of a notification, given its child name or its full path.

    Like Kafka's `IsrChangeNotificationSequenceZNode.sequenceNumber`: everything after the last
    `isr_change_` prefix.
    """
    at = name_or_path.rfind(ISR_CHANGE_PREFIX)
    if at < 0:
        raise ValueError(f"not an ISR change notification: {name_or_path!r}")
    return name_or_path[at + len(ISR_CHANGE_PREFIX):]


def _segment(name: str, what: str) -> str:
    if (
        not isinstance(name, str)
        or not name
        or "/" in name
        or "\x00" in name
        or name in (".", "..")
    ):
        raise ValueError(f"invalid {what} name for a znode path: {name!r}")
    return name


def _number(value: int, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"invalid {what} for a znode path: {value!r}")
    return str(value)
