"""The offline replicas the controller's UpdateMetadata lists (Kafka's UpdateMetadata
offline_replicas: replicas of live brokers that are not online for their partition)."""
from __future__ import annotations

from adapters.controller.executor import _offline_replicas
from controller_core import commands as C
from controller_core import events as E
from tests.core.builders import AT, elected, run, tp


def listed(state):
    views = tuple(v for v in state.partitions.views_many(sorted(state.partitions.keys())).values() if v is not None)
    um = C.SendUpdateMetadata(broker_id=1, broker_epoch=-1, controller_epoch=state.epoch,
                              partitions=views, live_brokers=tuple(state.brokers.values()))
    return _offline_replicas([um], state)[id(um.partitions)]


def test_a_replica_kept_on_a_failed_dir_is_listed_even_once_a_log_dir_event_moved_it_online():
    state, _ = elected(topics={"t": [[1, 2], [2, 1]]})
    state, _ = run(state, E.LeaderAndIsrResponded(at=AT, broker_id=2, errors=((tp("t", 0), "KAFKA_STORAGE_ERROR"),)))
    assert state.replicas_on_offline_dirs == {(tp("t", 0), 2)}
    assert listed(state) == [["t", 0, [2]]]
    # broker 2 reports another dir: every replica of it goes OnlineReplica again (Kafka's
    # onBrokerLogDirFailure), but t-0's stays on its failed dir
    state, _ = run(state, E.LogDirEventNotified(at=AT, brokers=(2,)))
    assert state.partitions[tp("t", 0)].replica_state(2).name == "ONLINE"
    assert listed(state) == [["t", 0, [2]]]
