"""Leader elections on request and the automatic preferred-leader rebalance, on a Draft.

Requests come from `/admin/preferred_replica_election` (preferred only, as
kafka-preferred-replica-election.sh writes it) or from an ElectLeaders request on the control
channel (preferred or unclean, as kafka-leader-election.sh sends it). The rebalance runs on a
timer and, per broker, re-elects preferred leaders when more than
`leader.imbalance.per.broker.percentage` of the partitions it should lead are led elsewhere.
"""
from __future__ import annotations

from . import commands as C
from . import partitions as P
from .draft import Draft
from .intents import Timer
from .values import NO_LEADER, TopicPartition

REBALANCE_TIMER = Timer.REBALANCE
FIRST_REBALANCE_DELAY_MS = 5_000  # Kafka schedules the first check 5 s after failover

NOT_NEEDED = "ELECTION_NOT_NEEDED: leader election not needed for topic partition"
UNKNOWN = "UNKNOWN_TOPIC_OR_PARTITION: the partition does not exist"
DELETING = "INVALID_TOPIC_EXCEPTION: the topic is being deleted"


def elect_leaders(d: Draft, tps, election_type: str, admin: bool) -> dict[TopicPartition, str | None]:
    """Kafka's ReplicaLeaderElection processing: skip unknown, deleting and already-fine
    partitions, elect the rest. Unclean election is only allowed when an admin asked for it."""
    results: dict[TopicPartition, str | None] = {}
    electable = []
    live = d.live
    for tp in tps:
        info = d.info(tp)
        if info is None:
            results[tp] = UNKNOWN
            continue
        if d.queued_for_deletion(tp.topic):
            results[tp] = DELETING
            continue
        li = info.leader_isr
        leader = li.leader if li is not None else NO_LEADER
        if election_type == "preferred":
            needed = info.assignment.replicas and leader != info.assignment.replicas[0]
        else:
            needed = leader == NO_LEADER or leader not in live
        if needed:
            electable.append(tp)
        else:
            results[tp] = NOT_NEEDED
    if electable:
        strategy = P.PREFERRED if election_type == "preferred" else (P.OFFLINE_UNCLEAN if admin else P.OFFLINE)
        for tp, error in P.to_online(d, electable, strategy).items():
            results[tp] = None if error is None else f"ELECTION_FAILED: {error}"
    return results


def on_preferred_requested(d: Draft, exists: bool, tps, problem: str | None, zk_version: int = -1) -> None:
    if not exists:
        return
    if problem is not None:
        d.reject("preferred replica election", f"malformed /admin/preferred_replica_election: {problem}; removing it")
    else:
        for tp, error in elect_leaders(d, tps, "preferred", admin=False).items():
            if error is not None and error != NOT_NEEDED:
                d.reject("preferred replica election", f"{tp}: {error}")
    d.command(C.DeletePreferredElectionRequest(expected_version=zk_version))


def on_leader_election_requested(d: Draft, request_id: int, election_type: str, tps) -> None:
    if election_type not in ("preferred", "unclean"):
        d.reject("leader election", f"unknown election type {election_type!r}")
        d.requests.election_replies.append((request_id, ()))
        return
    if tps is None:
        tps = sorted(tp for tp in d.partitions.keys() if not d.queued_for_deletion(tp.topic))
    results = elect_leaders(d, tps, election_type, admin=True)
    d.requests.election_replies.append((request_id, tuple(sorted(results.items()))))


def on_rebalance_timer(d: Draft) -> None:
    """Kafka's checkAndTriggerAutoLeaderRebalance, then the next check is scheduled."""
    config = d.config
    if not config.auto_leader_rebalance_enable:
        return
    d.command(C.ScheduleTimer(name=REBALANCE_TIMER, delay_ms=config.leader_imbalance_check_interval_seconds * 1000))
    if d.reassigning:
        return  # never while partitions are being reassigned
    by_preferred: dict[int, list] = {}
    for tp, info in d.scan():
        if info.assignment.replicas and not d.queued_for_deletion(tp.topic):
            by_preferred.setdefault(info.assignment.replicas[0], []).append((tp, info))
    threshold = config.leader_imbalance_per_broker_percentage / 100
    live = d.live
    for broker in sorted(by_preferred):
        owned = by_preferred[broker]
        off = [tp for tp, info in owned if info.leader_isr is not None and info.leader_isr.leader != broker]
        if owned and len(off) / len(owned) > threshold and broker in live:
            elect_leaders(d, sorted(off), "preferred", admin=False)


def imbalance_count(state) -> int:
    """PreferredReplicaImbalanceCount: partitions whose leader is not the preferred replica."""
    count = 0
    for tp, info in state.partitions.items():
        li = info.leader_isr
        if li is not None and info.assignment.replicas and li.leader != info.assignment.replicas[0] \
                and tp.topic not in state.topics_to_delete:
            count += 1
    return count
