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
from .columns import P_CODE, PAD, R_CODE, PartitionImage
from .machines import REPLICA_VALID_PREVIOUS, PartitionState, ReplicaState
from .values import NO_LEADER, NO_ZK_VERSION


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
_OFFLINE_FROM = np.array(sorted(R_CODE[s] for s in REPLICA_VALID_PREVIOUS[ReplicaState.OFFLINE]), np.int8)


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
    live_ids = np.fromiter(live, np.int32, len(live)) if live else np.zeros(0, np.int32)
    written = np.zeros(n, bool)
    expected = np.where(has, version, NO_ZK_VERSION).astype(np.int32)

    # 1. leaderless partitions (their leader is not live), then the New and Offline ones waiting
    leaderless = active & has & ~np.isin(leader, live_ids) & (pstate != _NEW)
    leaderless &= (pstate == _ONLINE) | (pstate == _OFFLINE)
    waiting = active & ~leaderless & ((pstate == _NEW) | (pstate == _OFFLINE))
    elect_rows = (leaderless | (waiting & (pstate == _OFFLINE) & has)) & ~(cepoch > epoch)
    ok, new_leader, new_isr, _ = V.offline(replicas, isr, live, unclean_allowed)
    elected = elect_rows & ok
    failed = (leaderless | (waiting & (pstate == _OFFLINE))) & ~elected
    leader = np.where(elected, new_leader, leader)
    isr = np.where(elected[:, None], new_isr, isr)
    leader_epoch = leader_epoch + elected
    cepoch = np.where(elected, epoch, cepoch)
    pstate = np.where(elected, _ONLINE, np.where(failed & leaderless, _OFFLINE, pstate)).astype(np.int8)
    written |= elected

    new_rows = waiting & (pstate == _NEW)
    live_replicas = V.pack(replicas, V.member(replicas, live))
    init = new_rows & (live_replicas[:, 0] != PAD)
    leader = np.where(init, live_replicas[:, 0], leader)
    isr = np.where(init[:, None], live_replicas, isr)
    leader_epoch = np.where(init, 0, leader_epoch)
    cepoch = np.where(init, epoch, cepoch)
    expected = np.where(init, NO_ZK_VERSION, expected)
    pstate = np.where(init, _ONLINE, pstate).astype(np.int8)
    has = has | init
    written |= init

    # 2. each dead replica leaves the ISR (sorted broker order, as the scalar path walks them)
    can_go_offline = np.isin(rstate, _OFFLINE_FROM)
    for b in sorted(dead):
        at = (replicas == b) & can_go_offline
        rows = active & at.any(axis=1) & has & ~(cepoch > epoch)
        in_isr = (isr == b).any(axis=1) & rows
        size = (isr != PAD).sum(axis=1)
        shrunk = V.pack(isr, (isr != PAD) & (isr != b))
        new_isr_b = np.where((size == 1)[:, None], isr, shrunk)
        new_leader_b = np.where(leader == b, NO_LEADER, leader)
        changed = in_isr & ((new_leader_b != leader) | (new_isr_b != isr).any(axis=1))
        leader = np.where(changed, new_leader_b, leader)
        isr = np.where(changed[:, None], new_isr_b, isr)
        leader_epoch = leader_epoch + changed
        cepoch = np.where(changed, epoch, cepoch)
        written |= changed

    rows = np.flatnonzero(written)
    return FailureWrites(rows, leader[rows].astype(np.int32), leader_epoch[rows].astype(np.int32),
                         isr[rows], cepoch[rows].astype(np.int32), expected[rows], pstate[rows],
                         np.flatnonzero(failed))
