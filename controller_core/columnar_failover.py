"""A new controller's start of the state machines, decided over the columns.

`failover.on_elected` (Kafka's onControllerFailover) stays the specification. Its steps 2 and 3
walk every partition: (a) each replica on a live broker is told its partition's state
(LeaderAndIsr); (b) each replica on a dead broker is stopped, goes Offline and leaves the ISR (a
dead leader leaves its partition leaderless), and the partition's other replicas are told; a
predecessor's half-done reassignment is repaired; (c) Offline partitions (their leader is not
live) go through the offline election. This module makes the same decision for the common case,
a controller taking over a cluster whose partitions all have a state, whether or not some
brokers died with the old controller:

- the ISR shrinks and the elections are array operations over the partitions' rows, in the
  walk's order (sorted partitions; within one, the dead replicas in broker order), each change
  bumping the leader epoch once, as `Draft.write_change` does;
- an election without a live ISR member is unclean where the topic allows it, and otherwise
  refused as the walk refuses it (the partition stays Offline);
- the request batch, the state-change log and the writes are filled in the order the walk fills
  them, from the columns, so the commands and their digest are the same.

Partitions of topics queued for deletion are told their state in (a), as the walk tells them,
and left out of (b) and (c), as the walk leaves them out (their deletion resumes afterwards).
Anything else (a partition without a state, a state written by a newer controller, an ISR member
that is not assigned, a partition the columns cannot hold) returns False before touching the
draft, and the caller walks the partitions. tests/core/test_columnar_failover.py checks on
random clusters that `step()` gives the same state and commands with and without this path.
"""
from __future__ import annotations

from collections import defaultdict
from itertools import compress

import numpy as np

from . import partitions as P
from . import vector_election as V
from .columns import P_CODE, PAD, R_CODE, REPLICA_STATES, _cut
from .draft import Draft
from .partition_batch import PartitionBatch
from .machines import REPLICA_VALID_PREVIOUS, PartitionState, ReplicaState

ENABLED = True
"""Tests switch this off to compare with the walk of `failover.on_elected`."""

_ONLINE, _OFFLINE = P_CODE[PartitionState.ONLINE], P_CODE[PartitionState.OFFLINE]
_R_OFFLINE = R_CODE[ReplicaState.OFFLINE]
_OFFLINE_FROM = np.array(sorted(R_CODE[s] for s in REPLICA_VALID_PREVIOUS[ReplicaState.OFFLINE]), np.int8)
_ELECT = ("elect", "offline")


