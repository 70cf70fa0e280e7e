"""Every New or Offline partition brought Online at once, decided over the columns.

`partitions.trigger_online_state_change` (Kafka's triggerOnlinePartitionStateChange) stays the
specification: after a broker starts, every New or Offline partition of a topic not queued for
deletion is taken through `partitions.to_online` in partition order, an Offline one by the
offline election (`partitions.elect`), a New one by its first election (`partitions.initialize`).
A cluster that lost every replica of many partitions (a rack, a whole generation of brokers)
holds thousands of those, and each broker that comes back retries all of them: one `choose`,
one `PartitionInfo`, one log call each. This module makes the same decision as array operations:

- the offline election of the Offline rows (`vector_election.offline`), unclean where the topic
  allows it; a refusal is logged with its cached ISR, and noted for a re-read where a live
  replica is missing from that ISR (`partitions.choose`, issue 22), as the rule does;
- a New row's first live replica leads and its live replicas form the ISR, at the initial leader
  epoch (its state znode is created); without a live replica it is refused and stays New;
- a replica on a failed log dir (rules 4) is not live for its own partition's election, ISR and
  LeaderAndIsr, and a refusal names it, as `partitions.choose` and `initialize` do;
- after a bounce's failure decided over the columns, a partition both write is written once
  (`PartitionWrites.then`), as `Draft.write_change` merges a second change into the first;
- the writes, the LeaderAndIsr of each elected partition to its live replicas (`is_new` for the
  initialized ones), their UpdateMetadata and the state-change log are filled in the order the
  rule fills them, so the commands and their digest are the same.

Anything else (a draft that already wrote one by one; an image with partitions the columns
cannot hold, an Offline partition without a state or written by a newer controller) returns
False before touching the draft, and the caller runs the rule. tests/core/test_columnar_online.py
checks on random clusters that `step()` gives the same state and commands with and without this
path.
"""
from __future__ import annotations

import numpy as np

from . import partitions as P
from . import vector_election as V
from .columns import P_CODE, _cut
from .draft import Draft
from .intents import WriteIntent
from .machines import PartitionState
from .partition_batch import PartitionBatch, by_broker
from .values import INITIAL_LEADER_EPOCH, NO_ZK_VERSION

ENABLED = True
"""Tests switch this off to compare with the rule's walk."""

_NEW, _OFFLINE, _ONLINE = P_CODE[PartitionState.NEW], P_CODE[PartitionState.OFFLINE], P_CODE[PartitionState.ONLINE]
_ELECT = ((WriteIntent.ELECT, P.OFFLINE),)
_INIT = ((WriteIntent.INIT,),)


