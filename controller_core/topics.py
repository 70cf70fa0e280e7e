"""Topic creation, partition expansion and topic configuration (Kafka's TopicChange,
PartitionModifications and onNewPartitionCreation), on a Draft.

The topic znode is written by admins, so its content is checked before anything acts on it:
partitions numbered 0..n-1, non-empty replica lists of distinct non-negative broker ids, one
replication factor. A bad topic or a bad expansion is rejected with its reason and ignored; the
znode is left alone (it is the admin's data), as Kafka would.
"""
from __future__ import annotations

from . import commands as C
from . import partitions as P
from . import replicas as R
from .draft import Draft
from .machines import PartitionState, ReplicaState
from .state import PartitionInfo, TopicInfo
from .values import ReplicaAssignment, TopicPartition


def validate_assignment(partitions: dict[int, ReplicaAssignment], first_new: int = 0,
                        replication_factor: int | None = None, same_factor: bool = True) -> str | None:
    """Why a topic's assignment (or the partitions from `first_new` on) is unacceptable.

    `same_factor` checks one replication factor across the checked partitions: right for a
    creation or an expansion, wrong for an existing topic, whose partitions a reassignment may
    have given different factors."""
    ids = sorted(partitions)
    if not ids:
        return "no partitions"
    if ids != list(range(len(ids))):
        return f"partition ids must be consecutive from 0, got {ids}"
    factors = set()
    for p in ids[first_new:]:
        replicas = partitions[p].replicas
        if not replicas:
            return f"partition {p} has an empty replica list"
        if any(type(r) is not int or r < 0 for r in replicas):
            return f"partition {p} has an invalid broker id in {list(replicas)}"
        if len(set(replicas)) != len(replicas):
            return f"partition {p} has duplicate replicas {list(replicas)}"
        factors.add(len(replicas))
    if replication_factor is not None:
        factors.add(replication_factor)
    if same_factor and len(factors) > 1:
        return f"inconsistent replication factors {sorted(factors)}"
    return None


def on_topics_changed(d: Draft, names: frozenset[str], assignments, malformed) -> None:
    if d.removing_topics and not d.removing_topics.isdisjoint(names):
        # a listing read before this controller's own DeleteTopic landed (state.removing_topics)
        names = names - d.removing_topics
        assignments = [(topic, parts) for topic, parts in assignments if topic in names]
        malformed = [(topic, problem) for topic, problem in malformed if topic in names]
    for topic, problem in malformed:
        d.reject("topic", f"topic {topic}: malformed topic znode ({problem}); ignoring it")
    gone = sorted(t for t in d.topics.keys() if t not in names)
    for topic in gone:
        _forget(d, topic)
    for topic, parts in assignments:
        if topic not in names:
            continue
        parts = dict(parts)
        if topic not in d.topics:
            _create(d, topic, parts)
        else:
            _maybe_expand(d, topic, parts)


def _create(d: Draft, topic: str, parts: dict[int, ReplicaAssignment]) -> None:
    reason = validate_assignment(parts)
    if reason is not None:
        d.reject("topic creation", f"topic {topic}: {reason}")
        return
    d.topics = d.topics.set(topic, TopicInfo(len(parts)))
    on_new_partitions(d, [(TopicPartition(topic, p), parts[p]) for p in sorted(parts)])


def _maybe_expand(d: Draft, topic: str, parts: dict[int, ReplicaAssignment]) -> None:
    count = d.topics[topic].partition_count
    if len(parts) <= count:
        return  # the controller's own reassignment writes, or no change
    if d.queued_for_deletion(topic):
        d.reject("partition expansion", f"topic {topic}: being deleted; not adding partitions")
        d.dirty_topics.add(topic)  # restore the znode to the current partitions
        return
    rf = len(d.info(TopicPartition(topic, 0)).assignment.target_replicas)
    reason = validate_assignment(parts, first_new=count, replication_factor=rf)
    if reason is not None:
        d.reject("partition expansion", f"topic {topic}: {reason}")
        return
    d.topics = d.topics.set(topic, TopicInfo(len(parts)))
    on_new_partitions(d, [(TopicPartition(topic, p), parts[p]) for p in range(count, len(parts))])


def on_new_partitions(d: Draft, new: list[tuple[TopicPartition, ReplicaAssignment]]) -> None:
    """Kafka's onNewPartitionCreation: New partitions and replicas, then leaders, then Online
    replicas."""
    for tp, ra in new:
        d.put(tp, PartitionInfo(ReplicaAssignment(ra.replicas), None, PartitionState.NON_EXISTENT))
        d.move_partition(tp, PartitionState.NEW)
    tps = [tp for tp, _ in new]
    replicas = R.replicas_of(d, tps)
    R.move(d, replicas, ReplicaState.NEW)
    P.to_online(d, tps, P.OFFLINE)
    R.move(d, replicas, ReplicaState.ONLINE)


def _forget(d: Draft, topic: str) -> None:
    """The topic znode vanished without the controller deleting it: drop it from memory."""
    for tp in d.partitions_of(topic):
        d.drop(tp)
    d.topics = d.topics.delete(topic)
    if topic in d.topic_configs:
        d.topic_configs = d.topic_configs.delete(topic)
    gone = frozenset({topic})
    d.topics_to_delete -= gone
    d.topics_deletion_started -= gone
    d.topics_ineligible_for_deletion -= gone
    d.forget_offline_dirs(topic=topic)
    stale = [tp for tp in d.reassigning if tp.topic == topic]
    if stale:
        d.reassigning = d.reassigning - frozenset(stale)
        d.command(C.UnwatchPartitionStates(partitions=tuple(sorted(stale))))


def on_configs_changed(d: Draft, configs) -> None:
    """New per-topic overrides; enabling unclean election re-runs elections for the topic
    (Kafka's TopicUncleanLeaderElectionEnable)."""
    for topic, config in configs:
        config = tuple(sorted(config))
        was = d.unclean_allowed(topic)
        if config:
            d.topic_configs = d.topic_configs.set(topic, config)
        elif topic in d.topic_configs:
            d.topic_configs = d.topic_configs.delete(topic)
        if not was and d.unclean_allowed(topic) and topic in d.topics:
            P.trigger_online_state_change(d, topic)
