"""A partition whose state znode vanished before its topic's deletion completed still ends its
life in the history: the chaos soak of 2026-12-06 (seed 9) counted six such partitions offline
for 40-60 s, to the end of the soak, because the fold wrote `deleted` rows only for partitions
that still had a state; nor did it end a topic whose znodes an operator removed by hand (the
controller forgets it without a DeleteTopic). A journal written here through the core and the journal writer, as the
controller loop writes one (event, decision, effects), with a broker that fails long after."""
from __future__ import annotations

import pytest

from controller_core import codec
from controller_core import commands as C
from controller_core import events as E
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from adapters.journal.writer import Journal
from replay import local
from controller_core.codec import digest as fast_digest
from tests.core.builders import broker, snapshot

T0 = 1_800_000_000_000


def _write_life(root, by_hand=False):
    config = ControllerConfig(broker_id=3, auto_leader_rebalance_enable=False)
    state = initial_state(config)
    journal = Journal.open(root / "node-3", 3, fsync="never",
                           snapshot_provider=lambda: (state.epoch, {"state": codec.encode_state(state)}))
    at = T0
    queue = [E.ControllerElected(at=at, epoch=2, epoch_zk_version=1, snapshot=snapshot(
        brokers=(1, 2, 3), topics={"t": [[1, 2], [2, 1]], "keep": [[1, 3]]}))]
    gone = False
    while queue:
        event = queue.pop(0)
        seq = journal.append("event", codec.encode_event(event), controller_epoch=max(state.epoch, 2), at=event.at)
        state, commands = step(state, event)
        journal.append("effects", {"event_seq": seq, "count": len(commands), "digest": fast_digest(commands)},
                       controller_epoch=state.epoch, at=event.at)
        at += 100
        for c in commands:
            if isinstance(c, C.WritePartitionStates):
                if any(w.tp.topic == "t" for w in c.writes) and not gone:
                    # someone removed t's state znodes behind the controller: its writes find nothing
                    gone = True
                    queue.append(E.PartitionStatesWritten(at=at, write_id=c.write_id, conflicts=tuple(
                        (w.tp, None) for w in c.writes if w.tp.topic == "t")))
                else:
                    queue.append(E.PartitionStatesWritten(at=at, write_id=c.write_id))
            elif isinstance(c, C.SendStopReplica) and c.delete:
                queue.append(E.StopReplicaResponded(at=at, broker_id=c.broker_id, delete=True,
                                                    partitions=c.partitions, errors=()))
            elif isinstance(c, C.DeleteTopic):
                queue.append(E.TopicZnodesDeleted(at=at, topic=c.topic))
        if isinstance(event, E.ControllerElected) and by_hand:
            # an operator removes t's znodes by hand: the controller forgets the topic (no DeleteTopic)
            queue.append(E.TopicsChanged(at=at, topics=frozenset({"keep"})))
        elif isinstance(event, E.ControllerElected):
            queue.append(E.TopicDeletionsRequested(at=at, topics=frozenset({"t"})))
        if isinstance(event, E.TopicZnodesDeleted) or (by_hand and isinstance(event, E.TopicsChanged)):
            # a minute later broker 1, which led t-0, fails: t-0 must not be counted offline
            queue.append(E.BrokersChanged(at=at + 60_000, brokers=(broker(2), broker(3))))
    journal.close()
    return state


@pytest.mark.parametrize("by_hand", [False, True], ids=["vanished-state-then-deleted", "topic-removed-by-hand"])
def test_a_partition_whose_state_vanished_is_deleted_in_the_history_and_never_offline(tmp_path, by_hand):
    state = _write_life(tmp_path, by_hand)
    assert "t" not in state.topics and state.active
    result = local.replay(tmp_path)
    assert [f for f in result.findings if f["severity"] == "violation"] == []
    rows = [r for r in result.tables["partition_timeline"] if r["topic"] == "t"]
    deleted = sorted(r["partition"] for r in rows if r["kind"] == "deleted")
    assert deleted == [0, 1]
    offline = {(r["topic"], r["partition"]): r["offline_ms"] for r in result.tables["partition_offline"]}
    assert offline.get(("t", 0), 0) < 1_000, offline
