"""A broker failure decided over the columns of the partition image, inside `step()`.

`brokers.on_broker_failure` (Kafka's onBrokerFailure and onReplicasBecomeOffline) stays the
specification. This module makes the same decision for the common case, a failure of brokers
whose partitions are all Online with a leader-and-ISR, or Offline without a live leader (left
so by an earlier failure):

- which partitions lost their leader, which hold a replica on a dead broker, and the offline
  election of all of them are array operations (`vector_election.offline`);
- an election that finds no live ISR member is unclean where the topic allows it (the first
  live replica leads alone), and otherwise refused as the rule refuses it: the partition goes
  (or stays) Offline, and where a live replica is missing from the cached ISR the refusal is
  noted for a re-read first (`partitions.choose`, issue 22); the log of such elections is
  walked a partition at a time, since a refusal's line names its ISR;
- the request batch, the writes and the state-change log are filled in the order the scalar
  handlers fill them (so the commands, and their digest, are the same), from plain values
  taken from the columns, not from one `PartitionInfo` per partition;
- the new state is written into the columns of the changed chunks, column by column.

Partitions of topics queued for deletion are left out of all of it, as the rule leaves them out:
their dead replicas fail the deletion (`deletion.fail_replica_deletion`, the rule's own call,
after the columns are written). Anything else (a New partition, an Offline one whose leader is
live, a partition without a state or written by a newer controller, a replica whose state may
not go Offline) returns False before touching the draft, and the caller runs the scalar path:
the exceptions stay where the readable rules are. tests/core/test_columnar_brokers.py checks on
random clusters that `step()` gives the same state and commands with and without this path.
"""
from __future__ import annotations

from collections import defaultdict
from itertools import compress
from typing import Collection

import numpy as np

from . import deletion
from . import partitions as P
from . import vector_election as V
from .columns import P_CODE, PAD, R_CODE, REPLICA_STATES, _cut
from .draft import ALL, Draft
from .machines import REPLICA_VALID_PREVIOUS, PartitionState, ReplicaState

ENABLED = True
"""Tests switch this off to compare with the scalar path."""

_ONLINE, _NEW, _OFFLINE = P_CODE[PartitionState.ONLINE], P_CODE[PartitionState.NEW], P_CODE[PartitionState.OFFLINE]
_R_OFFLINE = R_CODE[ReplicaState.OFFLINE]
_OFFLINE_FROM = np.array(sorted(R_CODE[s] for s in REPLICA_VALID_PREVIOUS[ReplicaState.OFFLINE]), np.int8)
_ELECT = ("elect", "offline")


