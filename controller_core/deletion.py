"""Topic deletion (Kafka's TopicDeletionManager), on a Draft.

A topic queued for deletion has its partitions taken offline and made non-existent, then every
replica is told StopReplica(delete=true). Replicas on dead brokers, or whose deletion failed,
become DeletionIneligible and the topic waits; when their broker returns, deletion resumes.
When every replica reports success the topic's znodes are removed and it is forgotten.
"""
from __future__ import annotations

from typing import Iterable

from . import commands as C
from . import partitions as P
from . import replicas as R
from .draft import Draft
from .machines import ReplicaState
from .values import TopicPartition

RS = ReplicaState


def on_deletions_requested(d: Draft, topics: frozenset[str]) -> None:
    """`/admin/delete_topics` children changed (level-triggered: already-queued topics are no-ops)."""
    unknown = sorted(t for t in topics if t not in d.topics)
    if unknown:
        d.reject("topic deletion", f"ignoring request to delete non-existing topics {', '.join(unknown)}")
        d.command(C.DeleteTopicDeletionRequests(topics=tuple(unknown)))
    requested = sorted(t for t in topics if t in d.topics and t not in d.topics_to_delete)
    if not requested:
        return
    if not d.config.delete_topic_enable:
        d.reject("topic deletion", f"delete.topic.enable is false: removing requests for {', '.join(requested)}")
        d.command(C.DeleteTopicDeletionRequests(topics=tuple(requested)))
        return
    reassigning_topics = {tp.topic for tp in d.reassigning}
    halted = [t for t in requested if t in reassigning_topics]
    d.topics_to_delete = d.topics_to_delete | frozenset(requested)
    if halted:
        mark_ineligible(d, halted)
    resume(d)


def mark_ineligible(d: Draft, topics: Iterable[str]) -> None:
    halt = frozenset(topics) & d.topics_to_delete
    if halt:
        d.topics_ineligible_for_deletion = d.topics_ineligible_for_deletion | halt


def resume_for_topics(d: Draft, topics: Iterable[str]) -> None:
    """Kafka's resumeDeletionForTopics: clear ineligibility and retry, except for topics with a
    partition still being reassigned (their deletion waits for the reassignment to finish)."""
    reassigning = {tp.topic for tp in d.reassigning}
    resumed = (frozenset(topics) & d.topics_to_delete) - reassigning
    if resumed:
        d.topics_ineligible_for_deletion = d.topics_ineligible_for_deletion - resumed
        resume(d)


def _replica_states(d: Draft, topic: str) -> list[tuple[TopicPartition, int, ReplicaState]]:
    # each replica's state, read without building each partition (`Draft.replica_states`), for
    # the topics `resume` acts on (it decides which to act on from `Draft.replica_state_sets`)
    out = []
    for tp in d.partitions_of(topic):
        states = d.replica_states(tp)
        if states is not None:
            out.extend((tp, r, s) for r, s in states)
    return out


_ALL_DELETED = {RS.DELETION_SUCCESSFUL}


def resume(d: Draft) -> None:
    """Kafka's resumeDeletions: complete, retry or start the deletion of each queued topic."""
    retry: list[str] = []
    start: list[str] = []
    queued = sorted(d.topics_to_delete)
    # which states each topic's replicas are in is all this needs (read in bulk: this runs on
    # every StopReplica answer, for every queued topic)
    sets = d.replica_state_sets([d.partitions_of(topic) for topic in queued])
    for topic, states in zip(queued, sets):
        if not states or states == _ALL_DELETED:
            _complete(d, topic)
            continue
        in_progress = RS.DELETION_STARTED in states
        if not in_progress and RS.DELETION_INELIGIBLE in states:
            retry.append(topic)
        if not in_progress and topic not in d.topics_ineligible_for_deletion:
            start.append(topic)
    if retry:
        failed = [(tp, r) for t in retry for tp, r, s in _replica_states(d, t) if s is RS.DELETION_INELIGIBLE]
        R.move(d, failed, RS.OFFLINE)
    if start:
        _on_topic_deletion(d, start)


