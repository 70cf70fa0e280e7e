"""The admin tools' logic: topics, partition reassignment, leader election and a cluster summary.

These are the operations of Kafka 2.4's `kafka-topics.sh --zookeeper`,
`kafka-reassign-partitions.sh --zookeeper` and `kafka-leader-election.sh`, as async functions
on a `ZkSession`. They write the znodes Kafka's tools write (CONTRACT.md section 1) and nothing
else; the controller does the rest. `adapters/cli/admin.py` turns them into `kctl` commands.

Two kinds of failure:

- `AdminError`: the request is wrong or refused (bad name, unknown broker, existing topic, a
  reassignment already running ...). Everything is checked before the first write, so the
  cluster is untouched. The CLI prints it as one `error: ...` line and exits 2.
- `ToolFailure` (and its `ControllerUnavailable`): the request was fine but could not be
  carried out (ZooKeeper or the controller unreachable, an election that failed). Exit 1.

Placement goes through `controller_core.assignment` over the live brokers sorted by id, with a
random start index drawn from `os.urandom` as Kafka draws it from its `Random`.
"""
from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable

from controller_core.assignment import assign_replicas_to_brokers, expand_partitions
from controller_core.values import BrokerInfo, LeaderIsr, ReplicaAssignment, TopicPartition

from adapters.znodes import dynconfig
from adapters.control import requests as Q
from adapters.admin import throttle as throttling
from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.zookeeper.session import (
    BadVersion,
    Create,
    NoAuth,
    NodeExists,
    NoNode,
    SetData,
    TransactionFailed,
    ZkSession,
)
from adapters.control.transport import ControlChannelError, ControlClient

__all__ = [
    "AdminError",
    "ToolFailure",
    "ControllerUnavailable",
    "TopicConfigError",
    "validate_topic_name",
    "parse_replica_assignment",
    "parse_topic_configs",
    "validate_topic_configs",
    "topic_pattern",
    "random_seed",
    "parse_broker_list",
    "controller_request",
    "TOPIC_CONFIGS",
    "ELECTION_NOT_NEEDED",
    "live_brokers",
    "create_topic",
    "add_partitions",
    "alter_topic_configs",
    "delete_topics",
    "describe_topics",
    "list_topics",
    "generate_reassignment",
    "execute_reassignment",
    "verify_reassignment",
    "elect_leaders",
    "cluster_summary",
    "REASSIGNMENT_COMPLETED",
    "REASSIGNMENT_IN_PROGRESS",
    "REASSIGNMENT_FAILED",
]

MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


class AdminError(Exception):
    """Bad input or a refused request; nothing was written."""


class ToolFailure(Exception):
    """A valid request that could not be carried out."""


class ControllerUnavailable(ToolFailure):
    """No controller answered."""


class TopicConfigError(AdminError):
    pass


def random_seed() -> int:
    return int.from_bytes(os.urandom(8), "big")


# -- input checks ------------------------------------------------------------------------------


