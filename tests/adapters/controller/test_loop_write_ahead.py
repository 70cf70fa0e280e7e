"""Write-ahead with the fsync hidden behind the decision: the first event of a batch is decided
while the batch's group commit runs, and nothing of that decision is adopted or executed before
the record is durable."""
from __future__ import annotations

import asyncio
import os
import threading

from adapters.controller import loop as loop_module
from adapters.controller.loop import ControllerLoop
from adapters.journal.writer import Journal
from controller_core import commands as C
from controller_core import events as E
from controller_core.state import ControllerConfig
from controller_core.values import BrokerInfo, ReplicaAssignment
from tests.adapters.executors import Recorder


async def test_the_decision_is_computed_during_the_fsync_and_executed_only_after_it(tmp_path, monkeypatch):
    journal = Journal.open(tmp_path, 1, fsync="batch")
    executor = Recorder()
    loop = ControllerLoop(ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False), executor, journal)
    runner = asyncio.create_task(loop.run())
    try:
        brokers = (BrokerInfo(1, "h", 1, 10), BrokerInfo(2, "h", 2, 11))
        loop.put(E.ControllerElected(at=1, epoch=1, epoch_zk_version=1, snapshot=E.ClusterSnapshot(brokers=brokers)))
        await loop.wait_idle()
        executor.commands.clear()

        gate = threading.Event()  # holds every fsync until the test lets it go
        fsyncing = threading.Event()
        real_fsync = os.fsync

        def slow_fsync(fd):
            fsyncing.set()
            gate.wait(10)
            real_fsync(fd)

        decided = []
        real_step = loop_module.step

        def spy_step(state, event):
            decided.append((type(event).__name__, fsyncing.is_set(), gate.is_set()))
            return real_step(state, event)

        monkeypatch.setattr(os, "fsync", slow_fsync)
        monkeypatch.setattr(loop_module, "step", spy_step)
        before = loop.state
        durable = journal.durable_seq
        # a whole-cluster event: decided in a worker thread, so the fsync starts meanwhile
        loop.put(E.TopicsChanged(at=2, topics={"t"}, assignments=(("t", ((0, ReplicaAssignment((1, 2))),)),)))
        for _ in range(200):
            if decided and fsyncing.is_set():
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # time enough to act, were the loop to act before durability
        assert decided == [("TopicsChanged", decided[0][1], False)]  # decided before the fsync finished
        assert fsyncing.is_set() and journal.durable_seq == durable
        assert loop.state is before and executor.commands == []  # neither adopted nor executed

        gate.set()
        await loop.wait_idle()
        assert journal.durable_seq > durable
        assert "t" in loop.state.topics
        assert any(isinstance(c, C.WritePartitionStates) for c in executor.commands)
    finally:
        gate.set()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        loop.close_journal(flush=False)
