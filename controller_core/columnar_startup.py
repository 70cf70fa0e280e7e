"""A broker startup's replica transitions decided over the columns of the partition image.

`brokers.on_broker_startup` (Kafka's onBrokerStartup) moves every replica hosted by the new
brokers to OnlineReplica; each such replica of a partition with a leader-and-ISR is sent a
LeaderAndIsr for it (Kafka's ZkReplicaStateMachine: Offline -> Online). The rule is
`replicas.move(d, replicas_on(d, new), ONLINE)`, which stays the specification. When a broker
hosting 100,000 replicas comes back, that walk builds one `PartitionInfo` per partition twice
and costs seconds; here the same decision is a mask over the replica matrix, the request batch
and state-change log filled per broker in the rule's order (sorted partitions, then replica)
from the (partition, replica) pairs as vectors, and one column write.

A New replica (one a reassignment added while its broker was down) goes Online and is sent
nothing, as the rule's New -> Online does; the rule's repair of an assignment missing the
replica cannot happen here, since the replicas moved are read from the assignments. A replica
whose state may not go Online (a deleted replica of a topic being deleted) is refused
as the rule refuses it: logged as an illegal transition, left as it is, sent nothing. Replicas
of topics queued for deletion move as the others do (the rule has no exception for them); the
caller resumes their deletion afterwards.
tests/core/test_columnar_startup.py checks `step()` gives the same state and commands both ways.
"""
from __future__ import annotations

from typing import Collection

import numpy as np

from . import vector_election as V
from .columns import R_CODE, REPLICA_STATES
from .draft import Draft
from .machines import REPLICA_VALID_PREVIOUS, ReplicaState

ENABLED = True
"""Tests switch this off to compare with the scalar path."""

_ONLINE = ReplicaState.ONLINE
_R_ONLINE, _R_NEW = R_CODE[_ONLINE], R_CODE[ReplicaState.NEW]
_ONLINE_FROM = np.array(sorted(R_CODE[s] for s in REPLICA_VALID_PREVIOUS[_ONLINE]), np.int8)
_OK = np.zeros(len(REPLICA_STATES), bool)  # replica state code -> may it go Online
_OK[_ONLINE_FROM] = True


def _first_seen(values: np.ndarray) -> list[int]:
    """The distinct values, in the order of their first occurrence."""
    distinct, first = np.unique(values, return_index=True)
    return distinct[np.argsort(first, kind="stable")].tolist()


def replicas_online(d: Draft, new: Collection[int]) -> list | None:
    """`replicas.move(d, replicas_on(d, new), ONLINE)` for the common case (see the module
    docstring): the partitions whose replicas moved, sorted; None, with the draft untouched, if
    the case is not the common one."""
    if not ENABLED:
        return None
    image = d.partitions
    if image.odd:
        return None
    if not image.count:
        return []  # no partition: no replica to move
    present = image.column("present")
    replicas = image.column("replicas")
    on = V.member(replicas, new) & present[:, None]
    rows = np.flatnonzero(on.any(axis=1))
    if not len(rows):
        return []
    rstate = image.column("rstate")

    # the rule's order: (partition, replica) pairs sorted (no sort when the image lays its
    # rows out in partition order, as after a load)
    tps, order = image.tps_sorted(rows)
    if order is not None:
        rows = rows[order]
    has = image.column("has_state")[rows]
    # every (partition, new replica) pair as three vectors, in the rule's order: partitions
    # sorted, then replicas ascending within each (one Python step per group below, not per pair)
    at, col = np.nonzero(on[rows])
    brokers = replicas[rows][at, col]
    codes = rstate[rows][at, col]
    walk = np.lexsort((brokers, at))
    at, brokers, codes = at[walk], brokers[walk], codes[walk]
    ok = _OK[codes]
    send = ok & has[at] & (codes != _R_NEW)  # (New -> Online sends nothing)
    lai_lists: dict[int, list] = {}  # broker -> partitions sent a LeaderAndIsr, first seen first
    for b in _first_seen(brokers[send]):
        lai_lists[b] = [tps[i] for i in at[send & (brokers == b)].tolist()]
    # (state code, replica, legal) -> partitions, the groups in the order the walk meets them
    log: dict[tuple, list] = {}
    keys = codes.astype(np.int64) * (int(brokers.max(initial=0)) + 1) + brokers
    for k in _first_seen(keys):
        where = keys == k
        first = int(np.argmax(where))
        code, r = int(codes[first]), int(brokers[first])
        log[(code, r, bool(ok[first]))] = [tps[i] for i in at[where].tolist()]

    d.requests.add_leader_and_isr(lai_lists, distinct=True)  # (each partition once per replica)
    if lai_lists:
        d.requests.um_everyone = True
        if not d.requests.um_all:  # (a broker's startup has asked for UpdateMetadata of all already)
            sent_at = at[send]  # (ascending: the pairs are in partition order)
            sent_at = sent_at[np.concatenate(([True], sent_at[1:] != sent_at[:-1]))]
            # each partition sent a LeaderAndIsr, and so an UpdateMetadata, in order
            d.requests.um_tps.extend([tps[i] for i in sent_at.tolist()], distinct=True)
    for (code, r, ok), r_tps in log.items():
        if ok:
            d.record_many(REPLICA_STATES[code], _ONLINE, r_tps, r)
        else:
            for tp in r_tps:
                d.record(REPLICA_STATES[code], _ONLINE, tp, r, ok=False, detail="illegal transition")
    new_rstate = rstate[rows].copy()
    new_rstate[on[rows] & np.isin(new_rstate, _ONLINE_FROM)] = _R_ONLINE  # (others refused: left)
    d.replace_image(image.with_columns((rows, {"rstate": new_rstate})))
    return tps
