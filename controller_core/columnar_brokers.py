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
- a replica on a failed log dir (rules 4, `replicas_on_offline_dirs`) is not live for its own
  partition: it is masked out of that row's election, its new ISR and its LeaderAndIsr
  recipients, and a refusal names it, as `partitions.choose` does;
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

from itertools import compress
from typing import Collection

import numpy as np

from . import deletion
from . import partitions as P
from . import vector_election as V
from .columns import P_CODE, PAD, R_CODE, R_OFFLINE_FROM, REPLICA_STATES, _cut
from .draft import DecisionParked, Draft
from .intents import Strategy, WriteIntent
from .request_batch import ALL
from .partition_batch import PartitionBatch, by_broker, by_state_and_broker, picker
from .machines import PartitionState, ReplicaState

ENABLED = True
"""Tests switch this off to compare with the scalar path."""

_ONLINE, _NEW, _OFFLINE = P_CODE[PartitionState.ONLINE], P_CODE[PartitionState.NEW], P_CODE[PartitionState.OFFLINE]
_R_OFFLINE = R_CODE[ReplicaState.OFFLINE]
_ELECT = (WriteIntent.ELECT, Strategy.OFFLINE)
_SHRINK = WriteIntent.SHRINK


def on_broker_failure(d: Draft, dead: Collection[int], last: bool = False) -> bool:
    """Decide the failure of `dead` (already removed from the draft's brokers) if it is the
    common case (see the module docstring); False, with the draft untouched, if not. With
    `last` (nothing after it in the decision can refuse an election), a refusal that the
    cached ISR may explain parks the decision at once (`draft.DecisionParked`), the partitions
    to re-read noted as the state-change log's walk would note them."""
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
    touched = V.row_any(dead_replica)
    leader_live = V.member(leader[:, None], live)[:, 0]
    leaderless = present & has & ~leader_live & (pstate != _NEW)
    is_online = pstate == _ONLINE
    if (present & ~is_online & ~(leaderless & (pstate == _OFFLINE))).any():
        return False  # New partitions, or Offline ones with a live leader, wait for an election: the rule
    if (touched & ~has).any() or ((leaderless | touched) & (cepoch > epoch)).any():
        return False
    if (dead_replica & ~V.one_of(rstate, R_OFFLINE_FROM)).any():
        return False
    tried_rows = np.flatnonzero(leaderless)
    isr = image.column("isr")
    # replicas on failed log dirs (rules 4): live brokers, but not live for their own partition's
    # election, its LeaderAndIsr or its re-read (partitions.choose); nearly always none
    gone = gone_tried = None
    if d.replicas_on_offline_dirs:
        gone = d.offline_dir_cells(image, replicas)
        gone_tried = (gone[tried_rows], d.offline_dir_cells(image, isr)[tried_rows])
    ok, new_leader, new_isr, _ = V.offline(replicas[tried_rows], isr[tried_rows], live,
                                           np.zeros(len(tried_rows), bool), *(gone_tried or ()))
    unclean = np.zeros(len(tried_rows), bool)
    if not ok.all():  # where the topic allows it, an unclean election (the first live replica)
        allowed = {t for t in {tp.topic for tp in image.tps(tried_rows[~ok])} if d.unclean_allowed(t)}
        if allowed:
            may = image.topic_mask(allowed)[tried_rows]
            ok, new_leader, new_isr, unclean = V.offline(replicas[tried_rows], isr[tried_rows], live, may,
                                                         *(gone_tried or ()))
    if ok.all():  # (the usual case: no copies)
        refused_rows, elect_rows = tried_rows[:0], tried_rows
    else:
        refused_rows = tried_rows[~ok]
        elect_rows, new_leader, new_isr = tried_rows[ok], new_leader[ok], new_isr[ok]
        if last and not d.confirmed and d.config.rules >= 2:
            _park_if_re_read(d, image, refused_rows, replicas, isr, live, gone)

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
                       np.flatnonzero(present & V.row_any(replicas == b) & V.row_any(f_isr == b)))
        written[hit] = True
        shrinks.append((b, hit))

    # -- the decision order: partitions sorted, the elected ones first (partitions.
    # offline_then_elect), then every partition with a dead replica (replicas._to_offline) -----
    e_tps, e_rows = _in_partition_order(image, elect_rows)
    t_tps, t_rows = _in_partition_order(image, np.flatnonzero(touched))
    is_elected = np.zeros(n, bool)
    is_elected[elect_rows] = True

    # -- the request batch: LeaderAndIsr per broker, StopReplica, the state-change log ----------
    offline_log = _batch(d, live, e_tps, e_rows, replicas[e_rows], t_tps, t_rows, replicas[t_rows],
                         dead_replica[t_rows], rstate[t_rows], is_elected[t_rows],
                         None if gone is None else (gone[e_rows], gone[t_rows]))
    if e_tps or t_tps:
        d.requests.um_everyone = True
        if not d.requests.um_all:
            # the elected partitions, then the touched ones not elected: distinct, no hashing
            told = ~is_elected[t_rows]
            d.requests.um_tps.extend(e_tps + list(compress(t_tps, told.tolist())), distinct=True,
                            rows=np.concatenate((e_rows, t_rows[told])))
    online, offline = PartitionState.ONLINE, PartitionState.OFFLINE
    if len(refused_rows) or unclean.any() or (pstate[elect_rows] != _ONLINE).any():
        _log_elections(d, image, tried_rows, ok, unclean, pstate[tried_rows] == _ONLINE, replicas, isr, gone)
    elif e_tps:
        d.record_many(online, offline, e_tps)
        d.record_many(offline, online, e_tps)
    target = ReplicaState.OFFLINE
    for code, r, tps in offline_log:
        d.record_many(REPLICA_STATES[code], target, tps, r)

    # -- the writes, elected partitions first, each with the intents that produced it -----------
    shrink_rows = t_rows[written[t_rows] & ~is_elected[t_rows]]
    w_tps = e_tps + image.tps(shrink_rows)
    w_rows = np.concatenate((e_rows, shrink_rows)).astype(np.intp)
    d.add_intents(dict.fromkeys(e_tps, (_ELECT,)))
    intents = d.intents
    if shrinks:
        acc: dict[int, tuple] = {}
        for b, hit in shrinks:
            step_intent = ((_SHRINK, b),)
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
        d_rows = np.flatnonzero(V.row_any(gone))
        if len(d_rows):
            deletion.fail_replica_deletion(d, sorted(
                (tp, r) for tp, row in zip(image.tps(d_rows), replicas[d_rows].tolist()) for r in _cut(row)
                if r in dead))
    if not len(tried_rows):
        d.requests.send_update_metadata_to_all(ALL)  # as brokers.on_broker_failure: no leader to elect
    return True


