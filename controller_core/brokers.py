"""Brokers joining, failing and bouncing (Kafka's BrokerChange,
onBrokerStartup, onBrokerFailure, onReplicasBecomeOffline), on a Draft."""
from __future__ import annotations

from . import columnar_brokers, columnar_online, columnar_startup, deletion
from . import partitions as P
from . import reassignment
from . import replicas as R
from .draft import Draft
from .request_batch import ALL
from .machines import PartitionState, ReplicaState
from .values import BrokerInfo

NEW, OFFLINE = PartitionState.NEW, PartitionState.OFFLINE


def on_brokers_changed(d: Draft, listing: tuple[BrokerInfo, ...]) -> None:
    """Diff the full `/brokers/ids` listing against the live-or-shutting-down brokers.

    A broker whose registration epoch (czxid) grew restarted without the controller noticing
    its absence: it is treated as a failure followed by a startup, as Kafka does."""
    current = {b.broker_id: b for b in listing}
    known = d.brokers
    new = sorted(b for b in current if b not in known)
    dead = sorted(b for b in known.keys() if b not in current)
    bounced = sorted(b for b in current if b in known and current[b].epoch > known[b].epoch)
    modified = sorted(b for b in current if b in known and b not in bounced and current[b] != known[b]
                      and current[b].epoch == known[b].epoch)
    if new:
        _add(d, [current[b] for b in new])
        on_broker_startup(d, frozenset(new))
    if bounced:
        _remove(d, bounced)
        on_broker_failure(d, frozenset(bounced))
        _add(d, [current[b] for b in bounced])
        on_broker_startup(d, frozenset(bounced))
    if dead:
        _remove(d, dead)
        on_broker_failure(d, frozenset(dead), last=True)  # (a modified broker's UpdateMetadata re-reads nothing)
    if modified:
        _add(d, [current[b] for b in modified])
        d.requests.send_update_metadata_to_all(ALL)


def _add(d: Draft, infos: list[BrokerInfo]) -> None:
    m = d.brokers.mutate()
    for b in infos:
        m[b.broker_id] = b
    d.set_brokers(m.finish())
    d.seen_brokers = d.seen_brokers | {b.broker_id for b in infos}


def _remove(d: Draft, ids: list[int]) -> None:
    m = d.brokers.mutate()
    for b in ids:
        m.pop(b, None)
    d.set_brokers(m.finish())


def on_broker_startup(d: Draft, new: frozenset[int]) -> None:
    d.forget_offline_dirs(new)
    # existing brokers learn about the new ones, new ones learn everything
    d.requests.send_update_metadata_to_all(ALL)
    moved = columnar_startup.replicas_online(d, new)  # the same transitions over the columns
    if moved is None:  # (not the common case: the rule)
        on_replicas = R.replicas_on(d, new)
        R.move(d, on_replicas, ReplicaState.ONLINE)
        moved = [tp for tp, _ in on_replicas]
    if not columnar_online.elect_waiting(d):  # (the same elections over the columns)
        P.trigger_online_state_change(d)
    for tp in sorted(d.reassigning):
        info = d.info(tp)
        if info is not None and any(r in new for r in info.assignment.target_replicas):
            reassignment.on_partition_reassignment(d, tp, info.assignment)
    deleting = {tp.topic for tp in moved if d.queued_for_deletion(tp.topic)} if d.topics_to_delete else ()
    if deleting:
        deletion.resume_for_topics(d, deleting)


def on_broker_failure(d: Draft, dead: frozenset[int], last: bool = False) -> None:
    """Kafka's onBrokerFailure + onReplicasBecomeOffline: leaderless partitions go Offline and
    are re-elected with every other New/Offline partition, the dead brokers' replicas go
    Offline (leaving the ISR), and deletions touching them fail over.

    One scan of the partitions collects all three sets (Kafka scans three times); at 10,000
    partitions each scan is a measurable share of the failover step. `last`: nothing after it
    in this decision can refuse an election (a bounce's startup can), so a refusal that needs a
    re-read may stop the decision at once (`draft.DecisionParked`)."""
    if d.shutting_down & dead:
        d.set_shutting_down(d.shutting_down - dead)
    d.forget_offline_dirs(dead)
    if columnar_brokers.on_broker_failure(d, dead, last):
        return  # the same decision over the columns (the common case; see columnar_brokers.py)
    live = d.live
    to_delete = d.topics_to_delete
    offline_replicas, for_deletion, leaderless, waiting = [], [], [], []
    for tp, info in d.scan():
        deleting = tp.topic in to_delete
        for r in info.assignment.replicas:
            if r in dead:
                (for_deletion if deleting else offline_replicas).append((tp, r))
        if deleting:
            continue
        state = info.state
        li = info.leader_isr
        if li is not None and li.leader not in live and state is not NEW:
            leaderless.append(tp)
        elif state is NEW or state is OFFLINE:
            waiting.append(tp)
    leaderless.sort()
    offline_replicas.sort()
    P.offline_then_elect(d, leaderless)
    waiting.sort()
    P.to_online(d, waiting, P.OFFLINE)
    R.move(d, offline_replicas, ReplicaState.OFFLINE)
    if for_deletion:
        for_deletion.sort()
        deletion.fail_replica_deletion(d, for_deletion)
    if not leaderless:
        d.requests.send_update_metadata_to_all(ALL)
