"""A new controller's start of the state machines, decided over the columns.

`failover.on_elected` (Kafka's onControllerFailover) stays the specification. Its steps 2 and 3
walk every partition: (a) each replica on a live broker is told its partition's state
(LeaderAndIsr); (b) each replica on a dead broker is stopped, goes Offline and leaves the ISR (a
dead leader leaves its partition leaderless), and the partition's other replicas are told; a
predecessor's half-done reassignment is repaired; (c) Offline partitions (their leader is not
live) go through the offline election, and New ones (no state znode: a predecessor died between
a topic's creation and its first election) are initialized. This module makes the same decision
for the common case, whether or not some brokers died with the old controller:

- the ISR shrinks and the elections are array operations over the partitions' rows, in the
  walk's order (sorted partitions; within one, the dead replicas in broker order), each change
  bumping the leader epoch once, as `Draft.write_change` does;
- an election without a live ISR member is unclean where the topic allows it, and otherwise
  refused as the walk refuses it (the partition stays Offline);
- a New partition's first live replica leads, its live replicas form the ISR, and its state
  znode is created; its replicas learn it as new ones (LeaderAndIsr `is_new`); without a live
  replica it stays New;
- the request batch, the state-change log and the writes are filled in the order the walk fills
  them, from the columns, so the commands and their digest are the same.

Partitions of topics queued for deletion are told their state in (a), as the walk tells them,
and left out of (b) and (c), as the walk leaves them out (their deletion resumes afterwards).
Anything else (a state written by a newer controller, an ISR member that is not assigned and
that the walk's repair of half-done reassignments would act on, a partition the columns cannot
hold) returns False before touching the draft, and the caller walks the partitions. (A
leaderless partition whose last in-sync replica a reassignment removed keeps it as its only ISR
member; the repair leaves it, and so does this path.) tests/core/test_columnar_failover.py
checks on random clusters that `step()` gives the same state and commands with and without
this path.
"""
from __future__ import annotations

from collections import defaultdict
from itertools import compress

import numpy as np

from . import partitions as P
from . import vector_election as V
from .columns import P_CODE, PAD, R_CODE, R_OFFLINE_FROM, REPLICA_STATES, _cut
from .draft import Draft
from .intents import Strategy, WriteIntent
from .machines import PartitionState, ReplicaState
from .partition_batch import PartitionBatch, by_broker, by_state_and_broker, picker
from .values import INITIAL_LEADER_EPOCH, NO_LEADER, NO_ZK_VERSION

ENABLED = True
"""Tests switch this off to compare with the walk of `failover.on_elected`."""

_ONLINE, _OFFLINE, _NEW = P_CODE[PartitionState.ONLINE], P_CODE[PartitionState.OFFLINE], P_CODE[PartitionState.NEW]
_R_OFFLINE = R_CODE[ReplicaState.OFFLINE]
_ELECT = (WriteIntent.ELECT, Strategy.OFFLINE)
_INIT = (WriteIntent.INIT,)
_SHRINK = WriteIntent.SHRINK


