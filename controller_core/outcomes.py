"""What the core does with the outcome of its partition-state writes.

Landed writes release the broker requests parked with them. A write that hit a version conflict
(a partition leader changed the ISR in between) is re-decided from the znode's current content
by re-applying the intents that produced it, and goes out again; its requests move with it.
A state written by a newer controller is left alone. Because no other decision runs while a
write is in flight (see `step.py`), the state a retry starts from is exactly ZooKeeper's.
"""
from __future__ import annotations

from operator import itemgetter

import attrs
import numpy as np

from . import partitions as P
from . import replicas as R
from .columns import chunk_groups
from .draft import Draft
from .intents import Strategy, WriteIntent
from .request_batch import ALL, emit_outbox
from .events import PartitionStatesWritten
from .machines import PartitionState, ReplicaState
from .state import ControllerState, PartitionInfo

_first, _second = itemgetter(0), itemgetter(1)


def on_written(state: ControllerState, event: PartitionStatesWritten) -> tuple[ControllerState, tuple]:
    outbox = state.pending.get(event.write_id)
    if outbox is None:
        return state, ()
    if not event.final:
        return _progress(state, event, outbox)
    d = Draft(state, cause=f"PartitionStatesWritten({event.write_id})")
    d.pending = state.pending.delete(event.write_id)
    _landed_versions(d, event.versions)
    for tp, fresh in event.conflicts:
        info = d.info(tp)
        if info is None:
            continue
        if fresh is None:
            _vanished(d, tp, info)
        else:
            d.put(tp, PartitionInfo(info.assignment, fresh, info.state, info.replica_states))
    state1, commands1 = d.finish()
    skip = frozenset(tp for tp, _ in event.conflicts)
    released = emit_outbox(state1, outbox, skip | outbox.released if outbox.released else skip)
    if not skip:
        return state1, commands1 + tuple(released)
    retry = Draft(state1, cause=f"retry of write {event.write_id} after version conflicts")
    intents = dict(outbox.intents)
    um_all = outbox.um_partitions is ALL
    um_tps = frozenset(outbox.um_partitions) if outbox.um_brokers and not um_all else frozenset()
    for tp, fresh in event.conflicts:
        info = retry.info(tp)
        if info is None:
            continue
        if fresh is None:
            continue  # see _vanished
        if fresh.controller_epoch > retry.epoch:
            retry.record(info.state, info.state, tp, ok=False,
                         detail=f"state written by a newer controller epoch ({fresh.controller_epoch})")
            continue
        for intent in intents.get(tp, ()):
            _reapply(retry, tp, intent)
        _drop_offline_replicas(retry, tp)
        if (um_all and outbox.um_brokers) or tp in um_tps:
            # the decision told every broker about this partition (e.g. leader -2 for a topic being
            # deleted); that UpdateMetadata was held back with the conflict, so the retry sends it
            retry.requests.send_update_metadata_to_all((tp,))
    state2, commands2 = retry.finish()
    return state2, commands1 + tuple(released) + commands2


def _landed_versions(d: Draft, versions) -> None:
    """The znode versions the writes produced replace the cached ones where newer: one column
    write over the image for a big write (a failover's 10,000), not a value per partition."""
    image = d.partitions
    if len(versions) < 64 or image.odd:
        for tp, version in versions:
            info = d.info(tp)
            if info is not None and info.leader_isr is not None and info.leader_isr.zk_version < version:
                d.put(tp, PartitionInfo(info.assignment, info.leader_isr.with_version(version), info.state,
                                        info.replica_states))
        return
    rows = image.rows_of(list(map(_first, versions)))
    new = np.fromiter(map(_second, versions), np.int64, len(rows))
    known = rows >= 0
    if not known.all():
        rows, new = rows[known], new[known]
    if not len(rows):
        return
    keep = np.zeros(len(rows), bool)
    for c, at, s in chunk_groups(rows):
        ch = image.chunks[c]
        keep[at] = ch.present[s] & ch.has_state[s] & (ch.zk_version[s] < new[at])
    if keep.any():
        d.replace_image(image.with_columns((rows[keep], {"zk_version": new[keep].astype(np.int32)})))


def _progress(state: ControllerState, event: PartitionStatesWritten, outbox) -> tuple[ControllerState, tuple]:
    """Part of a large write has landed: its partitions' requests go out now (their cached
    state is what ZooKeeper holds); the write stays pending for the rest and for conflicts."""
    # (set operations in C: a 100,000-partition write reports 25,000 landed at a time)
    landed = outbox.intents.keys() & event.landed
    if outbox.released:
        landed -= outbox.released
    landed = frozenset(landed)
    if not landed:
        return state, ()
    commands = emit_outbox(state, outbox, only=landed)
    outbox = attrs.evolve(outbox, released=outbox.released | landed)
    return attrs.evolve(state, pending=state.pending.set(event.write_id, outbox)), tuple(commands)