def on_broker_failure(d: Draft, dead: Collection[int]) -> bool:
    """Decide the failure of `dead` (already removed from the draft's brokers) if it is the
    common case (see the module docstring); False, with the draft untouched, if not."""
    if not ENABLED or d.has_writes:
        return False  # (a draft that already wrote would need the first write's expected version)
    image = d.partitions
    if image.odd or not image.count:
        return False
    live = d.live
    epoch = d.epoch
    present = image.column("present")
    deleting = image.topic_mask(d.topics_to_delete) if d.topics_to_delete else None
    if deleting is not None:
        in_deletion = present & deleting
        present = present & ~deleting
    has = image.column("has_state")
    leader = image.column("leader")
    pstate = image.column("pstate")
    replicas = image.column("replicas")
    cepoch = image.column("controller_epoch")
    rstate = image.column("rstate")

    dead_replica = V.member(replicas, dead) & present[:, None]
    touched = dead_replica.any(axis=1)
    leader_live = V.member(leader[:, None], live)[:, 0]
    leaderless = present & has & ~leader_live & (pstate != _NEW)
    is_online = pstate == _ONLINE
    if (present & ~is_online & ~(leaderless & (pstate == _OFFLINE))).any():
        return False  # New partitions, or Offline ones with a live leader, wait for an election: the rule
    if (touched & ~has).any() or ((leaderless | touched) & (cepoch > epoch)).any():
        return False
    if (dead_replica & ~np.isin(rstate, _OFFLINE_FROM)).any():
        return False
    tried_rows = np.flatnonzero(leaderless)
    isr = image.column("isr")
    ok, new_leader, new_isr, _ = V.offline(replicas[tried_rows], isr[tried_rows], live,
                                           np.zeros(len(tried_rows), bool))
    unclean = np.zeros(len(tried_rows), bool)
    if not ok.all():  # where the topic allows it, an unclean election (the first live replica)
        allowed = {t for t in {tp.topic for tp in image.tps(tried_rows[~ok])} if d.unclean_allowed(t)}
        if allowed:
            may = image.topic_mask(allowed)[tried_rows]
            ok, new_leader, new_isr, unclean = V.offline(replicas[tried_rows], isr[tried_rows], live, may)
    refused_rows = tried_rows[~ok]
    elect_rows, new_leader, new_isr = tried_rows[ok], new_leader[ok], new_isr[ok]

    # -- the new columns: the election, then each dead replica leaves the ISR -------------------
    # (sorted broker order, as replicas._to_offline walks a partition's dead replicas; each change
    # bumps the leader epoch once, as Draft.write_change does)
    n = len(present)
    f_leader = leader.copy()
    f_isr = isr.copy()
    f_epoch = image.column("leader_epoch").astype(np.int64)
    f_leader[elect_rows] = new_leader
    f_isr[elect_rows] = new_isr
    f_epoch[elect_rows] += 1
    written = np.zeros(n, bool)
    written[elect_rows] = True
    shrinks = []
    for b in sorted(dead):
        hit = V.shrink(f_isr, f_leader, f_epoch, b,
                       np.flatnonzero(present & (replicas == b).any(axis=1) & (f_isr == b).any(axis=1)))
        written[hit] = True
        shrinks.append((b, hit))

    # -- the decision order: partitions sorted, the elected ones first (partitions.
    # offline_then_elect), then every partition with a dead replica (replicas._to_offline) -----
    e_tps = image.tps(elect_rows)
    e_order = sorted(range(len(e_tps)), key=e_tps.__getitem__)
    e_tps = [e_tps[k] for k in e_order]
    e_rows = elect_rows[np.array(e_order, np.intp)] if len(e_order) else elect_rows
    t_rows = np.flatnonzero(touched)
    t_tps = image.tps(t_rows)
    t_order = sorted(range(len(t_tps)), key=t_tps.__getitem__)
    t_tps = [t_tps[k] for k in t_order]
    t_rows = t_rows[np.array(t_order, np.intp)] if len(t_order) else t_rows
    is_elected = np.zeros(n, bool)
    is_elected[elect_rows] = True

    # -- the request batch: LeaderAndIsr per broker, StopReplica, the state-change log ----------
    lai_lists: defaultdict[int, list] = defaultdict(list)
    shapes: dict[tuple, tuple] = {}
    for tp, row in zip(e_tps, replicas[e_rows].tolist()):
        key = tuple(row)
        to = shapes.get(key)
        if to is None:
            to = shapes[key] = tuple(r for r in _cut(row) if r in live)
        for b in to:
            lai_lists[b].append(tp)
    stops: defaultdict[int, list] = defaultdict(list)
    offline_log: defaultdict[tuple, list] = defaultdict(list)
    dead_shapes: dict[tuple, tuple] = {}
    for tp, row, codes in zip(t_tps, replicas[t_rows].tolist(), rstate[t_rows].tolist()):
        key = tuple(row)
        plan = dead_shapes.get(key)
        if plan is None:
            reps = _cut(row)
            plan = dead_shapes[key] = tuple((r, j, tuple(x for x in reps if x != r))
                                            for r, j in sorted((r, j) for j, r in enumerate(reps) if r in dead))
        for r, j, others in plan:
            stops[r].append(tp)
            for b in others:
                lai_lists[b].append(tp)
            lkey = (codes[j], r)
            offline_log[lkey].append(tp)

    d.add_leader_and_isr(lai_lists)
    if e_tps or t_tps:
        d.um_everyone = True
        if not d.um_all:
            # the elected partitions, then the touched ones not elected: distinct, no hashing
            told = ~is_elected[t_rows]
            d.um_tps.extend(e_tps + list(compress(t_tps, told.tolist())), distinct=True,
                            rows=np.concatenate((e_rows, t_rows[told])))
    stop = d.stop
    for r, tps in stops.items():
        per = stop.get((r, False))
        if per is None:
            stop[(r, False)] = dict.fromkeys(tps)
        else:
            per.update(dict.fromkeys(tps))
    online, offline = PartitionState.ONLINE, PartitionState.OFFLINE
    if len(refused_rows) or unclean.any() or (pstate[elect_rows] != _ONLINE).any():
        _log_elections(d, image, tried_rows, ok, unclean, pstate[tried_rows] == _ONLINE, replicas, isr)
    elif e_tps:
        d.record_many(online, offline, e_tps)
        d.record_many(offline, online, e_tps)
    target = ReplicaState.OFFLINE
    for (code, r), tps in offline_log.items():
        d.record_many(REPLICA_STATES[code], target, tps, r)

    # -- the writes, elected partitions first, each with the intents that produced it -----------
    shrink_rows = t_rows[written[t_rows] & ~is_elected[t_rows]]
    w_tps = e_tps + image.tps(shrink_rows)
    w_rows = np.concatenate((e_rows, shrink_rows)).astype(np.intp)
    intents = d.intents
    intents.update(dict.fromkeys(e_tps, (_ELECT,)))
    if shrinks:
        acc: dict[int, tuple] = {}
        for b, hit in shrinks:
            step_intent = (("shrink", b),)
            for r in hit.tolist():
                acc[r] = acc.get(r, ()) + step_intent
        intents.update(zip(w_tps[len(e_tps):], [acc[r] for r in shrink_rows.tolist()]))
    written_columns = d.write_rows(w_tps, w_rows, f_leader[w_rows], f_epoch[w_rows], f_isr[w_rows])

    # -- the new state, column by column, in the chunks that changed ----------------------------
    new_rstate = rstate[t_rows].copy()
    new_rstate[dead_replica[t_rows]] = _R_OFFLINE
    # the partition states that move: elected Offline ones go Online, refused Online ones Offline
    moved = np.concatenate((elect_rows, refused_rows)).astype(np.intp)
    new_pstate = np.concatenate((np.full(len(elect_rows), _ONLINE, np.int8),
                                 np.full(len(refused_rows), _OFFLINE, np.int8)))
    d.replace_image(image.with_columns((w_rows, written_columns), (t_rows, {"rstate": new_rstate}),
                                       (moved, {"pstate": new_pstate.astype(pstate.dtype)})))

    if deleting is not None:  # the dead replicas of topics being deleted: the rule's own walk
        gone = V.member(replicas, dead) & in_deletion[:, None]
        d_rows = np.flatnonzero(gone.any(axis=1))
        if len(d_rows):
            deletion.fail_replica_deletion(d, sorted(
                (tp, r) for tp, row in zip(image.tps(d_rows), replicas[d_rows].tolist()) for r in _cut(row)
                if r in dead))
    if not len(tried_rows):
        d.send_update_metadata_to_all(ALL)  # as brokers.on_broker_failure: no leader to elect
    return True


