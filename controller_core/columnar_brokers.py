"""A broker failure decided over the columns of the partition image, inside `step()`.

`brokers.on_broker_failure` (Kafka's onBrokerFailure and onReplicasBecomeOffline) stays the
specification. This module makes the same decision for the common case, a failure of brokers
whose partitions are all Online with a leader-and-ISR, where every election succeeds cleanly:

- which partitions lost their leader, which hold a replica on a dead broker, and the offline
  election of all of them are array operations (`vector_election.offline`);
- the request batch, the writes and the state-change log are filled in the order the scalar
  handlers fill them (so the commands, and their digest, are the same), from plain values
  taken from the columns, not from one `PartitionInfo` per partition;
- the new state is written into the columns of the changed chunks, column by column.

Anything else (a partition New or Offline, without a state, written by a newer controller, in a
topic being deleted, a replica whose state may not go Offline, an election that fails or would
be unclean, which may need the issue-22 re-read) returns False before touching the draft, and
the caller runs the scalar path: the exceptions stay where the readable rules are.
tests/core/test_columnar_brokers.py checks on random clusters that `step()` gives the same
state and commands with and without this path.
"""
from __future__ import annotations

from typing import Collection

import numpy as np

from . import commands as C
from . import vector_election as V
from .columns import P_CODE, PAD, R_CODE, REPLICA_STATES, _cut, _matrix
from .draft import ALL, Draft
from .machines import REPLICA_VALID_PREVIOUS, PartitionState, ReplicaState
from .values import NO_LEADER, NO_ZK_VERSION, LeaderIsr

ENABLED = True
"""Tests switch this off to compare with the scalar path."""

_ONLINE, _NEW = P_CODE[PartitionState.ONLINE], P_CODE[PartitionState.NEW]
_R_OFFLINE = R_CODE[ReplicaState.OFFLINE]
_OFFLINE_FROM = np.array(sorted(R_CODE[s] for s in REPLICA_VALID_PREVIOUS[ReplicaState.OFFLINE]), np.int8)
_ELECT = ("elect", "offline")
_new = tuple.__new__
_Write = C.PartitionWrite


