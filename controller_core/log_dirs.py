"""Failed log dirs (JBOD): Kafka 2.4's LogDirEventNotification and the KAFKA_STORAGE_ERROR half of
its LeaderAndIsrResponseReceived.

- `LogDirEventNotified(brokers)`: Kafka's `onBrokerLogDirFailure`: every replica hosted by those
  (live) brokers is moved to OnlineReplica, which sends each broker a LeaderAndIsr for all its
  partitions; a broker answers KAFKA_STORAGE_ERROR for the replicas in its failed dirs.
- `LeaderAndIsrResponded` with KAFKA_STORAGE_ERROR entries: Kafka's `onReplicasBecomeOffline`
  for the newly reported replicas: each goes OfflineReplica (StopReplica to it, out of the ISR
  unless it is the last member, LeaderAndIsr to the others), and the partitions it led that now
  have another live ISR member are elected with the offline rule. A partition whose only ISR
  member is the failed replica goes OfflinePartition without an election.
  Other partition errors go to the usual handler (`fallback`).

Rules 4 keep the reported replicas (`replicas_on_offline_dirs`, Kafka's replicasOnOfflineDirs):
a replica is newly reported if it is not kept yet, and a kept one counts as offline in every
election (partitions.py) until its broker starts or fails again. Under older rules (journals
decided before) nothing is kept: a replica counted as newly reported unless it was already
OfflineReplica and not the leader, since an election could pick it again.
"""
from __future__ import annotations

from typing import Callable

from . import partitions as P
from . import replicas as R
from .draft import Draft
from .events import LeaderAndIsrResponded
from .machines import ReplicaState

KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"


def on_log_dir_event(d: Draft, brokers) -> None:
    """Executed by `step()` on the controller (emitted by the log-dir event watch)."""
    live = frozenset(brokers) & d.live
    if live:
        R.move(d, R.replicas_on(d, live), ReplicaState.ONLINE)


def storage_errors_then(fallback: Callable[[Draft, LeaderAndIsrResponded], None]):
    """The LeaderAndIsrResponded handler: storage errors here, everything else to `fallback`."""
    def handler(d: Draft, event: LeaderAndIsrResponded) -> None:
        if d.config.rules < 2:  # a journal decided before storage errors were acted on
            fallback(d, event)
            return
        failed = [tp for tp, error in event.errors if error.startswith(KAFKA_STORAGE_ERROR)]
        others = tuple((tp, e) for tp, e in event.errors if not e.startswith(KAFKA_STORAGE_ERROR))
        if others or not failed:
            fallback(d, LeaderAndIsrResponded(at=event.at, broker_id=event.broker_id, errors=others))
        if failed:
            on_replicas_offline(d, event.broker_id, failed)
    return handler


def on_replicas_offline(d: Draft, broker: int, tps) -> None:
    reported = sorted(set(tps))
    keep = d.config.rules >= 4
    if keep:  # only the replicas not reported before are new (Kafka: current -- previous)
        kept = d.replicas_on_offline_dirs
        reported = [tp for tp in reported if (tp, broker) not in kept]
    replicas, led, hosted = [], [], []
    for tp in reported:
        info = d.info(tp)
        if info is None or broker not in info.assignment.replicas:
            continue
        hosted.append((tp, broker))
        if d.queued_for_deletion(tp.topic):
            continue
        li = info.leader_isr
        leads = li is not None and li.leader == broker
        if not keep and info.replica_state(broker) is ReplicaState.OFFLINE and not leads:
            continue
        replicas.append((tp, broker))
        if leads:
            led.append(tp)
    if keep and hosted:
        d.replicas_on_offline_dirs = d.replicas_on_offline_dirs | frozenset(hosted)
    if not replicas:
        return
    R.move(d, replicas, ReplicaState.OFFLINE)
    live = d.live
    electable, stranded = [], []
    for tp in led:
        li = d.info(tp).leader_isr
        gone = d.on_offline_dirs(tp) if keep else ()
        if li is not None and any(r != broker and r in live and r not in gone for r in li.isr):
            electable.append(tp)
        else:
            stranded.append(tp)
    # leaderless either way; only those with another live ISR member can be elected now (under
    # older rules an election among the rest would pick the failed replica again; under rules 4
    # it would be refused, and a refusal asks for a re-read this decision does not need)
    P.to_offline(d, stranded)
    P.offline_then_elect(d, electable)
