"""Small builders for core tests: a cluster as values, and a runtime stand-in that makes every
partition-state write succeed (what ZooKeeper does when nobody races the controller)."""
from __future__ import annotations

from controller_core import events as E
from controller_core.draft import DecisionParked
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import BrokerInfo, LeaderIsr, ReplicaAssignment, TopicPartition
from replay import shell

AT = 1_700_000_000_000


def broker(i: int, epoch: int | None = None, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9090 + i, epoch if epoch is not None else 100 + i, rack)


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def snapshot(brokers=(1, 2, 3), topics=None, states=None, **kw) -> E.ClusterSnapshot:
    """`topics`: {"t": [[1, 2, 3], [2, 3, 1]]}; `states`: {tp: LeaderIsr}; by default every
    partition is led by its first replica with the full ISR, as written by controller epoch 1."""
    topics = topics or {}
    if states is None:
        states = {}
        for t, parts in topics.items():
            for p, replicas in enumerate(parts):
                states[tp(t, p)] = LeaderIsr(replicas[0], 0, tuple(replicas), 1, 0)
    return E.ClusterSnapshot(
        brokers=tuple(broker(b) for b in brokers),
        topics=tuple((t, tuple((p, ReplicaAssignment(tuple(r))) for p, r in enumerate(parts)))
                     for t, parts in topics.items()),
        partition_states=tuple(states.items()),
        **kw,
    )


def elected(brokers=(1, 2, 3), topics=None, states=None, epoch=2, config=None, **kw):
    """A controller that just won the election over the given cluster, writes settled."""
    config = config or ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False)
    state = initial_state(config)
    event = E.ControllerElected(at=AT, epoch=epoch, epoch_zk_version=epoch - 1,
                                snapshot=snapshot(brokers, topics, states, **kw))
    return settle(*step(state, event))


def settle(state, commands, log=None):
    """Feed back a successful outcome for every WritePartitionStates, and for every
    ReadPartitionStates the states the controller has cached (ZooKeeper agrees with it),
    transitively (the in-memory shell, replay/shell.py). Returns (state, all commands seen)."""
    return shell.settle(state, commands, AT)


def run(state, event):
    return settle(*step(state, event))


def leader_isr(state, t, p) -> LeaderIsr:
    return state.partitions[tp(t, p)].leader_isr


def of_type(commands, cls):
    return [c for c in commands if isinstance(c, cls)]


def both_paths(module, entry: str, run):
    """`run()` (a `step()`) twice: first with `module.<entry>` (a columnar path) spied on, its
    answers recorded in order, then with `module.ENABLED` off, so the rules decide alone.
    Returns (fast, slow, taken): the two `step()` results and what the columnar path answered
    each time it was asked (whether it decided)."""
    taken = []
    real = getattr(module, entry)

    def spy(*args):
        try:
            taken.append(real(*args))
        except DecisionParked:
            taken.append(True)  # it decided: to park the event for a re-read (draft.DecisionParked)
            raise
        return taken[-1]

    setattr(module, entry, spy)
    try:
        fast = run()
    finally:
        setattr(module, entry, real)
    module.ENABLED = False
    try:
        slow = run()
    finally:
        module.ENABLED = True
    return fast, slow, taken


def assert_same(fast, slow):
    """Two `step()` results agree: the same commands (and their digest, what the journal
    records) and the same state (and its encoding)."""
    from controller_core import codec
    (fs, fc), (ss, sc) = fast, slow
    assert fc == sc
    assert codec.digest(fc) == codec.digest(sc)
    assert fs == ss
    assert codec.encode_state(fs) == codec.encode_state(ss)
