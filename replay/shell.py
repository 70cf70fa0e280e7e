"""The in-memory shell: what ZooKeeper answers to the core's partition-state commands, without I/O.

The controller's real shell (adapters/controller/) executes `WritePartitionStates` as
epoch-checked conditional multi-ops and `ReadPartitionStates` as batched reads. Everything that
drives the core without ZooKeeper executes them here instead, so that the rule of a conditional
state write is written once:

- the journal generator's world (`replay/world.py`), which adds timing, fencing and the rest of
  the cluster around it;
- the core's builders (`tests/core/builders.py`) and the core benchmark
  (`benchmarks/core_step.py`), which only need every write to land (`settle`).

The rule (ZooKeeper's, as the writer uses it): a state write lands only under a topic that still
exists and only if the znode is at the version the write expects (`NO_ZK_VERSION`: the znode
must not exist yet); a landed state is at the version the write predicted. A read answers the
states as they are when it lands. Outcomes list conflicts only: a landed write is at its
predicted version, as adapters/controller/zkwriter.py reports it.
"""
from __future__ import annotations

from typing import Callable, Iterable

from controller_core import commands as C
from controller_core import events as E
from controller_core.step import step
from controller_core.values import NO_ZK_VERSION, LeaderIsr, TopicPartition


class PartitionStates:
    """The partition-state znodes: `{partition: LeaderIsr}`, each at its znode version.
    `topic_exists(topic)` says whether a write may land under the topic's znode."""

    def __init__(self, states: dict[TopicPartition, LeaderIsr] | None = None,
                 topic_exists: Callable[[str], bool] = lambda topic: True):
        self.states: dict[TopicPartition, LeaderIsr] = states if states is not None else {}
        self.topic_exists = topic_exists

    def lands(self, pw: C.PartitionWrite) -> bool:
        """Would this conditional write land now?"""
        current = self.states.get(pw.tp)
        version = current.zk_version if current is not None else NO_ZK_VERSION
        return self.topic_exists(pw.tp.topic) and pw.expected_version == version

    def land(self, pw: C.PartitionWrite) -> LeaderIsr:
        """Apply a write that `lands`; the state it leaves."""
        current = self.states.get(pw.tp)
        version = current.zk_version if current is not None else NO_ZK_VERSION
        landed = pw.leader_isr._replace(zk_version=version + 1)
        self.states[pw.tp] = landed
        return landed

    def write(self, c: C.WritePartitionStates, at: int) -> E.PartitionStatesWritten:
        """Execute a `WritePartitionStates`: each write lands or conflicts; the final outcome."""
        conflicts = []
        for pw in c.writes:
            if self.lands(pw):
                self.land(pw)
            else:
                conflicts.append((pw.tp, self.states.get(pw.tp)))
        return E.PartitionStatesWritten(at=at, write_id=c.write_id, conflicts=tuple(conflicts))

    def read(self, c: C.ReadPartitionStates, at: int) -> E.PartitionStatesRechecked:
        """Execute a `ReadPartitionStates`: the states as they are now (None: no znode)."""
        return E.PartitionStatesRechecked(at=at, read_id=c.read_id,
                                          states=tuple((tp, self.states.get(tp)) for tp in c.partitions))


class _AgreeingStates:
    """ZooKeeper holding exactly what the controller has cached: every write lands, every read
    answers the cache. What a cluster where nobody races the controller looks like."""

    def __init__(self, state):
        self.state = state

    def write(self, c: C.WritePartitionStates, at: int) -> E.PartitionStatesWritten:
        return E.PartitionStatesWritten(at=at, write_id=c.write_id)

    def read(self, c: C.ReadPartitionStates, at: int) -> E.PartitionStatesRechecked:
        partitions = self.state.partitions
        return E.PartitionStatesRechecked(at=at, read_id=c.read_id, states=tuple(
            (tp, partitions[tp].leader_isr if tp in partitions else None) for tp in c.partitions))


def settle(state, commands: Iterable, at: int, zookeeper: PartitionStates | None = None):
    """Execute every partition-state write and read of `commands` and of the decisions their
    outcomes lead to, transitively, feeding each outcome back through `step()`. Without
    `zookeeper`, ZooKeeper agrees with the controller's cache (every write lands). Returns the
    state and every command seen."""
    seen = list(commands)
    queue = [c for c in seen if isinstance(c, (C.WritePartitionStates, C.ReadPartitionStates))]
    while queue:
        c = queue.pop(0)
        zk = zookeeper if zookeeper is not None else _AgreeingStates(state)
        event = zk.read(c, at) if isinstance(c, C.ReadPartitionStates) else zk.write(c, at)
        state, more = step(state, event)
        seen.extend(more)
        queue.extend(m for m in more if isinstance(m, (C.WritePartitionStates, C.ReadPartitionStates)))
    return state, seen