def _vanished(d: Draft, tp, info: PartitionInfo) -> None:
    """The state znode is gone (deleted behind the controller's back, or with its topic). There
    is nothing to build on: like Kafka, whose write fails with NoNode, the change is not made,
    and the partition is left Offline without a leader until the topic listing or a failover
    says what it is. It is not re-created here: the topic itself may be gone, and creating the
    state's parents would bring its path back."""
    if info.state is PartitionState.ONLINE or info.state is PartitionState.NEW:
        d.move_partition(tp, PartitionState.OFFLINE, info)
        info = d.info(tp)
    d.record(info.state, info.state, tp, ok=False, detail="the state znode is missing")
    d.put(tp, PartitionInfo(info.assignment, None, info.state, info.replica_states))


_IN_SERVICE = (ReplicaState.ONLINE, ReplicaState.NEW)


def _drop_offline_replicas(d: Draft, tp) -> None:
    """After a retry: the znode's ISR may hold replicas this controller has taken out of service
    (offline, being deleted, or removed from the assignment) that the decision's own intents do
    not remove, e.g. a partition leader re-added one while the write was in flight. Kafka's
    removeReplicasFromIsr re-reads the znode and removes them; so does this."""
    info = d.info(tp)
    li = info.leader_isr
    if li is None or li.controller_epoch > d.epoch:
        return
    replicas = info.assignment.replicas
    for r in li.isr:
        if r not in replicas or info.replica_state(r) not in _IN_SERVICE:
            R.shrink_isr(d, tp, r)


_NEEDS_LIVE_TOPIC = (WriteIntent.INIT, WriteIntent.ELECT, WriteIntent.BUMP)
"""Intents that choose or confirm a leader: not re-applied to a topic queued for deletion."""


def _reapply(d: Draft, tp, intent) -> None:
    try:
        # a parked outbox decoded from a snapshot holds the intents' plain strings: equal to
        # the members, made members here so that an unknown one fails now, by name
        kind = WriteIntent(intent[0])
    except ValueError:
        raise ValueError(f"unknown write intent {intent!r}") from None
    info = d.info(tp)
    li = info.leader_isr
    if kind in _NEEDS_LIVE_TOPIC and (d.queued_for_deletion(tp.topic) or info.state is PartitionState.NON_EXISTENT):
        d.record(info.state, info.state, tp, ok=False, detail=f"{kind} not retried: the topic is being deleted")
        return
    if kind is WriteIntent.INIT:
        replicas = info.assignment.replicas
        if (li.leader != -1 and li.leader not in replicas) or not set(li.isr) <= set(replicas):
            # a state znode left behind by an earlier incarnation of the partition (its topic
            # znode was rewritten without it): not this partition's state, so initialise over it
            _reinitialize(d, tp, info)
            return
        # someone created the state first: adopt it, and elect if its leader is gone
        live = d.live
        if li.leader not in live:
            d.move_partition(tp, PartitionState.OFFLINE)
            P.to_online(d, (tp,), P.OFFLINE)
        else:
            d.requests.send_leader_and_isr([r for r in info.assignment.replicas if r in live], tp, is_new=True)
    elif kind is WriteIntent.ELECT:
        if P.elect(d, tp, Strategy(intent[1])) is not None and li.leader not in d.live:
            d.move_partition(tp, PartitionState.OFFLINE)
    elif kind is WriteIntent.SHRINK:
        replica = intent[1]
        if replica in d.live and info.replica_state(replica) is ReplicaState.ONLINE:
            # the replica came back while the write was in flight (and its leader may already
            # have re-added it): the reason to remove it is gone, so the stale intent is dropped
            d.record(ReplicaState.OFFLINE, ReplicaState.ONLINE, tp, replica, detail="ISR shrink dropped: replica is back")
            return
        R.shrink_isr(d, tp, replica)
        if not d.queued_for_deletion(tp.topic):
            d.requests.send_leader_and_isr([r for r in info.assignment.replicas if r != replica], tp)
    elif kind is WriteIntent.BUMP:
        d.write_change(tp, info, li.leader, li.isr, (WriteIntent.BUMP,))
        d.requests.send_leader_and_isr(info.assignment.replicas, tp)
    else:
        raise ValueError(f"unknown write intent {intent!r}")


def _reinitialize(d: Draft, tp, info: PartitionInfo) -> None:
    """New -> Online over an orphaned state znode: the first live replica leads, the live
    replicas form the ISR, and the leader epoch continues from the orphan's so that brokers
    that still hold the old incarnation accept the change."""
    orphan = info.leader_isr
    live_replicas = tuple(r for r in info.assignment.replicas if r in d.live)
    if not live_replicas:
        d.move_partition(tp, PartitionState.OFFLINE, info)
        d.record(PartitionState.OFFLINE, PartitionState.ONLINE, tp, ok=False,
                 detail="no assigned replica is alive to replace an orphaned state znode")
        return
    d.record(info.state, PartitionState.ONLINE, tp, detail="replacing an orphaned state znode")
    d.write_leader_isr(tp, orphan.with_leader(live_replicas[0], live_replicas, d.epoch), ("init",), info,
                       PartitionState.ONLINE)
    d.requests.send_leader_and_isr(live_replicas, tp, is_new=True)
