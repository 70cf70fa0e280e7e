"""The state-znode writes of a whole-cluster decision, as columns (issue 17).

A 100,000-partition broker failure writes some 60,000 state znodes. The decision computes them
as columns (the new leader, leader epoch and ISR of each written row); making a `PartitionWrite`
and a `LeaderIsr` per partition out of them cost more than the decision itself, and the
ZooKeeper writer then took every one apart again to encode the znodes. `Draft.write_rows` now
keeps the columns in a `PartitionWrites`, which `WritePartitionStates.writes` carries:

- the ZooKeeper writer reads the columns (`tps`, `expected`, `zk_version`, `state_rows()`);
- the digest of the decision writes the command's text from the columns (controller_core/
  digest.py);
- everything else (the codec, the in-memory shell, the replay's history, tests) sees a sequence
  of `PartitionWrite` values equal to the tuple `Draft.write_change` would have built, made on
  first use and kept (`partition_views.ColumnRows`, as a `PartitionViews`).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from .commands import PartitionWrite
from .partition_views import ColumnRows, _row_tuples
from .values import LeaderIsr, TopicPartition

_leader_isr = partial(tuple.__new__, LeaderIsr)  # a LeaderIsr (a NamedTuple) from a plain tuple


class PartitionWrites(ColumnRows):
    """Write i: `tps[i]` gets the state (`leader[i]`, `leader_epoch[i]`, the ISR in row i of the
    left-packed `isr` matrix padded with -1, `controller_epoch[i]`, `zk_version[i]`: the version
    it will have once written), conditional on the znode being at `expected[i]` (-1: create)."""

    __slots__ = ("tps", "leader", "leader_epoch", "isr", "controller_epoch", "zk_version", "expected", "_writes")

    def __init__(self, tps: list[TopicPartition], leader: np.ndarray, leader_epoch: np.ndarray, isr: np.ndarray,
                 controller_epoch: np.ndarray, zk_version: np.ndarray, expected: np.ndarray):
        self.tps = tps
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.controller_epoch = controller_epoch
        self.zk_version = zk_version
        self.expected = expected
        self._writes: tuple[PartitionWrite, ...] | None = None

    def state_rows(self) -> list[LeaderIsr]:
        """Each write's state, as `PartitionWrite.leader_isr` holds it (equal ISRs shared)."""
        return list(map(_leader_isr, zip(self.leader.tolist(), self.leader_epoch.tolist(), _row_tuples(self.isr),
                                         self.controller_epoch.tolist(), self.zk_version.tolist())))

    def writes(self) -> tuple[PartitionWrite, ...]:
        """The writes as `PartitionWrite` values (built once)."""
        writes = self._writes
        if writes is None:
            writes = self._writes = tuple(map(PartitionWrite, self.tps, self.state_rows(), self.expected.tolist()))
        return writes

    _values = writes

    def then(self, later: "PartitionWrites") -> "PartitionWrites":
        """These writes followed by `later`'s: a decision with two whole-cluster parts (a bounce:
        the failure's writes, then the startup's elections). A partition written by both keeps
        its first write's place and expected version and takes the later state, as
        `Draft.write_change` merges a second change into the first write."""
        width = max(self.isr.shape[1], later.isr.shape[1])

        def padded(isr: np.ndarray) -> np.ndarray:  # (-1: the matrices' padding)
            if isr.shape[1] == width:
                return isr
            return np.pad(isr, ((0, 0), (0, width - isr.shape[1])), constant_values=-1)

        place = {tp: i for i, tp in enumerate(self.tps)}
        at = np.fromiter((place.get(tp, -1) for tp in later.tps), np.intp, len(later.tps))
        again = at >= 0
        fresh = ~again

        def merged(first: np.ndarray, second: np.ndarray, later_state: bool = True) -> np.ndarray:
            if later_state and again.any():  # (a partition written twice takes the later state)
                first = first.copy()
                first[at[again]] = second[again]
            return np.concatenate((first, second[fresh]))

        tps = list(self.tps) + [tp for tp, f in zip(later.tps, fresh.tolist()) if f]
        return PartitionWrites(tps, merged(self.leader, later.leader), merged(self.leader_epoch, later.leader_epoch),
                               merged(padded(self.isr), padded(later.isr)),
                               merged(self.controller_epoch, later.controller_epoch),
                               merged(self.zk_version, later.zk_version, later_state=False),
                               merged(self.expected, later.expected, later_state=False))