def validate_topic_name(topic: str) -> None:
    """Kafka's `Topic.validate`, with its messages."""
    if not topic:
        raise AdminError("Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise AdminError('Topic name cannot be "." or ".."')
    if len(topic) > MAX_TOPIC_LENGTH:
        raise AdminError(f"Topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH} characters, "
                         f"topic: {topic}")
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise AdminError(f'Topic name "{topic}" is illegal, it contains a character other than '
                         "ASCII alphanumerics, '.', '_' and '-'")


def _legal(topic: str) -> bool:
    try:
        validate_topic_name(topic)
    except AdminError:
        return False
    return True


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """`1:2:3,2:3:1`: partition i is the i-th comma group (Kafka's `parseReplicaAssignment`)."""
    result: dict[int, list[int]] = {}
    for partition, group in enumerate(text.split(",")):
        replicas = []
        for item in group.split(":"):
            item = item.strip()
            if not re.fullmatch(r"[0-9]{1,10}", item) or int(item) > 2**31 - 1:  # a Java Int, not negative
                raise AdminError(f"--replica-assignment: {item!r} in partition {partition} ({group!r}) "
                                 "is not a broker id")
            replicas.append(int(item))
        duplicates = sorted({r for r in replicas if replicas.count(r) > 1})
        if duplicates:
            raise AdminError("Partition replica lists may not contain duplicate entries: "
                             + ",".join(map(str, duplicates)))
        if result and len(replicas) != len(result[0]):
            raise AdminError(f"Partition {partition} has different replication factor: "
                             + ",".join(map(str, replicas)))
        result[partition] = replicas
    return result


def parse_topic_configs(items: Iterable[str] | None) -> dict[str, str]:
    """`--config k=v` items (Kafka splits on `=` and wants exactly two parts)."""
    configs: dict[str, str] = {}
    for item in items or ():
        parts = re.split(r"\s*=\s*", item.strip())
        if len(parts) != 2 or not parts[0]:
            raise AdminError(f'Invalid topic config {item!r}: all configs to be added must be in the format "key=val".')
        configs[parts[0]] = parts[1]
    return configs


_BOOL = "bool"
_LONG = "long"
_INT = "int"
_RATIO = "ratio"
_STRING = "string"
# Kafka 2.4's LogConfig: name -> (kind, lower bound or allowed values)
TOPIC_CONFIGS: dict[str, tuple[str, Any]] = {
    "cleanup.policy": ("list", {"compact", "delete"}),
    "compression.type": ("enum", {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}),
    "delete.retention.ms": (_LONG, 0),
    "file.delete.delay.ms": (_LONG, 0),
    "flush.messages": (_LONG, 0),
    "flush.ms": (_LONG, 0),
    "follower.replication.throttled.replicas": (_STRING, None),
    "index.interval.bytes": (_INT, 0),
    "leader.replication.throttled.replicas": (_STRING, None),
    "max.compaction.lag.ms": (_LONG, 1),
    "max.message.bytes": (_INT, 0),
    "message.downconversion.enable": (_BOOL, None),
    "message.format.version": (_STRING, None),
    "message.timestamp.difference.max.ms": (_LONG, 0),
    "message.timestamp.type": ("enum", {"CreateTime", "LogAppendTime"}),
    "min.cleanable.dirty.ratio": (_RATIO, None),
    "min.compaction.lag.ms": (_LONG, 0),
    "min.insync.replicas": (_INT, 1),
    "preallocate": (_BOOL, None),
    "retention.bytes": (_LONG, None),
    "retention.ms": (_LONG, -1),
    "segment.bytes": (_INT, 14),
    "segment.index.bytes": (_INT, 0),
    "segment.jitter.ms": (_LONG, 0),
    "segment.ms": (_LONG, 1),
    "unclean.leader.election.enable": (_BOOL, None),
}


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Kafka's `LogConfig.validate`: known names, values of the right type. Booleans are
    normalised to lower case, as Kafka's ConfigDef parses them case-insensitively."""
    out = {}
    for name, value in configs.items():
        if name not in TOPIC_CONFIGS:
            raise TopicConfigError(f"Unknown topic config name: {name}")
        kind, arg = TOPIC_CONFIGS[name]
        prefix = f"Invalid value {value} for configuration {name}"
        if kind == _BOOL:
            if value.lower() not in ("true", "false"):
                raise TopicConfigError(f"{prefix}: Expected value to be either true or false")
            value = value.lower()
        elif kind in (_LONG, _INT):
            bits = 63 if kind == _LONG else 31
            if not re.fullmatch(r"-?[0-9]+", value) or not -(2**bits) <= int(value) < 2**bits:
                raise TopicConfigError(f"{prefix}: Not a number of type {kind.upper()}")
            if arg is not None and int(value) < arg:
                raise TopicConfigError(f"{prefix}: Value must be at least {arg}")
        elif kind == _RATIO:
            try:
                ratio = float(value)
            except ValueError:
                raise TopicConfigError(f"{prefix}: Not a number of type DOUBLE") from None
            if not 0 <= ratio <= 1:
                raise TopicConfigError(f"{prefix}: Value must be between 0 and 1")
        elif kind == "enum":
            if value not in arg:
                raise TopicConfigError(f"{prefix}: String must be one of: {', '.join(sorted(arg))}")
        elif kind == "list":
            items = [v.strip() for v in value.split(",")]
            if not items or any(v not in arg for v in items):
                raise TopicConfigError(f"{prefix}: String must be one of: {', '.join(sorted(arg))}")
        out[name] = value
    return out


def topic_pattern(text: str) -> re.Pattern:
    """Kafka's `Whitelist`: `--topic` is a regular expression (commas mean "or"), matched
    against whole topic names."""
    raw = text.strip().replace(",", "|").replace(" ", "")
    raw = re.sub(r"""^["']+""", "", raw)
    raw = re.sub(r"""["']+$""", "", raw)
    try:
        return re.compile(raw)
    except re.error as exc:
        raise AdminError(f"--topic {text!r} is not a valid regular expression: {exc}") from None


def _matching(topics: Iterable[str], text: str | None) -> list[str]:
    if text is None:
        return sorted(topics)
    pattern = topic_pattern(text)
    return sorted(t for t in topics if pattern.fullmatch(t))


def _broker_ids(ids: Iterable[int]) -> str:
    return ",".join(str(b) for b in ids)


# -- reading the cluster -----------------------------------------------------------------------


async def live_brokers(zk: ZkSession) -> dict[int, BrokerInfo]:
    """The registered brokers, by id."""
    try:
        names = await zk.get_children(zkpaths.BROKERS_IDS)
    except NoNode:
        return {}
    ids = sorted(int(n) for n in names if n.isdigit())
    found = await zk.get_many([zkpaths.broker(b) for b in ids])
    out = {}
    for b in ids:
        value = found.get(zkpaths.broker(b))
        if value is not None:
            out[b] = _decoded(zkdata.decode_broker, b, value[0], value[1].czxid)
    return out


async def _children(zk: ZkSession, path: str) -> list[str]:
    try:
        return sorted(await zk.get_children(path))
    except NoNode:
        return []


async def _topic_names(zk: ZkSession) -> list[str]:
    return await _children(zk, zkpaths.TOPICS)


async def _assignments(zk: ZkSession, topics: Iterable[str]) -> dict[str, tuple[dict[int, ReplicaAssignment], int]]:
    """{topic: ({partition: ReplicaAssignment}, znode version)} for the topics that exist."""
    topics = [t for t in topics if _legal(t)]
    found = await zk.get_many([zkpaths.topic(t) for t in topics])
    out = {}
    for t in topics:
        value = found.get(zkpaths.topic(t))
        if value is not None:
            data, stat = value
            out[t] = (_decoded(zkdata.decode_topic_assignment, data, topic=t), stat.version)
    return out


async def _states(zk: ZkSession, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderIsr]:
    tps = list(tps)
    paths = {tp: zkpaths.partition_state(tp.topic, tp.partition) for tp in tps}
    found = await zk.get_many(paths.values())
    out = {}
    for tp, path in paths.items():
        value = found.get(path)
        if value is not None:
            out[tp] = _decoded(zkdata.decode_partition_state, value[0], value[1].version, tp=tp)
    return out


async def _configs(zk: ZkSession, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    topics = [t for t in topics if _legal(t)]
    found = await zk.get_many([zkpaths.config_topic(t) for t in topics])
    out = {}
    for t in topics:
        value = found.get(zkpaths.config_topic(t))
        if value is not None:
            out[t] = _decoded(zkdata.decode_topic_config, value[0])
    return out


async def _marked_for_deletion(zk: ZkSession) -> set[str]:
    return set(await _children(zk, zkpaths.DELETE_TOPICS))


async def _reassignment_in_progress(zk: ZkSession) -> dict[TopicPartition, tuple[int, ...]] | None:
    try:
        data, _ = await zk.get(zkpaths.REASSIGN_PARTITIONS)
    except NoNode:
        return None
    try:
        return dict(zkdata.decode_reassignment(data))
    except zkdata.ZnodeFormatError:
        return {}  # there, but unreadable: still "an existing assignment running"


def _decoded(decode, *args, **kwargs):
    try:
        return decode(*args, **kwargs)
    except zkdata.ZnodeFormatError as exc:
        raise ToolFailure(f"unreadable znode: {exc}") from None


async def _ensure(zk: ZkSession, *paths: str) -> None:
    for path in paths:
        if await zk.exists(path) is None:
            await zk.ensure_path(path)


# -- kafka-topics.sh ---------------------------------------------------------------------------


async def create_topic(
    zk: ZkSession,
    topic: str,
    *,
    partitions: int | None = None,
    replication_factor: int | None = None,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
    configs: Mapping[str, str] | None = None,
    if_not_exists: bool = False,
    disable_rack_aware: bool = False,
    seed: int | None = None,
) -> dict[int, list[int]] | None:
    """Create `topic`: write `/config/topics/<topic>` (Kafka writes it on every creation, empty
    when there are no overrides) and `/brokers/topics/<topic>` in one multi-op.

    Returns the assignment, or None when the topic existed and `if_not_exists` was set.
    With `replica_assignment` the brokers must be registered, or hold replicas of existing
    topics (a cluster member that is down); otherwise placement is Kafka's over the live
    brokers, from a random start index (`seed`, default from os.urandom).
    """
    validate_topic_name(topic)
    configs = validate_topic_configs(configs or {})
    existing = await _topic_names(zk)
    if topic in existing:
        if if_not_exists:
            return None
        raise AdminError(f"Topic '{topic}' already exists.")
    collisions = [t for t in existing if t.replace(".", "_") == topic.replace(".", "_")]
    if collisions:
        raise AdminError(f"Topic '{topic}' collides with existing topics: {', '.join(collisions)}")
    brokers = await live_brokers(zk)
    if replica_assignment is not None:
        assignment = {int(p): list(r) for p, r in replica_assignment.items()}
        if sorted(assignment) != list(range(len(assignment))) or not assignment:
            raise AdminError("partitions should be a consecutive 0-based integer sequence")
        if any(not r for r in assignment.values()):
            raise AdminError("Replication factor must be larger than 0.")
        for p, replicas in sorted(assignment.items()):
            if len(set(replicas)) != len(replicas):
                raise AdminError("Partition replica lists may not contain duplicate entries: "
                                 + _broker_ids(sorted({r for r in replicas if replicas.count(r) > 1})))
            if len(replicas) != len(assignment[0]):
                raise AdminError(f"Partition {p} has different replication factor: {_broker_ids(replicas)}")
        known = set(brokers) | await _brokers_holding_replicas(zk, existing)
        unknown = sorted({b for r in assignment.values() for b in r} - known)
        if unknown:
            raise AdminError(f"Unknown broker(s) in replica assignment: {_broker_ids(unknown)} "
                             f"(registered brokers: {_broker_ids(sorted(brokers)) or 'none'})")
    else:
        if partitions is None or replication_factor is None:
            raise AdminError("--partitions and --replication-factor are required without --replica-assignment")
        placement = [(b, None if disable_rack_aware else info.rack) for b, info in brokers.items()]
        try:
            assignment = assign_replicas_to_brokers(placement, partitions, replication_factor,
                                                    seed=random_seed() if seed is None else seed)
        except ValueError as exc:
            raise AdminError(str(exc)) from None
    config_path = zkpaths.config_topic(topic)
    config_data = zkdata.encode_topic_config(configs)
    await _ensure(zk, zkpaths.CONFIG_TOPICS, zkpaths.TOPICS)
    config_op = (SetData(config_path, config_data) if await zk.exists(config_path) is not None
                 else Create(config_path, config_data))
    try:
        await zk.multi([config_op, Create(zkpaths.topic(topic), zkdata.encode_topic_assignment(assignment))])
    except TransactionFailed as exc:
        if isinstance(exc.first_failure[1], NodeExists) and exc.first_failure[0] == 1:
            if if_not_exists:
                return None
            raise AdminError(f"Topic '{topic}' already exists.") from None
        if isinstance(exc.first_failure[1], NoAuth):
            raise  # the caller explains ACLs
        raise ToolFailure(f"creating topic {topic} failed: {exc}") from None
    return assignment


async def _brokers_holding_replicas(zk: ZkSession, topics: Iterable[str]) -> set[int]:
    held: set[int] = set()
    for assignment, _ in (await _assignments(zk, topics)).values():
        for ra in assignment.values():
            held.update(ra.replicas)
    return held


async def _one_topic(zk: ZkSession, topic: str) -> tuple[dict[int, ReplicaAssignment], int]:
    found = await _assignments(zk, [topic])
    if topic not in found:
        raise AdminError(f"Topic '{topic}' does not exist as expected")
    return found[topic]


async def add_partitions(
    zk: ZkSession,
    topic: str,
    total: int,
    *,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
    disable_rack_aware: bool = False,
) -> dict[int, list[int]]:
    """Grow `topic` to `total` partitions (Kafka's `AdminZkClient.addPartitions`); returns the
    new partitions. Without `replica_assignment` the new partitions continue the placement of
    creation (`expand_partitions`); with it, the groups after the existing partitions are used
    (kafka-topics.sh passes the whole topic's assignment)."""
    current, version = await _one_topic(zk, topic)
    if topic in await _marked_for_deletion(zk):
        raise AdminError(f"Topic {topic} is marked for deletion; its partitions cannot be changed.")
    reassigning = await _reassignment_in_progress(zk) or {}
    if any(ra.is_being_reassigned for ra in current.values()) or any(tp.topic == topic for tp in reassigning):
        raise AdminError(f"Topic {topic} has partitions being reassigned; add partitions when the reassignment "
                         "is complete.")
    if total <= len(current):
        raise AdminError("The number of partitions for a topic can only be increased. "
                         f"Topic {topic} currently has {len(current)} partitions, {total} would not be an increase.")
    brokers = await live_brokers(zk)
    if replica_assignment is not None:
        groups = [list(replica_assignment[p]) for p in sorted(replica_assignment)][len(current):]
        wanted = total - len(current)
        if len(groups) != wanted:
            raise AdminError(f"Increasing the number of partitions by {wanted} but {len(groups)} assignments provided.")
        rf = len(current[0].replicas) if 0 in current else None
        factors = sorted({len(g) for g in groups})
        if rf is not None and factors != [rf]:
            raise AdminError(f"Existing topic replication factor of {rf}, but manual replication assignment "
                             f"would imply replication factor(s) of {','.join(map(str, factors))}.")
        unknown = sorted({b for g in groups for b in g} - set(brokers))
        if unknown:
            raise AdminError(f"Unknown broker(s) in replica assignment: {_broker_ids(unknown)}")
        new = {len(current) + i: g for i, g in enumerate(groups)}
    else:
        placement = [(b, None if disable_rack_aware else info.rack) for b, info in brokers.items()]
        try:
            new = expand_partitions({p: ra.replicas for p, ra in current.items()}, placement, total, topic=topic)
        except ValueError as exc:
            raise AdminError(str(exc)) from None
    merged: dict[int, ReplicaAssignment | list[int]] = dict(current)
    merged.update(new)
    try:
        await zk.set(zkpaths.topic(topic), zkdata.encode_topic_assignment(merged), version)
    except (BadVersion, NoNode):
        raise ToolFailure(f"topic {topic} changed while its partitions were being added; nothing was "
                          "written, try again") from None
    return new


async def alter_topic_configs(zk: ZkSession, topic: str, add: Mapping[str, str],
                              delete: Iterable[str] = ()) -> dict[str, str]:
    """Set and remove per-topic overrides in `/config/topics/<topic>`; returns the new config."""
    await _one_topic(zk, topic)
    add = validate_topic_configs(add)
    delete = list(delete)
    for name in delete:
        if name not in TOPIC_CONFIGS:
            raise TopicConfigError(f"Unknown topic config name: {name}")
    path = zkpaths.config_topic(topic)
    try:
        data, stat = await zk.get(path)
        config, version = _decoded(zkdata.decode_topic_config, data), stat.version
    except NoNode:
        config, version = {}, None
    config.update(add)
    for name in delete:
        config.pop(name, None)
    try:
        if version is None:
            await _ensure(zk, zkpaths.CONFIG_TOPICS)
            await zk.create(path, zkdata.encode_topic_config(config))
        else:
            await zk.set(path, zkdata.encode_topic_config(config), version)
    except (BadVersion, NodeExists, NoNode):
        raise ToolFailure(f"the configuration of topic {topic} changed meanwhile; nothing was written, "
                          "try again") from None
    # every broker's config manager rereads the topic (Kafka's changeTopicConfig)
    await zk.create(f"{dynconfig.CONFIG_CHANGES}/{dynconfig.CONFIG_CHANGE_PREFIX}",
                    dynconfig.encode_change_notification(dynconfig.TOPICS, topic), sequential=True, make_parents=True)
    return config


async def delete_topics(zk: ZkSession, topic: str, *, if_exists: bool = False) -> list[tuple[str, bool]]:
    """Mark the topics matching `topic` for deletion (`/admin/delete_topics/<t>`).
    Returns [(topic, already_marked)]."""
    matching = _matching(await _topic_names(zk), topic)
    if not matching:
        if if_exists:
            return []
        raise AdminError(f"Topic '{topic}' does not exist as expected")
    await _ensure(zk, zkpaths.DELETE_TOPICS)
    out = []
    for t in matching:
        try:
            await zk.create(zkpaths.delete_topic(t), None)
            out.append((t, False))
        except NodeExists:
            out.append((t, True))
    return out


async def list_topics(zk: ZkSession) -> list[tuple[str, bool]]:
    """[(topic, marked_for_deletion)] sorted by name."""
    marked = await _marked_for_deletion(zk)
    return [(t, t in marked) for t in await _topic_names(zk)]


async def describe_topics(
    zk: ZkSession,
    topic: str | None = None,
    *,
    if_exists: bool = False,
    under_replicated: bool = False,
    unavailable: bool = False,
    with_overrides: bool = False,
    under_min_isr: bool = False,
    at_min_isr: bool = False,
    exclude_internal: bool = False,
) -> list[str]:
    """kafka-topics.sh --describe lines (without line ends). `under_min_isr` / `at_min_isr`
    report partitions whose ISR is below / exactly the topic's `min.insync.replicas` (default 1;
    a partition without a leader is under it), as Kafka's `PartitionDescription` does."""
    names = _matching(await _topic_names(zk), topic)
    if exclude_internal:
        names = [t for t in names if t not in INTERNAL_TOPICS]
    if topic is not None and not names and not if_exists:
        raise AdminError(f"Topic '{topic}' does not exist as expected")
    live = set(await live_brokers(zk))
    marked = await _marked_for_deletion(zk)
    assignments = await _assignments(zk, names)
    configs = await _configs(zk, names)
    describe_configs = not (under_replicated or unavailable or under_min_isr or at_min_isr)
    describe_partitions = not with_overrides
    lines = []
    for t in names:
        if t not in assignments:
            continue  # deleted meanwhile
        assignment, _ = assignments[t]
        deleting = "\tMarkedForDeletion: true" if t in marked else ""
        config = configs.get(t, {})
        if describe_configs and (not with_overrides or config):
            rf = len(assignment[min(assignment)].replicas) if assignment else 0
            shown = ",".join(f"{k}={v}" for k, v in sorted(config.items()))
            lines.append(f"Topic: {t}\tPartitionCount: {len(assignment)}\tReplicationFactor: {rf}\t"
                         f"Configs: {shown}{deleting}")
        if not describe_partitions:
            continue
        states = await _states(zk, [TopicPartition(t, p) for p in assignment])
        for p in sorted(assignment):
            replicas = assignment[p].replicas
            li = states.get(TopicPartition(t, p))
            leader = li.leader if li is not None else -1
            isr = li.isr if li is not None else ()
            if not describe_configs:
                min_isr = _min_isr(config)
                reported = ((under_replicated and len(isr) < len(replicas))
                            or (unavailable and (leader == -1 or leader not in live))
                            or (under_min_isr and (leader < 0 or len(isr) < min_isr))
                            or (at_min_isr and len(isr) == min_isr))
                if not reported:
                    continue
            shown_leader = "none" if leader < 0 else str(leader)
            lines.append(f"\tTopic: {t}\tPartition: {p}\tLeader: {shown_leader}\tReplicas: {_broker_ids(replicas)}"
                         f"\tIsr: {_broker_ids(isr)}{deleting}")
    return lines


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Kafka's `Topic.isInternal`."""


def _min_isr(config: Mapping[str, str]) -> int:
    try:
        return int(config.get("min.insync.replicas", "1"))
    except ValueError:
        return 1


# -- kafka-reassign-partitions.sh --------------------------------------------------------------

REASSIGNMENT_COMPLETED = "completed"
REASSIGNMENT_IN_PROGRESS = "in progress"
REASSIGNMENT_FAILED = "failed"


def parse_broker_list(text: str) -> list[int]:
    items = [s.strip() for s in text.split(",")]
    if not text.strip() or not all(re.fullmatch(r"[0-9]{1,10}", s) for s in items):
        raise AdminError(f"--broker-list must be comma-separated broker ids, got {text!r}")
    brokers = [int(s) for s in items]
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise AdminError(f"Broker list contains duplicate entries: {_broker_ids(duplicates)}")
    return brokers


async def generate_reassignment(
    zk: ZkSession,
    topics: Sequence[str],
    broker_list: Sequence[int],
    *,
    disable_rack_aware: bool = False,
    seed: int | None = None,
) -> tuple[list[tuple[TopicPartition, tuple[int, ...]]], list[tuple[TopicPartition, list[int]]]]:
    """(current assignment, proposed assignment) of every partition of `topics`, the proposal
    placing each topic afresh over `broker_list` (Kafka's `generateAssignment`)."""
    if not topics:
        raise AdminError("the topics-to-move file lists no topics")
    duplicates = sorted({b for b in broker_list if list(broker_list).count(b) > 1})
    if duplicates:
        raise AdminError(f"Broker list contains duplicate entries: {_broker_ids(duplicates)}")
    found = await _assignments(zk, topics)
    missing = [t for t in topics if t not in found]
    if missing:
        raise AdminError(f"Topic(s) {', '.join(missing)} do not exist")
    brokers = await live_brokers(zk)
    down = sorted(set(broker_list) - set(brokers))
    if down:
        raise AdminError(f"The broker list contains brokers that are not registered: {_broker_ids(down)}")
    placement = [(b, None if disable_rack_aware else brokers[b].rack) for b in broker_list]
    generator_seed = random_seed() if seed is None else seed
    current: list[tuple[TopicPartition, tuple[int, ...]]] = []
    proposed: list[tuple[TopicPartition, list[int]]] = []
    for index, topic in enumerate(sorted(found)):
        assignment, _ = found[topic]
        for p in sorted(assignment):
            current.append((TopicPartition(topic, p), assignment[p].target_replicas))
        rf = len(assignment[min(assignment)].target_replicas)
        try:
            placed = assign_replicas_to_brokers(placement, len(assignment), rf, seed=generator_seed + index)
        except ValueError as exc:
            raise AdminError(f"topic {topic}: {exc}") from None
        proposed.extend((TopicPartition(topic, p), r) for p, r in sorted(placed.items()))
    return current, proposed


async def _validate_reassignment(zk: ZkSession, entries: Sequence[tuple[TopicPartition, Sequence[int]]]):
    """Kafka's `parseAndValidate`, plus topics being deleted. Returns the topics' assignments."""
    if not entries:
        raise AdminError("Partition reassignment data file is empty")
    if any(not replicas for _, replicas in entries):
        raise AdminError("Partition replica list cannot be empty")
    seen: set[TopicPartition] = set()
    twice = []
    for tp, _ in entries:
        if tp in seen:
            twice.append(str(tp))
        seen.add(tp)
    if twice:
        raise AdminError(f"Partition reassignment contains duplicate topic partitions: {','.join(twice)}")
    duplicated = [(tp, sorted({r for r in replicas if list(replicas).count(r) > 1})) for tp, replicas in entries]
    duplicated = [(tp, d) for tp, d in duplicated if d]
    if duplicated:
        raise AdminError("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{tp} contains multiple entries for {_broker_ids(d)}" for tp, d in duplicated))
    topics = list(dict.fromkeys(tp.topic for tp, _ in entries))
    found = await _assignments(zk, topics)
    missing = [str(tp) for tp, _ in entries if tp.topic not in found or tp.partition not in found[tp.topic][0]]
    if missing:
        raise AdminError(f"The proposed assignment contains non-existent partitions: {', '.join(missing)}")
    brokers = await live_brokers(zk)
    unknown = sorted({b for _, replicas in entries for b in replicas} - set(brokers))
    if unknown:
        raise AdminError(f"The proposed assignment contains non-existent brokerIDs: {_broker_ids(unknown)}")
    deleting = sorted(set(topics) & await _marked_for_deletion(zk))
    if deleting:
        raise AdminError(f"Topic(s) {', '.join(deleting)} are marked for deletion and cannot be reassigned")
    return found


async def execute_reassignment(
    zk: ZkSession, entries: Sequence[tuple[TopicPartition, Sequence[int]]], *, throttle: int | None = None,
    on_validated: Callable[[list[tuple[TopicPartition, tuple[int, ...]]]], None] | None = None,
) -> list[tuple[TopicPartition, tuple[int, ...]]]:
    """Validate, then create `/admin/reassign_partitions`. Returns the current assignment of
    every partition of the topics involved (to print for rollback; also handed to
    `on_validated` before anything is written). With `throttle` (bytes/s) the throttle keys are
    written first, as Kafka's tool does (adapters/admin/throttle.py)."""
    found = await _validate_reassignment(zk, entries)
    if await zk.exists(zkpaths.REASSIGN_PARTITIONS) is not None:
        raise AdminError("There is an existing assignment running.")
    current = [(TopicPartition(t, p), ra.target_replicas)
               for t in sorted(found) for p, ra in sorted(found[t][0].items())]
    if on_validated is not None:
        on_validated(current)
    if throttle is not None:
        existing = dict(current)
        proposed = {tp: list(r) for tp, r in entries}
        await throttling.set_replicas(zk, existing, proposed)
        await throttling.set_rate(zk, existing, proposed, throttle)
    await _ensure(zk, zkpaths.ADMIN)
    try:
        await zk.create(zkpaths.REASSIGN_PARTITIONS,
                        zkdata.encode_reassignment([(tp, list(r)) for tp, r in entries]))
    except NodeExists:
        raise AdminError("There is an existing assignment running.") from None
    return current


async def reassignment_running(zk: ZkSession) -> bool:
    return await zk.exists(zkpaths.REASSIGN_PARTITIONS) is not None


async def change_reassignment_throttle(zk: ZkSession, entries: Sequence[tuple[TopicPartition, Sequence[int]]],
                                       rate: int) -> int:
    """Kafka's `maybeLimit` on a running reassignment: the new rate on the same brokers (those
    holding replicas of the file's topics now, and the file's targets)."""
    found = await _assignments(zk, {tp.topic for tp, _ in entries})
    existing = {TopicPartition(t, p): ra.replicas for t, (a, _) in found.items() for p, ra in a.items()}
    await throttling.set_rate(zk, existing, {tp: list(r) for tp, r in entries}, rate)
    return rate


async def remove_reassignment_throttle(zk: ZkSession, topics: Iterable[str]) -> bool:
    """Kafka's `removeThrottle` (call it once every partition completed): the rate keys from
    every registered broker, the replica keys from `topics`. True if anything was removed."""
    return await throttling.remove(zk, sorted(set(topics)), sorted(await live_brokers(zk)))


async def verify_reassignment(
    zk: ZkSession, entries: Sequence[tuple[TopicPartition, Sequence[int]]]
) -> list[tuple[TopicPartition, str]]:
    """Kafka's `checkIfPartitionReassignmentSucceeded`, in file order: in progress while the
    partition is still in `/admin/reassign_partitions`, then completed if the topic znode holds
    exactly the requested replicas, failed otherwise."""
    running = await _reassignment_in_progress(zk) or {}
    found = await _assignments(zk, {tp.topic for tp, _ in entries})
    out = []
    for tp, replicas in entries:
        if tp in running:
            out.append((tp, REASSIGNMENT_IN_PROGRESS))
            continue
        ra = found.get(tp.topic, ({}, 0))[0].get(tp.partition)
        ok = ra is not None and not ra.is_being_reassigned and tuple(ra.replicas) == tuple(replicas)
        out.append((tp, REASSIGNMENT_COMPLETED if ok else REASSIGNMENT_FAILED))
    return out


# -- kafka-leader-election.sh ------------------------------------------------------------------

ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"


async def elect_leaders(
    zk: ZkSession,
    election_type: str,
    partitions: Sequence[TopicPartition] | None,
    *,
    secret: bytes | str | None = None,
    timeout: float = 30.0,
) -> list[tuple[TopicPartition, str | None]]:
    """Send ElectLeaders to the controller; [(partition, error or None)] sorted.

    `election_type` is "preferred" or "unclean"; `partitions` None means every partition.
    Named partitions must exist (AdminError otherwise)."""
    election_type = election_type.lower()
    if election_type not in ("preferred", "unclean"):
        raise AdminError(f"unknown election type {election_type!r} (PREFERRED or UNCLEAN)")
    if partitions is not None:
        if not partitions:
            raise AdminError("no partitions to elect leaders for")
        found = await _assignments(zk, {tp.topic for tp in partitions})
        missing = [str(tp) for tp in partitions if tp.topic not in found or tp.partition not in found[tp.topic][0]]
        if missing:
            raise AdminError(f"Unknown topic partition(s): {', '.join(missing)}")
    body = {"election_type": election_type, "partitions": None if partitions is None else Q.tp_list(partitions)}
    answer = await controller_request(zk, Q.ELECT_LEADERS, body, secret=secret, timeout=timeout)
    if answer.get("error"):
        raise ToolFailure(f"the controller refused the election: {answer['error']}: {answer.get('message', '')}")
    results = []
    for item in answer.get("results") or []:
        if isinstance(item, list) and len(item) == 3:
            results.append((TopicPartition(str(item[0]), int(item[1])), item[2] or None))
    return sorted(results)


async def controller_request(zk: ZkSession, api: str, body: dict, *, secret: bytes | str | None = None,
                             timeout: float = 30.0) -> dict:
    """Send one request to the current controller (found through `/controller` and its broker
    registration), following it when it moves, until `timeout` seconds have passed."""

    deadline = time.monotonic() + timeout
    problem = "no controller is elected"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ControllerUnavailable(f"no controller answered within {timeout:g} s: {problem}")
        try:
            data, _ = await zk.get(zkpaths.CONTROLLER)
            controller_id = zkdata.decode_controller(data)
            bdata, bstat = await zk.get(zkpaths.broker(controller_id))
            info = zkdata.decode_broker(controller_id, bdata, bstat.czxid)
        except NoNode:
            problem = "no controller is elected"
        except (zkdata.ZnodeFormatError, ValueError) as exc:
            problem = f"cannot read the controller's registration: {exc}"
        else:
            client = ControlClient(info.host, info.port, secret=secret)
            try:
                answer = await client.request(api, body, timeout=max(remaining, 0.1))
            except ControlChannelError as exc:
                problem = f"controller {controller_id} at {info.host}:{info.port}: {exc}"
            else:
                if answer.get("error") != "NOT_CONTROLLER":
                    return answer
                problem = f"broker {controller_id} is no longer the controller"
            finally:
                await client.close()
        await asyncio.sleep(min(0.2, max(deadline - time.monotonic(), 0)))


# -- kctl cluster ------------------------------------------------------------------------------


async def cluster_summary(zk: ZkSession) -> dict:
    """Controller, live brokers and partition health counts, as Kafka's controller metrics
    count them: offline (no leader, or a leader that is not live) and preferred-replica
    imbalance exclude topics queued for deletion; under-replicated is ISR smaller than the
    assigned replicas."""
    try:
        data, _ = await zk.get(zkpaths.CONTROLLER)
        controller = _decoded(zkdata.decode_controller, data)
    except NoNode:
        controller = None
    try:
        data, _ = await zk.get(zkpaths.CONTROLLER_EPOCH)
        epoch = _decoded(zkdata.decode_controller_epoch, data)
    except NoNode:
        epoch = 0
    live = sorted(await live_brokers(zk))
    names = await _topic_names(zk)
    marked = await _marked_for_deletion(zk)
    assignments = await _assignments(zk, names)
    tps = [TopicPartition(t, p) for t, (a, _) in sorted(assignments.items()) for p in sorted(a)]
    states = await _states(zk, tps)
    offline = under = imbalance = 0
    for tp in tps:
        ra = assignments[tp.topic][0][tp.partition]
        replicas = ra.replicas
        li = states.get(tp)
        leader = li.leader if li is not None else -1
        isr = li.isr if li is not None else ()
        if len(isr) < len(replicas):
            under += 1
        if tp.topic in marked:
            continue
        if leader == -1 or leader not in live:
            offline += 1
        if replicas and ra.adding and replicas[0] in ra.adding:
            imbalance += replicas[0] in isr  # Kafka's rule while the preferred replica is being added
        elif replicas and leader != replicas[0]:
            imbalance += 1
    reassigning = await _reassignment_in_progress(zk)
    return {
        "controller": controller,
        "controller_epoch": epoch,
        "live_brokers": live,
        "topics": len(assignments),
        "partitions": len(tps),
        "offline_partitions": offline,
        "under_replicated_partitions": under,
        "preferred_replica_imbalance": imbalance,
        "partitions_being_reassigned": len(reassigning) if reassigning is not None else 0,
        "topics_marked_for_deletion": sorted(marked),
    }