def _log_elections(d: Draft, image, rows: np.ndarray, ok: np.ndarray, unclean: np.ndarray, was_online: np.ndarray,
                   replicas: np.ndarray, isr: np.ndarray) -> None:
    """The state-change log of `partitions.offline_then_elect` over `rows` (some elections
    refused or unclean, or some partitions already Offline), walked in its order, one partition
    at a time: a refusal's line names the ISR, so its groups interleave with the others'. A
    refusal the cached ISR may explain is noted for a re-read (`partitions.choose`, issue 22)."""
    online, offline = PartitionState.ONLINE, PartitionState.OFFLINE
    tps = image.tps(rows)
    order = sorted(range(len(tps)), key=tps.__getitem__)
    isrs = isr[rows].tolist()
    lives = V.member(replicas[rows], d.live).tolist()
    reps = replicas[rows].tolist()
    recheck = d.config.rules >= 2
    confirmed, unconfirmed = d.confirmed, d.unconfirmed
    ok, unclean, was_online = ok.tolist(), unclean.tolist(), was_online.tolist()
    for k in order:
        tp = tps[k]
        if was_online[k]:
            d.record(online, offline, tp)
        if ok[k]:
            d.record(offline, online, tp, detail=P.UNCLEAN if unclean[k] else "")
            continue
        members = _cut(isrs[k])
        d.record(offline, online, tp, ok=False, detail=P.refusal(P.OFFLINE, members))
        if recheck and tp not in confirmed and any(
                r not in members for r, alive in zip(reps[k], lives[k]) if alive and r != PAD):
            unconfirmed[tp] = None

