"""A topic an operator removes by hand while no controller holds office ends its partitions'
lives at the next controller's load, in every measure: no journal records that end (the old
controller had resigned, the new one never knew the topic), so before, the walk kept such a
partition's last leader to the end of the history, and a failure of that broker later counted
it offline until then. Two journals written here through the core and the journal writer, as
the controller loop writes them (event, decision, effects)."""
from __future__ import annotations

import json

from controller_core import codec
from controller_core import commands as C
from controller_core import events as E
from controller_core.codec import digest as fast_digest
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from adapters.journal.writer import Journal
from replay import audit, local, tasks
from tests.core.builders import broker, snapshot

T0 = 1_800_000_000_000
MINUTE = 60_000


def _term(root, node: int, epoch: int, at: int, topics: dict, then: list) -> int:
    """A controller term on `node`'s journal: elected at `at` over `topics`, then the events of
    `then` in time order, its writes answered as ZooKeeper would, then resigned. Returns the
    time of the last record."""
    state = initial_state(ControllerConfig(broker_id=node, auto_leader_rebalance_enable=False))
    journal = Journal.open(root / f"node-{node}", node, fsync="never",
                           snapshot_provider=lambda: (state.epoch, {"state": codec.encode_state(state)}))
    queue = [E.ControllerElected(at=at, epoch=epoch, epoch_zk_version=epoch - 1,
                                 snapshot=snapshot(brokers=(1, 2, 3), topics=topics))]
    queue += sorted(then, key=lambda e: e.at)
    last = at
    while queue:
        event = queue.pop(0)
        seq = journal.append("event", codec.encode_event(event), controller_epoch=max(state.epoch, epoch), at=event.at)
        state, commands = step(state, event)
        journal.append("effects", {"event_seq": seq, "count": len(commands), "digest": fast_digest(commands)},
                       controller_epoch=state.epoch, at=event.at)
        last = event.at
        for c in commands:
            if isinstance(c, C.WritePartitionStates):
                queue.insert(0, E.PartitionStatesWritten(at=event.at + 5, write_id=c.write_id))
    resigned = E.ControllerResigned(at=last + 10, reason="test: the node stops")
    seq = journal.append("event", codec.encode_event(resigned), controller_epoch=state.epoch, at=resigned.at)
    state, commands = step(state, resigned)
    journal.append("effects", {"event_seq": seq, "count": len(commands), "digest": fast_digest(commands)},
                   controller_epoch=state.epoch, at=resigned.at)
    journal.close()
    return resigned.at


def _life(root, removed: bool):
    """Controller 3 (epoch 2) over topics t and keep, both led by broker 1; it resigns; t's
    znodes go (`removed`) or stay; controller 2 (epoch 3) loads the cluster, and a minute later
    broker 1 fails, and two minutes later it is back."""
    topics = {"t": [[1, 2], [1, 3]], "keep": [[1, 3]]}
    ended = _term(root, 3, 2, T0, topics, [])
    loaded = ended + 1_000
    now = {"keep": topics["keep"]} if removed else topics
    _term(root, 2, 3, loaded, now, [
        E.BrokersChanged(at=loaded + MINUTE, brokers=(broker(2), broker(3))),
        E.BrokersChanged(at=loaded + 2 * MINUTE, brokers=(broker(1), broker(2), broker(3))),
    ])
    return loaded


def test_a_topic_removed_between_terms_ends_at_the_next_load_and_is_never_offline(tmp_path):
    loaded = _life(tmp_path, removed=True)
    result = local.replay(tmp_path)
    assert [f for f in result.findings if f["severity"] == "violation"] == []
    offline = {(r["topic"], r["partition"]): r["offline_ms"] for r in result.tables["partition_offline"]}
    # t's partitions were gone a minute before broker 1 failed: never offline (before: 60 s
    # each, from the failure to its return, as if broker 1 still led them)
    assert offline[("t", 0)] == 0 and offline[("t", 1)] == 0, offline
    # keep was loaded: it fails over to broker 3 at once, nothing ends it
    assert offline[("keep", 0)] < 1_000, offline
    # broker 1's failure took only keep-0 (t's partitions were no longer its to lead), and it recovered
    (failure,) = result.tables["broker_failures"]
    assert failure["partitions"] == 1 and failure["unrecovered"] == 0, failure
    # the walk on the executors (the Spark job's task) measures the same from the job's columns
    timeline = sorted(result.tables["partition_timeline"], key=lambda r: (r["topic"], r["partition"], r["time"]))
    cluster_loads = audit.loads({"kind": "start", "time": t["start"], "epoch": t["epoch"]}
                                for t in result.tables["controller_terms"])
    assert [t for t, _ in cluster_loads] == [T0, loaded]
    intervals = result.tables["broker_intervals"]
    end = max(u["last_at"] for u in result.units)
    walked = tasks.walk_partitions(((r["topic"], r["partition"], r) for r in timeline), intervals,
                                   audit.failures(intervals), end, None, cluster_loads)
    measured = {}
    for kind, payload, *_ in walked:
        if kind == "offline":
            p = json.loads(payload)
            measured[(p["topic"], p["partition"])] = p["offline_ms"]
    assert measured == offline


def test_a_topic_still_there_at_the_next_load_is_measured_as_before(tmp_path):
    _life(tmp_path, removed=False)
    result = local.replay(tmp_path)
    offline = {(r["topic"], r["partition"]): r["offline_ms"] for r in result.tables["partition_offline"]}
    # t-0 and t-1 were loaded: t-0 (replicas 1, 2) fails over to 2, t-1 to 3, keep-0 to 3
    assert all(ms < 1_000 for ms in offline.values()) and len(offline) == 3, offline
    (failure,) = result.tables["broker_failures"]
    assert failure["partitions"] == 3 and failure["unrecovered"] == 0, failure