def _park_if_re_read(d: Draft, image, refused: np.ndarray, replicas: np.ndarray, isr: np.ndarray, live,
                     gone: np.ndarray | None) -> None:
    """The refused elections that a live replica missing from the cached ISR may explain, noted
    for a re-read in partition order (as `_log_elections` notes them), then `DecisionParked`:
    the decision will be dropped whatever follows (step._drafted), so the writes, requests and
    log it would build are not built. At 10,000 partitions that is about 10 ms of a failure met
    with a stale ISR (its re-read and second decision follow, as before)."""
    reps = replicas[refused]
    explained = V.live_outside_isr(reps, isr[refused], _live_cells(reps, live, None if gone is None else gone[refused]))
    if not explained.any():
        return
    d.unconfirmed.update(dict.fromkeys(sorted(image.tps(refused[explained]))))
    raise DecisionParked


def _in_partition_order(image, rows: np.ndarray) -> tuple[list, np.ndarray]:
    """The partitions of `rows` (ascending) and their rows, sorted by partition."""
    tps, order = image.tps_sorted(rows)
    return tps, rows if order is None else rows[order]


def _batch(d: Draft, live, e_tps: list, e_rows: np.ndarray, e_reps: np.ndarray, t_tps: list, t_rows: np.ndarray,
           t_reps: np.ndarray, t_dead: np.ndarray, t_codes: np.ndarray, t_elected: np.ndarray,
           gone: tuple | None = None) -> list:
    """The request batch and replica log of `brokers.on_broker_failure`, from the columns:
    LeaderAndIsr of each elected partition (`e_*`, partition order) to its live replicas; for
    each touched partition (`t_*`, partition order, `t_dead` marking the replicas on the brokers
    that just died) and each of its dead replicas (by broker id), StopReplica to it, LeaderAndIsr
    to the partition's other replicas, dead or alive (as `replicas._to_offline` sends), and its
    Offline transition in the state-change log. Each broker's batch lists a partition once, at
    its first mention, and brokers, stops and log groups come in the order of their first
    mention in that walk: `by_broker` over matrices laid out in the walk's order (a touched
    row's replicas once per dead replica, the dead replica left out) finds both without a
    Python step per partition. Returns the log's groups, `(replica state code, broker,
    partitions)`, for the caller to record after the elections' lines, as the walk does."""
    m = len(t_reps)
    lai = d.requests.lai
    # the walk's dead replicas of each touched row, by broker id, with their replica states
    reps64 = t_reps.astype(np.int64)
    per_row = V.row_count(t_dead)
    n_dead = int(per_row.max()) if m else 0
    if n_dead == 1 and per_row.min() == 1:
        # one dead replica a row (one broker failed, the common case): it is the row's only
        # column, nothing to sort
        dead_ids = reps64[t_dead][:, None]
        dead_sorted = np.ones((m, 1), bool)
        dead_codes = t_codes[t_dead].astype(np.int64)[:, None]
    else:
        by_id = np.argsort(np.where(t_dead, reps64, np.iinfo(np.int64).max), axis=1, kind="stable")
        dead_ids = np.take_along_axis(reps64, by_id, axis=1)
        dead_sorted = np.take_along_axis(t_dead, by_id, axis=1)
        dead_codes = np.take_along_axis(t_codes.astype(np.int64), by_id, axis=1)
    # LeaderAndIsr of a touched row goes, per dead replica, to every other replica; a live one of
    # an elected row was told with the elections, first
    e_gone, t_gone = gone if gone is not None else (None, None)
    t_live = _live_cells(t_reps, live, t_gone)
    assigned = (t_reps != PAD) & ~(t_elected[:, None] & t_live)
    blocks = [assigned & (t_reps != dead_ids[:, k:k + 1]) & dead_sorted[:, k:k + 1] for k in range(n_dead)]
    e_groups = by_broker(e_reps, (e_reps != PAD) & _live_cells(e_reps, live, e_gone))
    t_groups = by_broker(np.tile(t_reps, (1, n_dead)), np.concatenate(blocks, axis=1)) if n_dead else []
    # each broker's positions in the elected and in the touched lists, brokers in walk order
    per_broker: dict[int, list] = {b: [rows, None] for b, rows in e_groups}
    for b, rows in t_groups:
        rows = rows[np.r_[True, rows[1:] != rows[:-1]]]  # (a row listed once per other dead replica)
        per_broker.setdefault(b, [None, None])[1] = rows
    no_rows = np.zeros(0, np.intp)
    e_pick, t_pick = picker(e_tps), picker(t_tps)
    for b, (in_e, in_t) in per_broker.items():
        tps, rows = [], []
        if in_e is not None:
            tps, rows = e_pick(in_e), [e_rows[in_e]]
        if in_t is not None:
            tps += t_pick(in_t)
            rows.append(t_rows[in_t])
        per = lai.get(b)
        if per is None:
            per = lai[b] = PartitionBatch()
        per.extend(tps, distinct=True, rows=np.concatenate(rows) if rows else no_rows)
    if not n_dead:
        return []
    # StopReplica to each dead replica, and its log line, in the walk's order
    stop = d.requests.stop
    for r, rows in by_broker(dead_ids[:, :n_dead], dead_sorted[:, :n_dead]):
        per = stop.get((r, False))
        if per is None:
            per = stop[(r, False)] = PartitionBatch()
        per.extend(t_pick(rows), distinct=True, rows=t_rows[rows])
    return [(code, r, t_pick(rows))
            for code, r, rows in by_state_and_broker(dead_codes[:, :n_dead], dead_ids[:, :n_dead], dead_sorted[:, :n_dead])]


