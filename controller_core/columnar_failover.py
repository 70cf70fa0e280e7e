"""A new controller's start of the state machines, over the columns, for a healthy cluster.

`failover.on_elected` (Kafka's onControllerFailover) stays the specification. Its steps 2 and 3
walk every partition: each replica on a live broker is told its partition's state (LeaderAndIsr),
each replica on a dead broker goes Offline, a predecessor's half-done reassignment is repaired,
and New or Offline partitions are elected. In the common case, a controller taking over a
cluster whose brokers are all alive (a controller bounced, or moved on purpose), nothing but the
LeaderAndIsr batch comes out of that walk: this module fills that batch from the columns, in the
order the walk fills it (partitions sorted, each partition's replicas in assignment order), so
the commands and their digest are the same.

Anything else (a partition without a state, not Online, with a replica on a dead broker or an
ISR member that is not assigned, a topic queued for deletion, a partition the columns cannot
hold) returns False before touching the draft, and the caller walks the partitions as before.
tests/core/test_columnar_failover.py checks on random clusters that `step()` gives the same
state and commands with and without this path.
"""
from __future__ import annotations

from itertools import compress

import numpy as np

from . import vector_election as V
from .columns import P_CODE, PAD
from .draft import Draft
from .machines import PartitionState

ENABLED = True
"""Tests switch this off to compare with the walk of `failover.on_elected`."""

_ONLINE = P_CODE[PartitionState.ONLINE]


def start_machines(d: Draft) -> bool:
    """Fill the LeaderAndIsr batch of steps 2-3 of `on_elected` if the cluster is healthy (see
    the module docstring); False, with the draft untouched, if not."""
    if not ENABLED or d.topics_to_delete:
        return False
    image = d.partitions
    if image.odd or not image.count:
        return False
    present = image.column("present")
    rows = np.flatnonzero(present)
    if not image.column("has_state")[rows].all() or (image.column("pstate")[rows] != _ONLINE).any():
        return False  # New partitions, or Offline ones to elect
    replicas = image.column("replicas")[rows]
    assigned = replicas != PAD
    if (assigned & ~V.member(replicas, d.live)).any():
        return False  # a replica on a dead broker goes Offline and leaves the ISR
    isr = image.column("isr")[rows]
    if ((isr != PAD) & ~V.contained(isr, replicas)).any():
        return False  # a half-done reassignment to repair

    tps = image.tps(rows)
    order = sorted(range(len(tps)), key=tps.__getitem__)
    tps = [tps[k] for k in order]
    replicas = replicas[np.array(order, np.intp)]
    # each broker's partitions, and the brokers in the order the walk first meets them
    firsts = []
    per_broker = {}
    for b in np.unique(replicas[replicas != PAD]).tolist():
        at = replicas == b
        hit = at.any(axis=1)
        i = int(hit.argmax())
        firsts.append((i, int(at[i].argmax()), b))
        per_broker[b] = hit
    lai = d.lai
    for _, _, b in sorted(firsts):
        sent = compress(tps, per_broker[b].tolist())
        per = lai.get(b)
        if per is None:
            lai[b] = dict.fromkeys(sent, False)
        else:
            for tp in sent:
                if tp not in per:
                    per[tp] = False
    if tps:
        d.um_everyone = True  # as Draft.send_leader_and_isr: UpdateMetadata of each to everyone
        if not d.um_all:
            d.um_tps.update(dict.fromkeys(tps))
    return True
