"""`kafka-topics.sh --zookeeper`: create, grow, alter, delete, list and describe topics.

Placement goes through `controller_core.assignment` over the live brokers sorted by id, with a
random start index drawn from `os.urandom` as Kafka draws it from its `Random`. Only the znodes
Kafka's tool writes are written; the controller does the rest."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from controller_core.assignment import assign_replicas_to_brokers, expand_partitions
from controller_core.values import ReplicaAssignment, TopicPartition

from adapters.admin.checks import (
    random_seed,
    TOPIC_CONFIGS,
    broker_id_list,
    matching_topics,
    validate_topic_configs,
    validate_topic_name,
)
from adapters.admin.cluster_state import (
    decoded,
    ensure_paths,
    live_brokers,
    read_assignments,
    read_configs,
    read_marked_for_deletion,
    read_reassignment_in_progress,
    read_states,
    read_topic_names,
)
from adapters.admin.errors import AdminError, ToolFailure, UnknownTopicConfigError
from adapters.znodes import codec as zkdata, dynconfig, paths as zkpaths
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
    existing = await read_topic_names(zk)
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
                                 + broker_id_list(sorted({r for r in replicas if replicas.count(r) > 1})))
            if len(replicas) != len(assignment[0]):
                raise AdminError(f"Partition {p} has different replication factor: {broker_id_list(replicas)}")
        known = set(brokers) | await brokers_holding_replicas(zk, existing)
        unknown = sorted({b for r in assignment.values() for b in r} - known)
        if unknown:
            raise AdminError(f"Unknown broker(s) in replica assignment: {broker_id_list(unknown)} "
                             f"(registered brokers: {broker_id_list(sorted(brokers)) or 'none'})")
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
    await ensure_paths(zk, zkpaths.CONFIG_TOPICS, zkpaths.TOPICS)
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


async def brokers_holding_replicas(zk: ZkSession, topics: Iterable[str]) -> set[int]:
    held: set[int] = set()
    for assignment, _ in (await read_assignments(zk, topics)).values():
        for ra in assignment.values():
            held.update(ra.replicas)
    return held


async def read_one_topic(zk: ZkSession, topic: str) -> tuple[dict[int, ReplicaAssignment], int]:
    found = await read_assignments(zk, [topic])
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
    current, version = await read_one_topic(zk, topic)
    if topic in await read_marked_for_deletion(zk):
        raise AdminError(f"Topic {topic} is marked for deletion; its partitions cannot be changed.")
    reassigning = await read_reassignment_in_progress(zk) or {}
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
            raise AdminError(f"Unknown broker(s) in replica assignment: {broker_id_list(unknown)}")
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
    await read_one_topic(zk, topic)
    add = validate_topic_configs(add)
    delete = list(delete)
    for name in delete:
        if name not in TOPIC_CONFIGS:
            raise UnknownTopicConfigError(f"Unknown topic config name: {name}")
    path = zkpaths.config_topic(topic)
    try:
        data, stat = await zk.get(path)
        config, version = decoded(zkdata.decode_topic_config, data), stat.version
    except NoNode:
        config, version = {}, None
    config.update(add)
    for name in delete:
        config.pop(name, None)
    try:
        if version is None:
            await ensure_paths(zk, zkpaths.CONFIG_TOPICS)
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
    matching = matching_topics(await read_topic_names(zk), topic)
    if not matching:
        if if_exists:
            return []
        raise AdminError(f"Topic '{topic}' does not exist as expected")
    await ensure_paths(zk, zkpaths.DELETE_TOPICS)
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
    marked = await read_marked_for_deletion(zk)
    return [(t, t in marked) for t in await read_topic_names(zk)]


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
    names = matching_topics(await read_topic_names(zk), topic)
    if exclude_internal:
        names = [t for t in names if t not in INTERNAL_TOPICS]
    if topic is not None and not names and not if_exists:
        raise AdminError(f"Topic '{topic}' does not exist as expected")
    live = set(await live_brokers(zk))
    marked = await read_marked_for_deletion(zk)
    assignments = await read_assignments(zk, names)
    configs = await read_configs(zk, names)
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
        states = await read_states(zk, [TopicPartition(t, p) for p in assignment])
        for p in sorted(assignment):
            replicas = assignment[p].replicas
            li = states.get(TopicPartition(t, p))
            leader = li.leader if li is not None else -1
            isr = li.isr if li is not None else ()
            if not describe_configs:
                min_isr = topic_min_isr(config)
                reported = ((under_replicated and len(isr) < len(replicas))
                            or (unavailable and (leader == -1 or leader not in live))
                            or (under_min_isr and (leader < 0 or len(isr) < min_isr))
                            or (at_min_isr and len(isr) == min_isr))
                if not reported:
                    continue
            shown_leader = "none" if leader < 0 else str(leader)
            lines.append(f"\tTopic: {t}\tPartition: {p}\tLeader: {shown_leader}\tReplicas: {broker_id_list(replicas)}"
                         f"\tIsr: {broker_id_list(isr)}{deleting}")
    return lines


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Kafka's `Topic.isInternal`."""


def topic_min_isr(config: Mapping[str, str]) -> int:
    try:
        return int(config.get("min.insync.replicas", "1"))
    except ValueError:
        return 1