def start_machines(d: Draft) -> bool:
    """Steps 2 and 3 of `on_elected` over the columns if the cluster allows it (see the module
    docstring); False, with the draft untouched, if not."""
    if not ENABLED or d.has_writes or d.log or d.requests.lai or d.requests.stop:
        return False  # (nor any replica on a failed log dir: a new controller starts knowing none)
    image = d.partitions
    if image.odd or not image.count:
        return False
    live = d.live
    epoch = d.epoch
    present = image.column("present")
    rows = np.flatnonzero(present)
    pstate = image.column("pstate")[rows]
    has = image.column("has_state")[rows]
    if (has & (pstate != _ONLINE) & (pstate != _OFFLINE)).any() or (~has & (pstate != _NEW)).any():
        return False
    # the partitions of topics queued for deletion: told their state, nothing more
    kept = ~image.topic_mask(d.topics_to_delete)[rows] if d.topics_to_delete else np.ones(len(rows), bool)
    if (image.column("controller_epoch")[rows][kept] > epoch).any():
        return False  # states written by a newer controller are refused one by one
    replicas = image.column("replicas")[rows]
    isr = image.column("isr")[rows]
    stray = V.row_any((isr != PAD) & ~V.contained(isr, replicas)) & kept
    if stray.any() and (stray & ~_nothing_to_repair(image.column("leader")[rows], isr, replicas, pstate)).any():
        return False  # a half-done reassignment to repair
    assigned = replicas != PAD
    dead_at = assigned & ~V.member(replicas, live) & kept[:, None]
    if (dead_at & ~V.one_of(image.column("rstate")[rows], R_OFFLINE_FROM)).any():
        return False

    tps, order = image.tps_sorted(rows)
    if order is not None:
        rows, pstate, has, replicas, isr, dead_at, kept = (rows[order], pstate[order], has[order], replicas[order],
                                                          isr[order], dead_at[order], kept[order])
    n = len(rows)

    # -- the new columns: each dead replica leaves the ISR (sorted broker order within a
    # partition, as the walk's sorted (partition, replica) pairs), then Offline partitions elect
    leader = image.column("leader")[rows].copy()
    leader_epoch = image.column("leader_epoch")[rows].astype(np.int64)
    isr = isr.copy()
    written = np.zeros(n, bool)
    # the intents of each row's write: which dead brokers' shrinks hit it (one bit each, in the
    # sorted order of `dead`), and whether it was then elected or initialized (`_writes_intents`)
    dead = sorted(set(replicas[dead_at].tolist()))
    shrunk_by = [np.zeros(n, bool) for _ in dead]
    for b, by_b in zip(dead, shrunk_by):
        # (not the partitions of topics queued for deletion: their replicas leave the ISR in the
        # deletion's resumption, after every other partition's writes, as the walk orders them)
        holding = np.flatnonzero(V.row_any(replicas == b) & V.row_any(isr == b) & kept)
        hit = V.shrink(isr, leader, leader_epoch, b, holding)
        written[hit] = True
        by_b[hit] = True
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
    # New partitions (no state znode) are initialized: the first live replica leads, the live
    # replicas form the ISR, at the initial leader epoch; the znode is created
    fresh = np.flatnonzero(~has & kept)
    live_at = V.member(replicas[fresh], live)
    init_ok, init_leader = V.first(live_at, replicas[fresh])
    inited = fresh[init_ok]
    leader[inited] = init_leader[init_ok]
    isr[inited] = V.pack(replicas[fresh], live_at)[init_ok]
    leader_epoch[inited] = INITIAL_LEADER_EPOCH
    written[inited] = True

    # -- the request batch, in the walk's order ---------------------------------------------------
    # (a) every partition's live replicas are told its state; (b) each dead replica is stopped,
    # and the partition's other replicas (dead ones too, as replicas._to_offline sends) are told;
    # (c) each elected partition's live replicas. Only (a) and (b) can add a broker or a partition.
    # (a partition without a state is told nothing in (a))
    pick = picker(tps)
    firsts = by_broker(replicas, (replicas != PAD) & has[:, None] & V.member(replicas, live))
    rstate = image.column("rstate")[rows]
    dead_rows = np.flatnonzero(V.row_any(dead_at))
    per_row = V.row_count(dead_at[dead_rows])
    if not len(dead_rows) or per_row.max() == 1:
        stops, offline_log, lai_extra = _one_dead_replica_a_row(pick, dead_rows, replicas, rstate, dead_at)
    else:
        stops, offline_log, lai_extra = _dead_replicas_walked(tps, dead_rows, replicas, rstate, has, live)
    stateless = pick(dead_rows[~has[dead_rows]])  # partitions without a state that lose a replica: UpdateMetadata of each
    lai = d.requests.lai  # (empty: checked above) each broker's batch is distinct rows, filled whole
    for b, hit in firsts:
        lai[b] = PartitionBatch()
        lai[b].extend(pick(hit), distinct=True, rows=rows[hit])
    for b, sent in lai_extra.items():  # dead brokers, in the order (b) meets them
        lai[b] = PartitionBatch()
        lai[b].extend(sent)  # (a partition with two other dead replicas lists b twice)
    told = tps if has.all() else list(compress(tps, has.tolist()))
    if told or stateless or len(inited):
        d.requests.um_everyone = True  # as RequestBatch.send_leader_and_isr: UpdateMetadata of each to everyone
    if not d.requests.um_all:
        d.requests.um_tps.extend(told, distinct=True, rows=rows if told is tps else rows[has])
        d.requests.um_tps.extend(stateless, distinct=True)
    # (c)'s initialized partitions: LeaderAndIsr (new replicas) to their live replicas
    for k, row in zip(inited.tolist(), isr[inited].tolist()):
        tp = tps[k]
        for b in _cut(row):
            per = lai.get(b)
            if per is None:
                per = lai[b] = PartitionBatch()
            per.add(tp, True)
        if not d.requests.um_all:
            d.requests.um_tps.add(tp)
    for r, sent in stops.items():
        d.requests.stop[(r, False)] = batch = PartitionBatch()  # (the draft stops nothing yet: checked above)
        batch.extend(sent, distinct=True)  # (one entry a partition and dead replica)
    target = ReplicaState.OFFLINE
    for (code, r), logged in offline_log.items():
        d.record_many(REPLICA_STATES[code], target, logged, r)
    if len(fresh) or not ok.all() or unclean.any():
        _log_elections(d, tps, tried, ok, unclean, tried_isr, fresh, init_ok)
    elif len(elect):
        d.record_many(PartitionState.OFFLINE, PartitionState.ONLINE, pick(elect))

    # -- the writes, in the order the walk makes them (shrinks, then elections) -----------------
    w = np.flatnonzero(written)
    shrunk = np.zeros(n, bool)
    for by_b in shrunk_by:
        shrunk |= by_b
    w_order = np.concatenate((w[shrunk[w]], w[~shrunk[w]]))  # a shrink first, then elections only
    w_rows = rows[w_order]
    w_tps = pick(w_order)
    d.add_intents(_writes_intents(w_tps, w_order, dead, shrunk_by, elect, inited, n))
    expected = None
    if len(inited):  # (their znodes are created)
        expected = image.column("zk_version")[w_rows]
        expected[~has[w_order]] = NO_ZK_VERSION
    written_columns = d.write_rows(w_tps, w_rows, leader[w_order], leader_epoch[w_order], isr[w_order], expected)

    # -- the new state, column by column, in the chunks that changed ----------------------------
    new_rstate = rstate[dead_rows].copy()
    new_rstate[dead_at[dead_rows]] = _R_OFFLINE
    online = np.concatenate((elect, inited)).astype(np.intp)
    d.replace_image(image.with_columns(
        (w_rows, written_columns),
        (rows[online], {"pstate": np.full(len(online), _ONLINE, np.int8), "has_state": np.ones(len(online), bool)}),
        (rows[dead_rows], {"rstate": new_rstate}),
    ))
    return True