def elect_waiting(d: Draft) -> bool:
    """`trigger_online_state_change(d)` (every topic) over the columns if the draft allows it
    (see the module docstring); False, with the draft untouched, if not."""
    if not ENABLED or d.writes:
        return False  # (a partition written one by one may be elected again: the rule merges the writes)
    image = d.partitions
    if image.odd:
        return False
    pstate = image.column("pstate")
    waiting = image.column("present") & ((pstate == _NEW) | (pstate == _OFFLINE))
    if d.topics_to_delete and waiting.any():
        waiting &= ~image.topic_mask(d.topics_to_delete)
    rows = np.flatnonzero(waiting)
    if not len(rows):
        return True  # (the rule's walk would find nothing either)
    epoch = d.epoch
    pstate = pstate[rows]
    has = image.column("has_state")[rows]
    fresh_at = pstate == _NEW
    if (~fresh_at & ~has).any() or (~fresh_at & (image.column("controller_epoch")[rows] > epoch)).any():
        return False  # refused one by one, each with its own reason: the rule
    tps, order = image.tps_sorted(rows)
    if order is not None:
        rows, fresh_at, has = rows[order], fresh_at[order], has[order]
    live = d.live
    replicas = image.column("replicas")[rows]
    cached_isr = image.column("isr")[rows]
    live_at = V.member(replicas, live)
    # replicas on failed log dirs (rules 4): live brokers, but not live for their own partition's
    # election, its LeaderAndIsr or its re-read (partitions.choose, initialize); nearly always none
    gone = ()
    if d.replicas_on_offline_dirs:
        gone = (d.offline_dir_cells(image, image.column("replicas"))[rows],
                d.offline_dir_cells(image, image.column("isr"))[rows])
        live_at &= ~gone[0]

    # -- the elections: Offline rows by the offline rule (unclean where allowed), New rows by
    # their first live replica --------------------------------------------------------------
    tried = ~fresh_at
    may = np.zeros(len(rows), bool)
    ok, leader, isr, unclean = V.offline(replicas, cached_isr, live, may, *gone)
    if not ok[tried].all():
        allowed = {t for t in {tps[k].topic for k in np.flatnonzero(tried & ~ok).tolist()} if d.unclean_allowed(t)}
        if allowed:
            may = np.fromiter((tp.topic in allowed for tp in tps), bool, len(tps))
            ok, leader, isr, unclean = V.offline(replicas, cached_isr, live, may, *gone)
    init_ok, init_leader = V.first(live_at, replicas)
    ok = np.where(fresh_at, init_ok, ok)
    unclean &= ~fresh_at
    leader = np.where(fresh_at, init_leader, leader)
    isr = np.where(fresh_at[:, None], V.pack(replicas, live_at), isr)
    leader_epoch = image.column("leader_epoch")[rows].astype(np.int64) + 1
    leader_epoch[fresh_at] = INITIAL_LEADER_EPOCH

    # -- the state-change log, in partition order ---------------------------------------------
    online = PartitionState.ONLINE
    if ok.all() and not unclean.any() and not fresh_at.any():
        d.record_many(PartitionState.OFFLINE, online, tps)
    else:
        recheck = d.config.rules >= 2
        confirmed, unconfirmed = d.confirmed, d.unconfirmed
        on_failed = V.marked(replicas, gone[0]) if gone else [()] * len(tps)  # (named by a refusal)
        for tp, won, alone, new, members, doubt, failed in zip(
                tps, ok.tolist(), unclean.tolist(), fresh_at.tolist(), cached_isr.tolist(),
                V.live_outside_isr(replicas, cached_isr, live_at).tolist(), on_failed):
            before = PartitionState.NEW if new else PartitionState.OFFLINE
            if won:
                d.record(before, online, tp, detail=P.UNCLEAN if alone else "")
            elif new:
                d.record(before, online, tp, ok=False, detail=P.NO_LIVE_REPLICA)
            else:
                members = _cut(members)
                d.record(before, online, tp, ok=False, detail=P.refusal(P.OFFLINE, members, failed))
                if recheck and doubt and tp not in confirmed:
                    unconfirmed[tp] = None

    # -- the writes and the request batch, in partition order -----------------------------------
    won = np.flatnonzero(ok)
    if not len(won):
        return True
    w_tps = [tps[k] for k in won.tolist()] if len(won) < len(tps) else tps
    w_rows = rows[won]
    w_fresh = fresh_at[won]
    expected = None
    if w_fresh.any():  # (their znodes are created)
        expected = image.column("zk_version")[w_rows]
        expected[w_fresh] = NO_ZK_VERSION
    first = d.bulk_writes
    if first is None:
        d.intents.update(zip(w_tps, (_INIT if new else _ELECT for new in w_fresh.tolist())))
    else:
        # a bounce: its failure wrote over the columns first. A partition written there too is
        # written once, expecting the znode's version as the first write did (write_change's
        # merge, in PartitionWrites.then), its intents one after the other
        place = {tp: i for i, tp in enumerate(first.tps)}
        if expected is None:
            expected = image.column("zk_version")[w_rows]
        intents = d.intents
        for k, (tp, new) in enumerate(zip(w_tps, w_fresh.tolist())):
            i = place.get(tp)
            if i is None:
                intents[tp] = _INIT if new else _ELECT
            else:
                expected[k] = first.expected[i]
                intents[tp] = intents[tp] + _ELECT
    written = d.write_rows(w_tps, w_rows, leader[won], leader_epoch[won], isr[won], expected)
    # LeaderAndIsr to each elected partition's live replicas (send_leader_and_isr, partition by
    # partition): a broker's batch is made where the walk first meets it
    lai = d.requests.lai
    for b, hit in by_broker(replicas[won], live_at[won]):
        per = lai.get(b)
        if per is None:
            per = lai[b] = PartitionBatch()
        sent = list(map(w_tps.__getitem__, hit.tolist()))
        fresh = w_fresh[hit]
        if not fresh.any():
            per.extend(sent, distinct=True, rows=w_rows[hit])
        else:
            for tp, new in zip(sent, fresh.tolist()):
                per.add(tp, new)
    d.requests.um_everyone = True
    if not d.requests.um_all:
        d.requests.um_tps.extend(w_tps, distinct=True, rows=w_rows)
    d.replace_image(image.with_columns(
        (w_rows, written),
        (w_rows, {"pstate": np.full(len(w_rows), _ONLINE, np.int8), "has_state": np.ones(len(w_rows), bool)}),
    ))
    return True
