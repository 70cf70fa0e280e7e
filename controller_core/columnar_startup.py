"""A broker startup's replica transitions decided over the columns of the partition image.

`brokers.on_broker_startup` (Kafka's onBrokerStartup) moves every replica hosted by the new
brokers to OnlineReplica; each such replica of a partition with a leader-and-ISR is sent a
LeaderAndIsr for it (Kafka's ZkReplicaStateMachine: Offline -> Online). The rule is
`replicas.move(d, replicas_on(d, new), ONLINE)`, which stays the specification. When a broker
hosting 100,000 replicas comes back, that walk builds one `PartitionInfo` per partition twice
and costs seconds; here the same decision is a mask over the replica matrix, the request batch
and state-change log filled per broker in the rule's order (sorted partitions, then replica),
and one column write.

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

from collections import defaultdict
from typing import Collection

import numpy as np

from . import vector_election as V
from .columns import R_CODE, REPLICA_STATES, _cut
from .draft import Draft
from .machines import REPLICA_VALID_PREVIOUS, ReplicaState

ENABLED = True
"""Tests switch this off to compare with the scalar path."""

_ONLINE = ReplicaState.ONLINE
_R_ONLINE, _R_NEW = R_CODE[_ONLINE], R_CODE[ReplicaState.NEW]
_ONLINE_FROM = np.array(sorted(R_CODE[s] for s in REPLICA_VALID_PREVIOUS[_ONLINE]), np.int8)


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
    code_ok = dict.fromkeys(range(len(REPLICA_STATES)), False) | dict.fromkeys(_ONLINE_FROM.tolist(), True)

    # the rule's order: (partition, replica) pairs sorted
    tps = image.tps(rows)
    order = sorted(range(len(tps)), key=tps.__getitem__)
    tps = [tps[k] for k in order]
    rows = rows[np.array(order, np.intp)]
    has = image.column("has_state")[rows].tolist()
    lai_lists: defaultdict[int, list] = defaultdict(list)
    told: list = []  # the partitions sent a LeaderAndIsr (and so an UpdateMetadata), in order
    log: dict[tuple, list] = {}  # (state code, replica, legal) -> partitions, in the walk's order
    plans: dict[tuple, tuple] = {}
    for tp, row, codes, with_state in zip(tps, replicas[rows].tolist(), rstate[rows].tolist(), has):
        key = (tuple(row), tuple(codes))
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = tuple(sorted((r, codes[j], code_ok[codes[j]])
                                             for j, r in enumerate(_cut(row)) if r in new))
        sent = False
        for r, code, ok in plan:
            if ok and with_state and code != _R_NEW:  # (New -> Online sends nothing)
                lai_lists[r].append(tp)
                sent = True
            group = log.get((code, r, ok))
            if group is None:
                log[(code, r, ok)] = [tp]
            else:
                group.append(tp)
        if sent:
            told.append(tp)

    d.add_leader_and_isr(lai_lists, distinct=True)  # (each partition once per replica)
    if lai_lists:
        d.um_everyone = True
        if not d.um_all:
            d.um_tps.extend(told, distinct=True)
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
