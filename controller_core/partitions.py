"""The partition state machine's actions (Kafka's ZkPartitionStateMachine), on a Draft.

Moving partitions to OnlinePartition is where leaders are chosen: a New partition gets its first
leader and ISR (its live replicas), an Offline or Online one is re-elected with one of the four
strategies of `election.py`. Results are conditional writes of the state znode plus LeaderAndIsr
requests to the replicas; the writes' expected versions come from the draft.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from . import election
from .columns import P_CODE
from .draft import Draft
from .intents import Strategy, WriteIntent
from .machines import PartitionState
from .state import PartitionInfo
from .values import INITIAL_LEADER_EPOCH, NO_ZK_VERSION, LeaderIsr, TopicPartition

# plain module names: callers say P.OFFLINE, and an enum attribute lookup is slow in a loop
OFFLINE, OFFLINE_UNCLEAN, REASSIGN = Strategy.OFFLINE, Strategy.OFFLINE_UNCLEAN, Strategy.REASSIGN
PREFERRED, CONTROLLED_SHUTDOWN = Strategy.PREFERRED, Strategy.CONTROLLED_SHUTDOWN
_INIT, _ELECT = WriteIntent.INIT, WriteIntent.ELECT

P = PartitionState
NEW, ONLINE, OFFLINE_STATE = P.NEW, P.ONLINE, P.OFFLINE  # plain names: enum attribute lookups are slow
_NEW_CODE, _OFFLINE_CODE = P_CODE[NEW], P_CODE[OFFLINE_STATE]


def to_online(d: Draft, tps: Iterable[TopicPartition], strategy: Strategy = OFFLINE) -> dict[TopicPartition, str | None]:
    """Kafka's handleStateChanges(partitions, OnlinePartition, strategy).

    Returns each partition's error (None on success)."""
    results: dict[TopicPartition, str | None] = {}
    info_of = d.info
    for tp in tps:
        info = info_of(tp)
        current = info.state if info is not None else P.NON_EXISTENT
        if current is ONLINE or current is OFFLINE_STATE:
            results[tp] = elect(d, tp, strategy, info)
        elif current is NEW:
            results[tp] = initialize(d, tp)
        else:
            d.record(current, ONLINE, tp, ok=False, detail="illegal transition")
            results[tp] = "illegal state transition"
    return results


NO_LIVE_REPLICA = "no assigned replica is alive"
"""Why a New partition is not initialized."""


def initialize(d: Draft, tp: TopicPartition) -> str | None:
    """New -> Online: the first live replica leads, the live replicas form the ISR."""
    info = d.info(tp)
    live = d.live
    if d.replicas_on_offline_dirs:
        live = live - d.on_offline_dirs(tp)
    live_replicas = tuple(r for r in info.assignment.replicas if r in live)
    if not live_replicas:
        d.record(P.NEW, P.ONLINE, tp, ok=False, detail=NO_LIVE_REPLICA)
        return NO_LIVE_REPLICA
    li = LeaderIsr(live_replicas[0], INITIAL_LEADER_EPOCH, live_replicas, d.epoch, NO_ZK_VERSION)
    d.record(NEW, ONLINE, tp)
    d.write_leader_isr(tp, li, (_INIT,), info, ONLINE)
    d.requests.send_leader_and_isr(live_replicas, tp, is_new=True)
    return None


def choose(d: Draft, tp: TopicPartition, strategy: Strategy, info=None):
    """Run one election strategy for `tp` on the draft: `(leader, new ISR, recipients, unclean)`,
    or an error string. Shared by first decisions and by retries after a version conflict."""
    if info is None:
        info = d.info(tp)
    li = info.leader_isr if info is not None else None
    if li is None:
        return "partition has no leader and ISR state"
    if li.controller_epoch > d.epoch:
        return (f"aborted leader election: the state was written by controller epoch "
                f"{li.controller_epoch}, newer than ours ({d.epoch})")
    replicas = info.assignment.replicas
    # replicas on failed log dirs do not count as online (rules 4; nearly always none)
    gone = d.on_offline_dirs(tp) if d.replicas_on_offline_dirs else None
    if strategy == OFFLINE or strategy == OFFLINE_UNCLEAN:
        if gone:
            live = d.live - gone
            memo = (election.offline(replicas, li.isr, live, False), [r for r in replicas if r in live])
        else:
            live = d.live
            key = (replicas, li.isr)
            memo = d.elections.get(key)
            if memo is None:
                memo = d.elections[key] = (election.offline(replicas, li.isr, live, False),
                                           [r for r in replicas if r in live])
        result, recipients = memo
        if result is None and (strategy == OFFLINE_UNCLEAN or d.unclean_allowed(tp.topic)):
            result = election.offline(replicas, li.isr, live, True)
    elif strategy == REASSIGN:
        live = d.live - gone if gone else d.live
        target = info.assignment.target_replicas
        result = election.reassign(target, li.isr, live)
        recipients = [r for r in target if r in live]
    elif strategy == PREFERRED:
        live = d.live - gone if gone else d.live
        result = election.preferred(replicas, li.isr, live)
        recipients = [r for r in replicas if r in live]
    elif strategy == CONTROLLED_SHUTDOWN:
        everyone = d.live_or_shutting_down - gone if gone else d.live_or_shutting_down
        result = election.controlled_shutdown(replicas, li.isr, everyone, d.shutting_down)
        recipients = [r for r in replicas if r in everyone]
    else:
        raise ValueError(f"unknown election strategy {strategy!r}")
    if result is None:
        if d.config.rules >= 2 and tp not in d.confirmed and any(r not in li.isr for r in _candidates(d, strategy, info, gone)):
            # A replica the rule would take, were it in the ISR, is not in the cached ISR: its
            # leader may have added it and the notification is still queued. Kafka decides on
            # the ISR it reads from ZooKeeper; the caller re-reads before refusing for good.
            d.unconfirmed[tp] = None
        return refusal(strategy, li.isr, sorted(r for r in replicas if r in gone) if gone else ())
    leader, isr, unclean = result
    return leader, isr, recipients, unclean