def _live_cells(reps: np.ndarray, live, gone: np.ndarray | None) -> np.ndarray:
    """Replicas on live brokers, less those on failed log dirs (`gone`, a mask over `reps`)."""
    cells = V.member(reps, live)
    return cells if gone is None else cells & ~gone


def _log_elections(d: Draft, image, rows: np.ndarray, ok: np.ndarray, unclean: np.ndarray, was_online: np.ndarray,
                   replicas: np.ndarray, isr: np.ndarray, gone: np.ndarray | None) -> None:
    """The state-change log of `partitions.offline_then_elect` over `rows` (some elections
    refused or unclean, or some partitions already Offline), walked in its order, one partition
    at a time: a refusal's line names the ISR, so its groups interleave with the others'. A
    refusal the cached ISR may explain is noted for a re-read (`partitions.choose`, issue 22)."""
    online, offline = PartitionState.ONLINE, PartitionState.OFFLINE
    tps = image.tps(rows)
    order = sorted(range(len(tps)), key=tps.__getitem__)
    isrs = isr[rows].tolist()
    reps = replicas[rows]
    gone = None if gone is None else gone[rows]
    unsure = V.live_outside_isr(reps, isr[rows], _live_cells(reps, d.live, gone)).tolist()
    on_failed = [()] * len(tps) if gone is None else V.marked(reps, gone)  # (named by a refusal)
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
        d.record(offline, online, tp, ok=False, detail=P.refusal(P.OFFLINE, members, on_failed[k]))
        if recheck and unsure[k] and tp not in confirmed:
            unconfirmed[tp] = None