def _nothing_to_repair(leader: np.ndarray, isr: np.ndarray, replicas: np.ndarray, pstate: np.ndarray) -> np.ndarray:
    """Rows whose unassigned ISR member `failover._repair_half_done_reassignments` leaves as it
    is: the ISR's only member (`replicas.shrink_isr` keeps a last member) and not the leader,
    and no Online leader outside the assignment to move. Such a row is what a reassignment that
    removed the last in-sync replica of a leaderless partition leaves; it stays until that
    replica's partition is elected again, so every new controller meets it, and the walk's
    repair writes nothing for it. Step (b) cannot change it first: it shrinks assigned dead
    replicas out of the ISR and only a leader that was one of them."""
    alone = V.row_count(isr != PAD) == 1
    led_inside = (leader == NO_LEADER) | V.contained(leader[:, None], replicas)[:, 0] | (pstate != _ONLINE)
    return alone & (leader != isr[:, 0]) & led_inside


def _log_elections(d: Draft, tps: list, tried: np.ndarray, ok: np.ndarray, unclean: np.ndarray, isr: np.ndarray,
                   fresh: np.ndarray, init_ok: np.ndarray) -> None:
    """The state-change log of the walk's step 3 (`partitions.to_online` over the Offline and
    New partitions, in partition order: `tried` and `fresh` index `tps`) when it is not one
    group of clean elections: a refusal's line names the ISR, and elections, initializations
    and refusals interleave in partition order. (No re-read: a new controller's ISRs were just
    read from ZooKeeper, and `on_elected` takes its refusals as final.)"""
    offline, new, online = PartitionState.OFFLINE, PartitionState.NEW, PartitionState.ONLINE
    lines: dict[int, tuple] = {}
    for k, won, alone, members in zip(tried.tolist(), ok.tolist(), unclean.tolist(), isr.tolist()):
        lines[k] = (offline, True, P.UNCLEAN if alone else "") if won else \
            (offline, False, P.refusal(P.OFFLINE, _cut(members)))
    for k, won in zip(fresh.tolist(), init_ok.tolist()):
        lines[k] = (new, True, "") if won else (new, False, P.NO_LIVE_REPLICA)
    for k in sorted(lines):
        before, won, detail = lines[k]
        d.record(before, online, tps[k], ok=won, detail=detail)


