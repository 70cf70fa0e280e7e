"""The loop's journal and the replay's cut at a snapshot agree when a segment rolls while
effects records are still pending (they are written once the controller is quiet).

Found by the ten-minute chaos soak: a segment rolled at the first event of a new batch while the
effects of the four events stepped before it were still queued; the snapshot head held their
result, but the replay (which cuts by the effects records before a snapshot) re-executed them
after it and reported re-execution and snapshot mismatches."""
from __future__ import annotations

import asyncio

from adapters.journal.writer import Journal
from adapters.controller.loop import ControllerLoop
from controller_core import events as E
from controller_core.state import ControllerConfig
from controller_core.values import BrokerInfo, ReplicaAssignment
from replay import local


class BusyRecorder:
    """The executor's place: records nothing, and says it is busy while `busy` is set, which
    holds back the effects records as a controller with requests in flight does."""

    def __init__(self):
        self.busy_now = True

    def execute(self, commands, state) -> None:
        pass

    def busy(self) -> bool:
        return self.busy_now


def topic(name: str, at: int) -> E.TopicsChanged:
    return E.TopicsChanged(at=at, topics={name}, assignments=((name, ((0, ReplicaAssignment((1, 2))),)),))


async def test_a_roll_with_effects_pending_replays_without_mismatch(tmp_path):
    journal = Journal.open(tmp_path / "node-1", 1, fsync="never")
    executor = BusyRecorder()
    loop = ControllerLoop(ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False), executor, journal)
    runner = asyncio.create_task(loop.run())
    try:
        brokers = (BrokerInfo(1, "h", 1, 10), BrokerInfo(2, "h", 2, 11))
        loop.put(E.ControllerElected(at=1, epoch=1, epoch_zk_version=1, snapshot=E.ClusterSnapshot(brokers=brokers)))
        loop.put(topic("a", 2))
        await loop.wait_idle()
        assert loop._effects  # held back: the executor is busy
        loop.roll_journal()
        loop.put(E.TopicsChanged(at=3, topics={"a", "b"}, assignments=(("b", ((0, ReplicaAssignment((2, 1))),)),)))
        await loop.wait_idle()
        executor.busy_now = False
        for _ in range(100):
            if not loop._effects:
                break
            await asyncio.sleep(0.02)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        journal.close()
    replayed = local.replay(tmp_path)
    bad = [f for f in replayed.findings if f["severity"] == "violation"]
    assert bad == [] and replayed.passed
    assert replayed.stats["events"] == 3


async def test_the_effects_records_carry_the_loops_times_and_the_replay_charts_them(tmp_path):
    """Each effects record says how long its event waited in the queue and took on the loop
    (`queue_us`, `step_us`, `process_us`), so that the replay's events table and its
    processing-time chart show the live controller's times beside its own re-execution's."""
    from adapters.journal.format import read_journal  # (the journal's own reader)

    journal = Journal.open(tmp_path / "node-1", 1, fsync="never")
    executor = BusyRecorder()
    executor.busy_now = False
    loop = ControllerLoop(ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False), executor, journal)
    runner = asyncio.create_task(loop.run())
    try:
        brokers = (BrokerInfo(1, "h", 1, 10), BrokerInfo(2, "h", 2, 11))
        loop.put(E.ControllerElected(at=1, epoch=1, epoch_zk_version=1, snapshot=E.ClusterSnapshot(brokers=brokers)))
        for k in range(5):
            loop.put(topic(f"t{k}", 2 + k))
        await loop.wait_idle()
        loop.flush_effects()
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        journal.close()
    effects = [r["body"] for r in read_journal(tmp_path / "node-1") if r["type"] == "effects"]
    assert len(effects) == 6
    for body in effects:
        assert all(type(body[k]) is int and body[k] >= 0 for k in ("queue_us", "step_us", "process_us")), body
        assert body["process_us"] >= body["step_us"] > 0, body
    replayed = local.replay(tmp_path)
    assert replayed.passed
    events = replayed.tables["events"]
    assert len(events) == 6
    by_seq = {e["seq"]: e for e in events}
    for body in effects:
        row = by_seq[body["event_seq"]]
        assert row["live_process_us"] == body["process_us"] and row["live_step_us"] == body["step_us"]
        assert row["queue_ms"] == body["queue_us"] / 1000
    live = [v for v in replayed.series["live_process_us_p50"] if v is not None]
    assert live and all(v > 0 for v in live)
    times = replayed.stats["process_ms_per_event"]
    assert times["count"] == 6 and 0 < times["median"] <= times["max"]
    assert times["max"] == max(b["process_us"] for b in effects) / 1000
    assert replayed.stats["queue_ms_per_event"]["count"] == 6
    from replay import report

    assert "live processing time per event (as journaled): median" in report.summary_text(replayed.stats, [], True)