def _on_topic_deletion(d: Draft, topics: list[str]) -> None:
    unseen = [t for t in topics if t not in d.topics_deletion_started]
    if unseen:
        tps = [tp for t in unseen for tp in d.partitions_of(t)]
        P.to_offline(d, tps)
        P.to_non_existent(d, tps)
        d.topics_deletion_started = d.topics_deletion_started | frozenset(unseen)
    all_tps = [tp for t in topics for tp in d.partitions_of(t)]
    # brokers stop serving the topic: UpdateMetadata with leader -2 (LeaderDuringDelete)
    d.requests.send_update_metadata_to_all(all_tps)
    dead: list[tuple[TopicPartition, int]] = []
    retry: list[tuple[TopicPartition, int]] = []
    ineligible: set[str] = set()
    live = d.live
    # a replica on a failed log dir is as dead as its broker would be (Kafka's isReplicaOnline)
    on_failed_dirs = d.replicas_on_offline_dirs
    for topic in topics:
        for tp, r, s in _replica_states(d, topic):
            if r not in live or (on_failed_dirs and (tp, r) in on_failed_dirs):
                dead.append((tp, r))
                ineligible.add(topic)
            elif s is not RS.DELETION_SUCCESSFUL:
                retry.append((tp, r))
    R.move(d, dead, RS.DELETION_INELIGIBLE)
    R.move(d, retry, RS.OFFLINE)
    R.move(d, retry, RS.DELETION_STARTED)
    if ineligible:
        mark_ineligible(d, ineligible)


def _complete(d: Draft, topic: str) -> None:
    """Kafka's completeDeleteTopic: forget the topic and remove its znodes."""
    tps = d.partitions_of(topic)
    # every replica DeletionSuccessful -> NonExistent (a legal move that writes and sends nothing):
    # recorded without building each partition's value once per replica, as `R.move` would, since
    # the partitions are dropped right after
    for tp, r, s in _replica_states(d, topic):
        if s is RS.DELETION_SUCCESSFUL:
            d.record(s, RS.NON_EXISTENT, tp, r)
    for tp in tps:
        d.drop(tp)
    stale = sorted(tp for tp in d.reassigning if tp.topic == topic)
    if stale:
        d.reassigning = d.reassigning - frozenset(stale)
        d.command(C.UnwatchPartitionStates(partitions=tuple(stale)))
    if any(tp.topic == topic for tp, _ in d.reassignment_plan):
        d.reassignment_plan = tuple(e for e in d.reassignment_plan if e[0].topic != topic)
        d.plan_dirty = True
    d.topics = d.topics.delete(topic) if topic in d.topics else d.topics
    if topic in d.topic_configs:
        d.topic_configs = d.topic_configs.delete(topic)
    d.topics_to_delete = d.topics_to_delete - {topic}
    d.topics_deletion_started = d.topics_deletion_started - {topic}
    d.topics_ineligible_for_deletion = d.topics_ineligible_for_deletion - {topic}
    d.forget_offline_dirs(topic=topic)
    d.command(C.DeleteTopic(topic=topic))
    if d.config.rules >= 3:
        # until the writer says the znodes are gone, a listing may still name the topic: read
        # before the removal, it must not create it again (the chaos soak, seed 9, 2026-12-06:
        # a controller paused mid-deletion re-created a topic from a listing read before its
        # own DeleteTopic ran, and told the brokers to host it again)
        d.removing_topics = d.removing_topics | {topic}


def fail_replica_deletion(d: Draft, replicas: Iterable[tuple[TopicPartition, int]]) -> None:
    failed = [(tp, r) for tp, r in replicas if d.queued_for_deletion(tp.topic)]
    if failed:
        R.move(d, failed, RS.DELETION_INELIGIBLE)
        mark_ineligible(d, {tp.topic for tp, _ in failed})
        resume(d)


def complete_replica_deletion(d: Draft, replicas: Iterable[tuple[TopicPartition, int]]) -> None:
    done = [(tp, r) for tp, r in replicas if d.queued_for_deletion(tp.topic)]
    if done:
        R.move(d, done, RS.DELETION_SUCCESSFUL)
        resume(d)


def on_stop_replica_response(d: Draft, broker: int, delete: bool, tps, errors) -> None:
    """A StopReplica(delete=true) answer moves the replicas to DeletionSuccessful or
    DeletionIneligible (only for replicas whose deletion was started)."""
    if not delete:
        return
    failed = {tp for tp, _ in errors}
    started = []
    for tp in tps:
        info = d.info(tp)
        if info is not None and info.replica_state(broker) is RS.DELETION_STARTED:
            started.append(tp)
    fail_replica_deletion(d, [(tp, broker) for tp in started if tp in failed])
    complete_replica_deletion(d, [(tp, broker) for tp in started if tp not in failed])
