"""One partition's state as a value: what the scalar rules read and write.

The controller state stores partitions as columns (`columns.py`); a `PartitionInfo` is built
from a row when a handler asks for one partition (`Draft.info`) and written back through the
step's delta, so the scalar rules keep reading plain values.
"""
from __future__ import annotations

from typing import NamedTuple

from .machines import PartitionState, ReplicaState
from .values import LeaderIsr, ReplicaAssignment

_PAIR_CACHE: dict[tuple[int, ReplicaState], tuple[int, ReplicaState]] = {}


def _pair(replica: int, state: ReplicaState) -> tuple[int, ReplicaState]:
    # Replica-state pairs are few distinct values; sharing them keeps 300,000 replicas small.
    key = (replica, state)
    pair = _PAIR_CACHE.get(key)
    if pair is None:
        pair = _PAIR_CACHE.setdefault(key, key)
    return pair


class PartitionInfo(NamedTuple):
    """Everything the controller knows about one partition.

    `replica_states` holds `(broker, ReplicaState)` pairs for every replica that has a state
    (a replica without an entry is NonExistentReplica). A NamedTuple, like the other values a
    failover makes 10,000 of: built in C.
    """

    assignment: ReplicaAssignment
    leader_isr: LeaderIsr | None
    state: PartitionState
    replica_states: tuple[tuple[int, ReplicaState], ...] = ()

    def replica_state(self, replica: int) -> ReplicaState:
        for r, s in self.replica_states:
            if r == replica:
                return s
        return ReplicaState.NON_EXISTENT

    def with_replica_state(self, replica: int, state: ReplicaState | None) -> "PartitionInfo":
        """A copy with one replica's state set (None removes the entry: NonExistentReplica)."""
        states = self.replica_states
        for i, pair in enumerate(states):
            if pair[0] == replica:
                if state is None:
                    states = states[:i] + states[i + 1:]
                else:
                    states = states[:i] + (_pair(replica, state),) + states[i + 1:]
                break
        else:
            if state is not None:
                states = states + (_pair(replica, state),)
        return tuple.__new__(PartitionInfo, (self[0], self[1], self[2], states))