def on_broker_failure(d: Draft, dead: Collection[int]) -> bool:
    """Decide the failure of `dead` (already removed from the draft's brokers) if it is the
    common case (see the module docstring); False, with the draft untouched, if not."""
    if not ENABLED or d.topics_to_delete:
        return False
    image = d.partitions
    if image.odd or not image.count:
        return False
    live = d.live
    epoch = d.epoch
    present = image.column("present")
    has = image.column("has_state")
    leader = image.column("leader")
    pstate = image.column("pstate")
    replicas = image.column("replicas")
    cepoch = image.column("controller_epoch")
    rstate = image.column("rstate")

    dead_replica = V.member(replicas, dead) & present[:, None]
    touched = dead_replica.any(axis=1)
    leaderless = present & has & ~V.member(leader[:, None], live)[:, 0] & (pstate != _NEW)
    if (pstate[present] != _ONLINE).any():
        return False  # New and Offline partitions wait for an election: the scalar path
    if (touched & ~has).any() or ((leaderless | touched) & (cepoch > epoch)).any():
        return False
    if (dead_replica & ~np.isin(rstate, _OFFLINE_FROM)).any():
        return False
    elect_rows = np.flatnonzero(leaderless)
    isr = image.column("isr")
    ok, new_leader, new_isr, _ = V.offline(replicas[elect_rows], isr[elect_rows], live,
                                           np.zeros(len(elect_rows), bool))
    if not ok.all():
        return False  # a refused election (maybe on a stale ISR: issue 22) or an unclean one

    leader_epoch = image.column("leader_epoch")
    version = image.column("zk_version")
    tps = image.tps(elect_rows)
    order = sorted(range(len(tps)), key=tps.__getitem__)
    writes, intents = d.writes, d.intents
    record = d.record
    send = d.send_leader_and_isr
    online, offline = PartitionState.ONLINE, PartitionState.OFFLINE
    lis: dict = {}  # tp -> the leader-and-ISR as this decision leaves it, for written partitions
    recipients_of: dict[tuple, tuple] = {}
    assigned_of: dict[tuple, tuple] = {}

    # 1. leaderless partitions: Offline, then the offline election (partitions.offline_then_elect)
    leaders = new_leader.tolist()
    isrs = new_isr.tolist()
    epochs = leader_epoch[elect_rows].tolist()
    versions = version[elect_rows].tolist()
    assigned = replicas[elect_rows].tolist()
    for k in order:
        tp = tps[k]
        record(online, offline, tp)
        record(offline, online, tp, detail="")
        v = versions[k]
        stored = _new(LeaderIsr, (leaders[k], epochs[k] + 1, _cut(isrs[k]), epoch, 0 if v == NO_ZK_VERSION else v + 1))
        writes[tp] = _Write(tp, stored, v)
        intents[tp] = (_ELECT,)
        lis[tp] = stored
        key = tuple(assigned[k])
        recipients = recipients_of.get(key)
        if recipients is None:
            recipients = recipients_of[key] = tuple(r for r in _cut(assigned[k]) if r in live)
        send(recipients, tp)

    # 2. every replica on a dead broker goes Offline and leaves the ISR (replicas._to_offline)
    rows = np.flatnonzero(touched)
    rtps = image.tps(rows)
    rorder = sorted(range(len(rtps)), key=rtps.__getitem__)
    r_assigned = replicas[rows].tolist()
    r_states = rstate[rows].tolist()
    r_leader = leader[rows].tolist()
    r_epoch = leader_epoch[rows].tolist()
    r_isr = isr[rows].tolist()
    r_cepoch = cepoch[rows].tolist()
    r_version = version[rows].tolist()
    stop = d.send_stop_replica
    target = ReplicaState.OFFLINE
    for k in rorder:
        tp = rtps[k]
        key = tuple(r_assigned[k])
        reps = assigned_of.get(key)
        if reps is None:
            reps = assigned_of[key] = _cut(r_assigned[k])
        li = lis.get(tp)
        if li is None:
            li = _new(LeaderIsr, (r_leader[k], r_epoch[k], _cut(r_isr[k]), r_cepoch[k], r_version[k]))
        for r, j in sorted((r, j) for j, r in enumerate(reps) if r in dead):  # (tp, replica) order
            stop(r, tp, False)
            if r in li[2]:
                old_isr = li[2]
                new_lead = NO_LEADER if li[0] == r else li[0]
                shrunk = old_isr if len(old_isr) == 1 else tuple(x for x in old_isr if x != r)
                if new_lead != li[0] or shrunk != old_isr:
                    first = writes.get(tp)
                    if first is None:
                        expected = li[4]
                        intents[tp] = (("shrink", r),)
                    else:
                        expected = first.expected_version
                        intents[tp] = intents[tp] + (("shrink", r),)
                    li = _new(LeaderIsr, (new_lead, li[1] + 1, shrunk, epoch,
                                          0 if expected == NO_ZK_VERSION else expected + 1))
                    writes[tp] = _Write(tp, li, expected)
                    lis[tp] = li
            send([x for x in reps if x != r], tp)
            record(REPLICA_STATES[r_states[k][j]], target, tp, r)

    if not len(elect_rows):
        d.send_update_metadata_to_all(ALL)  # as brokers.on_broker_failure: no leader moved

    # 3. the new state, column by column, in the chunks that changed
    written = list(lis.items())
    wrows = np.array([image.index[tp] for tp, _ in written], np.intp)
    new_rstate = rstate[rows].copy()
    new_rstate[dead_replica[rows]] = _R_OFFLINE
    d.replace_image(image.with_columns(
        (wrows, {
            "leader": np.array([li[0] for _, li in written], np.int32),
            "leader_epoch": np.array([li[1] for _, li in written], np.int32),
            "isr": _matrix([li[2] for _, li in written], image.width, PAD, np.int32),
            "controller_epoch": np.full(len(written), epoch, np.int32),
            "zk_version": np.array([li[4] for _, li in written], np.int32),
        }),
        (rows, {"rstate": new_rstate}),
    ))
    return True
