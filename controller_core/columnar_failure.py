"""A broker failure decided over the columnar partition image, as array operations.

The same decision as `brokers.on_broker_failure` (Kafka's onBrokerFailure and
onReplicasBecomeOffline) for the partition-state writes it makes: partitions led by a dead
broker (or by nobody) go through the offline election (`vector_election.offline`), New
partitions get their first leader, and every dead replica that is in an ISR leaves it (never
the last member; a dead leader leaves the partition leaderless), one leader-epoch bump per
change, as `Draft.write_change` does. tests/core/test_columnar_failure.py checks, on random
clusters, that the writes are exactly those `step()` makes for the same BrokersChanged.

Not wired into `step()` yet: the core's commands and its state still hold one object per
partition, and turning these columns into them costs what the scalar path costs. It is the
decision a columnar `WritePartitionStates` / `LeaderAndIsr` would carry (issue 17), measured by
`benchmarks/core_step.py` (`columnar_decision`).
"""
from __future__ import annotations

from typing import Collection, NamedTuple

import numpy as np

from . import vector_election as V
from .columns import P_CODE, PAD, R_OFFLINE_FROM, PartitionImage
from .machines import PartitionState
from .values import NO_ZK_VERSION


class FailureWrites(NamedTuple):
    """The partition-state writes of a broker failure, one entry per written row (row-id order):
    the new leader, leader epoch, ISR (left-packed, PAD-padded), controller epoch, the znode
    version the write expects and the partition state after it."""

    rows: np.ndarray
    leader: np.ndarray
    leader_epoch: np.ndarray
    isr: np.ndarray
    controller_epoch: np.ndarray
    expected_version: np.ndarray
    pstate: np.ndarray
    failed_elections: np.ndarray  # rows left Offline: no eligible leader


_ONLINE, _OFFLINE, _NEW = P_CODE[PartitionState.ONLINE], P_CODE[PartitionState.OFFLINE], P_CODE[PartitionState.NEW]


def decide(image: PartitionImage, dead: Collection[int], live: Collection[int], epoch: int,
           unclean_allowed: np.ndarray, deleting: np.ndarray | None = None) -> FailureWrites:
    """The writes of the failure of `dead` (already removed from `live`, the live brokers not
    shutting down). `unclean_allowed[row]` is the topic's setting; `deleting[row]` marks topics
    queued for deletion (left alone here, as the scalar path does)."""
    present = image.column("present")
    has = image.column("has_state")
    leader = image.column("leader").copy()
    leader_epoch = image.column("leader_epoch").copy()
    cepoch = image.column("controller_epoch").copy()
    version = image.column("zk_version")
    replicas = image.column("replicas")
    isr = image.column("isr").copy()
    pstate = image.column("pstate").copy()
    rstate = image.column("rstate")
    n = len(present)
    active = present & ~deleting if deleting is not None else present
    written = np.zeros(n, bool)
    expected = np.where(has, version, NO_ZK_VERSION).astype(np.int32)
    leader_epoch = leader_epoch.astype(np.int64)

    # 1. leaderless partitions (their leader is not live), then the New and Offline ones waiting
    leaderless = active & has & ~V.member(leader[:, None], live)[:, 0] & (pstate != _NEW)
    leaderless &= (pstate == _ONLINE) | (pstate == _OFFLINE)
    waiting = active & ~leaderless & ((pstate == _NEW) | (pstate == _OFFLINE))
    elect_rows = (leaderless | (waiting & (pstate == _OFFLINE) & has)) & ~(cepoch > epoch)
    idx = np.flatnonzero(elect_rows)  # the rules run on the rows they decide, not on the cluster
    ok, new_leader, new_isr, _ = V.offline(replicas[idx], isr[idx], live, unclean_allowed[idx])
    won = idx[ok]
    elected = np.zeros(n, bool)
    elected[won] = True
    failed = (leaderless | (waiting & (pstate == _OFFLINE))) & ~elected
    leader[won] = new_leader[ok]
    isr[won] = new_isr[ok]
    leader_epoch[won] += 1
    cepoch[won] = epoch
    pstate[failed & leaderless] = _OFFLINE
    pstate[won] = _ONLINE
    written[won] = True

    idx = np.flatnonzero(waiting & (pstate == _NEW))
    if len(idx):
        live_replicas = V.pack(replicas[idx], V.member(replicas[idx], live))
        init = idx[live_replicas[:, 0] != PAD]
        live_replicas = live_replicas[live_replicas[:, 0] != PAD]
        leader[init] = live_replicas[:, 0]
        isr[init] = live_replicas
        leader_epoch[init] = 0
        cepoch[init] = epoch
        expected[init] = NO_ZK_VERSION
        pstate[init] = _ONLINE
        has = has.copy()
        has[init] = True
        written[init] = True

    # 2. each dead replica leaves the ISR (sorted broker order, as the scalar path walks them)
    can_go_offline = V.one_of(rstate, R_OFFLINE_FROM)
    for b in sorted(dead):
        rows = active & V.row_any((replicas == b) & can_go_offline) & has & ~(cepoch > epoch)
        hit = V.shrink(isr, leader, leader_epoch, b, np.flatnonzero(rows & V.row_any(isr == b)))
        cepoch[hit] = epoch
        written[hit] = True

    rows = np.flatnonzero(written)
    return FailureWrites(rows, leader[rows].astype(np.int32), leader_epoch[rows].astype(np.int32),
                         isr[rows], cepoch[rows].astype(np.int32), expected[rows], pstate[rows],
                         np.flatnonzero(failed))