def _writes_intents(w_tps: list, w_order: np.ndarray, dead: list, shrunk_by: list, elect: np.ndarray,
                    inited: np.ndarray, n: int) -> dict:
    """`{tp: (intent, ...)}` of the writes `w_order` (rows; `w_tps` their partitions): each dead
    broker's shrink that hit the row, in broker order, then the election or the initialization,
    as the walk's `Draft.write_change` records them. Rows with the same intents share one tuple,
    made once per distinct combination (a few: which dead brokers, and how the row ends)."""
    how = np.zeros(n, np.int8)
    how[elect] = 1
    how[inited] = 2
    key = how[w_order].astype(np.int64)
    if len(dead) <= 60:  # (a bit per dead broker above the two bits of `how`)
        for i, by_b in enumerate(shrunk_by):
            key |= by_b[w_order].astype(np.int64) << (i + 2)
        distinct, inverse = np.unique(key, return_inverse=True)
        made = []
        for code in distinct.tolist():
            shrinks = tuple((_SHRINK, b) for i, b in enumerate(dead) if code >> (i + 2) & 1)
            made.append(shrinks + ((_ELECT,) if code & 3 == 1 else (_INIT,) if code & 3 == 2 else ()))
        return dict(zip(w_tps, map(made.__getitem__, inverse.reshape(-1).tolist())))
    hits = np.stack([by_b[w_order] for by_b in shrunk_by], axis=1).tolist()
    return {tp: tuple((_SHRINK, b) for b, h in zip(dead, hit) if h)
            + ((_ELECT,) if k == 1 else (_INIT,) if k == 2 else ())
            for tp, hit, k in zip(w_tps, hits, key.tolist())}


def _one_dead_replica_a_row(pick, dead_rows: np.ndarray, replicas: np.ndarray, rstate: np.ndarray,
                            dead_at: np.ndarray) -> tuple[dict, dict, dict]:
    """Step (b) of the walk when every row has at most one dead replica (one broker died with
    the old controller, the common case): each dead replica is stopped and logged Offline, and
    no partition has another dead replica to tell. Grouped over the columns (`by_broker`): the
    brokers and the log's (state, broker) groups in the order the walk first meets them."""
    if not len(dead_rows):
        return {}, {}, {}
    at = dead_at[dead_rows]
    dead_id = replicas[dead_rows][at][:, None]  # (row-major: one a row)
    code = rstate[dead_rows][at][:, None]
    one = np.ones((len(dead_rows), 1), bool)
    stops = {r: pick(dead_rows[hit]) for r, hit in by_broker(dead_id, one)}
    offline_log = {(c, r): pick(dead_rows[hit]) for c, r, hit in by_state_and_broker(code, dead_id, one)}
    return stops, offline_log, {}


def _dead_replicas_walked(tps: list, dead_rows: np.ndarray, replicas: np.ndarray, rstate: np.ndarray,
                          has: np.ndarray, live) -> tuple[dict, dict, dict]:
    """Step (b) of the walk, a dead row at a time (rows with two or more dead replicas): each dead
    replica, in broker order, is stopped and logged Offline, and the partition's other dead
    replicas are told (LeaderAndIsr, as `replicas._to_offline` sends)."""
    lai_extra: defaultdict[int, list] = defaultdict(list)
    stops: defaultdict[int, list] = defaultdict(list)
    offline_log: defaultdict[tuple, list] = defaultdict(list)
    shapes: dict[tuple, tuple] = {}
    for k, row, codes, with_state in zip(dead_rows.tolist(), replicas[dead_rows].tolist(),
                                         rstate[dead_rows].tolist(), has[dead_rows].tolist()):
        tp = tps[k]
        key = tuple(row)
        plan = shapes.get(key)
        if plan is None:
            reps = _cut(row)
            plan = shapes[key] = tuple((r, j, tuple(x for x in reps if x != r and x not in live))
                                       for r, j in sorted((r, j) for j, r in enumerate(reps) if r not in live))
        for r, j, dead_others in plan:
            stops[r].append(tp)
            if with_state:
                for b in dead_others:
                    lai_extra[b].append(tp)
            offline_log[(codes[j], r)].append(tp)
    return stops, offline_log, lai_extra