def refusal(strategy: Strategy, isr: tuple[int, ...], on_failed_dirs: Sequence[int] = ()) -> str:
    """The error of an election that found no leader (logged, and answered to election requests);
    `on_failed_dirs`, the replicas it passed over for being on a failed log dir, sorted, are named:
    a live in-sync replica passed over would read as a bug otherwise."""
    text = f"no eligible leader under the {strategy} strategy (isr {list(isr)})"
    if on_failed_dirs:
        text = f"{text}; on a failed log dir: {', '.join(map(str, on_failed_dirs))}"
    return text


def _candidates(d: Draft, strategy: Strategy, info, gone: frozenset[int] | None) -> list[int]:
    """The replicas that `strategy` may elect, leaving ISR membership aside (`gone`: brokers
    whose replica is on a failed log dir)."""
    if strategy == CONTROLLED_SHUTDOWN:
        everyone, leaving = d.live_or_shutting_down, d.shutting_down
        if gone:
            everyone = everyone - gone
        return [r for r in info.assignment.replicas if r in everyone and r not in leaving]
    live = d.live - gone if gone else d.live
    if strategy == REASSIGN:
        return [r for r in info.assignment.target_replicas if r in live]
    if strategy == PREFERRED:
        replicas = info.assignment.replicas
        return [replicas[0]] if replicas and replicas[0] in live else []
    return [r for r in info.assignment.replicas if r in live]


UNCLEAN = "unclean leader election"


def elect(d: Draft, tp: TopicPartition, strategy: Strategy, info=None) -> str | None:
    """Online/Offline -> Online through an election; on failure the state is left alone."""
    if info is None:
        info = d.info(tp)
    current = info.state
    chosen = choose(d, tp, strategy, info)
    if chosen.__class__ is str:
        d.record(current, ONLINE, tp, ok=False, detail=chosen)
        return chosen
    leader, isr, recipients, unclean = chosen
    d.record(current, ONLINE, tp, detail=UNCLEAN if unclean else "")
    d.write_change(tp, info, leader, isr, (_ELECT, strategy), ONLINE)
    d.requests.send_leader_and_isr(recipients, tp)
    return None


def offline_then_elect(d: Draft, tps: Iterable[TopicPartition]) -> None:
    """Partitions whose leader died: to Offline, then to Online through the offline election
    (Kafka's onReplicasBecomeOffline followed by triggerOnlinePartitionStateChange), in one pass
    per partition. The same transitions are logged; only the intermediate Offline value is not
    built unless the election fails (a broker failure moves 10,000 partitions this way)."""
    info_of = d.info
    for tp in tps:
        info = info_of(tp)
        current = info.state if info is not None else P.NON_EXISTENT
        if current is not ONLINE and current is not OFFLINE_STATE and current is not NEW:
            d.record(current, OFFLINE_STATE, tp, ok=False, detail="illegal transition")
            continue
        if current is not OFFLINE_STATE:
            d.record(current, OFFLINE_STATE, tp)
        chosen = choose(d, tp, OFFLINE, info)
        if chosen.__class__ is str:
            d.record(OFFLINE_STATE, ONLINE, tp, ok=False, detail=chosen)
            if current is not OFFLINE_STATE:
                d.put(tp, PartitionInfo(info.assignment, info.leader_isr, OFFLINE_STATE, info.replica_states))
            continue
        leader, isr, recipients, unclean = chosen
        d.record(OFFLINE_STATE, ONLINE, tp, detail=UNCLEAN if unclean else "")
        d.write_change(tp, info, leader, isr, (_ELECT, OFFLINE), ONLINE)
        d.requests.send_leader_and_isr(recipients, tp)


def to_offline(d: Draft, tps: Iterable[TopicPartition]) -> None:
    for tp in tps:
        d.move_partition(tp, P.OFFLINE)


def to_non_existent(d: Draft, tps: Iterable[TopicPartition]) -> None:
    for tp in tps:
        d.move_partition(tp, P.NON_EXISTENT)


def _waiting(d: Draft) -> list[TopicPartition]:
    """The New and Offline partitions, in row order: read from the state column (a scan would
    build every partition's value, seconds at 100,000 partitions, to find none, the usual
    answer after a broker starts)."""
    image = d.partitions
    if image.odd:
        return [tp for tp, info in d.scan() if info.state is NEW or info.state is OFFLINE_STATE]
    pstate = image.column("pstate")
    return image.tps(np.flatnonzero(image.column("present") & ((pstate == _NEW_CODE) | (pstate == _OFFLINE_CODE))))


def trigger_online_state_change(d: Draft, topic: str | None = None) -> None:
    """Kafka's triggerOnlinePartitionStateChange: elect every New or Offline partition of topics
    not queued for deletion (of one topic when given)."""
    if topic is not None:
        candidates = [tp for tp in d.partitions_of(topic)
                      if d.info(tp).state is NEW or d.info(tp).state is OFFLINE_STATE]
    else:
        to_delete = d.topics_to_delete
        candidates = [tp for tp in _waiting(d) if tp.topic not in to_delete]
    if topic is not None and d.queued_for_deletion(topic):
        return
    candidates.sort()
    to_online(d, candidates, OFFLINE)