def start_machines(d: Draft) -> bool:
    """Steps 2 and 3 of `on_elected` over the columns if the cluster allows it (see the module
    docstring); False, with the draft untouched, if not."""
    if not ENABLED or d.has_writes or d.log or d.lai or d.stop:
        return False
    image = d.partitions
    if image.odd or not image.count:
        return False
    live = d.live
    epoch = d.epoch
    present = image.column("present")
    rows = np.flatnonzero(present)
    pstate = image.column("pstate")[rows]
    if not image.column("has_state")[rows].all() or ((pstate != _ONLINE) & (pstate != _OFFLINE)).any():
        return False  # New partitions: their first election is the walk's
    # the partitions of topics queued for deletion: told their state, nothing more
    kept = ~image.topic_mask(d.topics_to_delete)[rows] if d.topics_to_delete else np.ones(len(rows), bool)
    if (image.column("controller_epoch")[rows][kept] > epoch).any():
        return False  # states written by a newer controller are refused one by one
    replicas = image.column("replicas")[rows]
    isr = image.column("isr")[rows]
    if ((isr != PAD) & ~V.contained(isr, replicas))[kept].any():
        return False  # a half-done reassignment to repair
    assigned = replicas != PAD
    dead_at = assigned & ~V.member(replicas, live) & kept[:, None]
    if (dead_at & ~np.isin(image.column("rstate")[rows], _OFFLINE_FROM)).any():
        return False

    tps = image.tps(rows)
    if not image.in_order:  # rows in partition order: no sort
        order = np.array(sorted(range(len(tps)), key=tps.__getitem__), np.intp)
        tps = [tps[k] for k in order.tolist()]
        rows, pstate, replicas, isr, dead_at, kept = (rows[order], pstate[order], replicas[order], isr[order],
                                                     dead_at[order], kept[order])
    n = len(rows)

    # -- the new columns: each dead replica leaves the ISR (sorted broker order within a
    # partition, as the walk's sorted (partition, replica) pairs), then Offline partitions elect
    leader = image.column("leader")[rows].copy()
    leader_epoch = image.column("leader_epoch")[rows].astype(np.int64)
    isr = isr.copy()
    written = np.zeros(n, bool)
    intents: defaultdict[int, list] = defaultdict(list)  # row -> the intents of its write
    dead = sorted(set(replicas[dead_at].tolist()))
    for b in dead:
        # (not the partitions of topics queued for deletion: their replicas leave the ISR in the
        # deletion's resumption, after every other partition's writes, as the walk orders them)
        holding = np.flatnonzero((replicas == b).any(axis=1) & (isr == b).any(axis=1) & kept)
        hit = V.shrink(isr, leader, leader_epoch, b, holding)
        written[hit] = True
        for k in hit.tolist():
            intents[k].append(("shrink", b))
    tried = np.flatnonzero((pstate == _OFFLINE) & kept)
    tried_isr = isr[tried]  # (after the shrinks: what the walk's elections read)
    ok, new_leader, new_isr, unclean = V.offline(replicas[tried], tried_isr, live, np.zeros(len(tried), bool))
    if not ok.all():  # where the topic allows it, an unclean election (the first live replica)
        allowed = {t for t in {tps[k].topic for k in tried[~ok].tolist()} if d.unclean_allowed(t)}
        if allowed:
            may = np.fromiter((tps[k].topic in allowed for k in tried.tolist()), bool, len(tried))
            ok, new_leader, new_isr, unclean = V.offline(replicas[tried], tried_isr, live, may)
    elect = tried[ok]
    leader[elect] = new_leader[ok]
    isr[elect] = new_isr[ok]
    leader_epoch[elect] += 1
    written[elect] = True
    for k in elect.tolist():
        intents[k].append(_ELECT)

    # -- the request batch, in the walk's order ---------------------------------------------------
    # (a) every partition's live replicas are told its state; (b) each dead replica is stopped,
    # and the partition's other replicas (dead ones too, as replicas._to_offline sends) are told;
    # (c) each elected partition's live replicas. Only (a) and (b) can add a broker or a partition.
    firsts = []
    for b in np.unique(replicas[replicas != PAD]).tolist():
        at = replicas == b
        hit = at.any(axis=1)
        if b in live:
            i = int(hit.argmax())
            firsts.append(((0, i, int(at[i].argmax())), b, hit))
    lai_extra: defaultdict[int, list] = defaultdict(list)
    stops: defaultdict[int, list] = defaultdict(list)
    offline_log: defaultdict[tuple, list] = defaultdict(list)
    rstate = image.column("rstate")[rows]
    dead_rows = np.flatnonzero(dead_at.any(axis=1))
    shapes: dict[tuple, tuple] = {}
    for k, row, codes in zip(dead_rows.tolist(), replicas[dead_rows].tolist(), rstate[dead_rows].tolist()):
        tp = tps[k]
        key = tuple(row)
        plan = shapes.get(key)
        if plan is None:
            reps = _cut(row)
            plan = shapes[key] = tuple((r, j, tuple(x for x in reps if x != r and x not in live))
                                       for r, j in sorted((r, j) for j, r in enumerate(reps) if r not in live))
        for r, j, dead_others in plan:
            stops[r].append(tp)
            for b in dead_others:
                lai_extra[b].append(tp)
            lkey = (codes[j], r)
            offline_log[lkey].append(tp)
    lai = d.lai  # (empty: checked above) each broker's batch is distinct rows, filled whole
    for _, b, hit in sorted(firsts, key=lambda f: f[0]):
        lai[b] = PartitionBatch()
        lai[b].extend(list(compress(tps, hit.tolist())), distinct=True, rows=rows[hit])
    for b, sent in lai_extra.items():  # dead brokers, in the order (b) meets them
        lai[b] = PartitionBatch()
        lai[b].extend(sent)  # (a partition with two other dead replicas lists b twice)
    if tps:
        d.um_everyone = True  # as Draft.send_leader_and_isr: UpdateMetadata of each to everyone
        if not d.um_all:
            d.um_tps.extend(tps, distinct=True, rows=rows)
    for r, sent in stops.items():
        d.stop[(r, False)] = dict.fromkeys(sent)
    target = ReplicaState.OFFLINE
    for (code, r), logged in offline_log.items():
        d.record_many(REPLICA_STATES[code], target, logged, r)
    if not ok.all() or unclean.any():
        _log_elections(d, [tps[k] for k in tried.tolist()], ok, unclean, tried_isr)
    elif len(elect):
        d.record_many(PartitionState.OFFLINE, PartitionState.ONLINE, [tps[k] for k in elect.tolist()])

    # -- the writes, in the order the walk makes them (shrinks, then elections) -----------------
    w = np.flatnonzero(written)
    shrink_first = [k for k in w.tolist() if intents[k][0] != _ELECT]
    elected_only = [k for k in elect.tolist() if intents[k][0] == _ELECT]
    w_order = np.array(shrink_first + elected_only, np.intp)
    w_rows = rows[w_order]
    w_tps = [tps[k] for k in w_order.tolist()]
    d.intents.update(zip(w_tps, (tuple(intents[k]) for k in w_order.tolist())))
    written_columns = d.write_rows(w_tps, w_rows, leader[w_order], leader_epoch[w_order], isr[w_order])

    # -- the new state, column by column, in the chunks that changed ----------------------------
    new_rstate = rstate[dead_rows].copy()
    new_rstate[dead_at[dead_rows]] = _R_OFFLINE
    d.replace_image(image.with_columns(
        (w_rows, written_columns),
        (rows[elect], {"pstate": np.full(len(elect), _ONLINE, np.int8)}),
        (rows[dead_rows], {"rstate": new_rstate}),
    ))
    return True


def _log_elections(d: Draft, tps: list, ok: np.ndarray, unclean: np.ndarray, isr: np.ndarray) -> None:
    """The state-change log of the walk's elections of Offline partitions (`partitions.elect`,
    in partition order) when some were refused or unclean: a refusal's line names the ISR, so
    the groups interleave. (No re-read: a new controller's ISRs were just read from ZooKeeper,
    and `on_elected` takes its refusals as final.)"""
    offline, online = PartitionState.OFFLINE, PartitionState.ONLINE
    for tp, won, alone, members in zip(tps, ok.tolist(), unclean.tolist(), isr.tolist()):
        if won:
            d.record(offline, online, tp, detail=P.UNCLEAN if alone else "")
        else:
            d.record(offline, online, tp, ok=False, detail=P.refusal(P.OFFLINE, _cut(members)))
