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
