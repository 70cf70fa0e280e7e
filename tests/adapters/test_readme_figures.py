"""Figures README states about the node's behaviour, each checked where it is implemented (README
names this file next to the claims it backs)."""
from __future__ import annotations

import asyncio
import gc
import threading
import time

import pytest

from adapters.runtime import gcpause
from adapters.controller import loop as loop_module
from adapters.observability import statelog
from adapters.controller.loop import GC_BURST_PARTITIONS, ControllerLoop
from adapters.observability.metrics import Window
from adapters.zookeeper.session import ZkError, ZkSession
from controller_core import commands as C
from controller_core.state import ControllerConfig, initial_state
from controller_core.values import TopicPartition

from tests.adapters.controller.test_gc_burst import _elected, _until
from tests.adapters.controller.test_loop_journal import BusyRecorder, topic


def test_timer_quantiles_cover_the_last_1028_observations():
    """README, Metrics: "Quantiles cover the last 1,028 observations"; count and sum cover all."""
    w = Window()
    for v in range(3000):
        w.observe(float(v))
    recent, count, total = w.snapshot()
    assert recent == [float(v) for v in range(3000 - 1028, 3000)]
    assert count == 3000 and total == sum(range(3000))


def test_the_state_change_log_rotates_at_64_mib_keeping_4_files(tmp_path):
    """README, Logs: the state-change log "rotates at 64 MB keeping 4 files" (as a node opens it)."""
    log = statelog.StateChangeFile.in_directory(tmp_path, 1)
    try:
        assert log.path.parent == tmp_path and log.path.name == "state-change.log"
        assert (log._file.maxBytes, log._file.backupCount) == (64 * 1024 * 1024, 4)
    finally:
        log.close()


async def test_a_burst_that_never_goes_quiet_gives_the_collector_back_at_the_cap(monkeypatch):
    """README, How it is built: the collector is paused until the controller is quiet, "at most
    30 s". The cap is shortened here to see it end a burst whose requests never finish."""
    assert loop_module.GC_BURST_MAX_S == 30.0
    monkeypatch.setattr(loop_module, "GC_BURST_MAX_S", 0.5)
    assert gc.isenabled() and gcpause.held() == 0
    executor = BusyRecorder()  # busy for good: never quiet
    loop = ControllerLoop(ControllerConfig(broker_id=3), executor)
    task = asyncio.create_task(loop.run())
    try:
        loop.put(_elected(GC_BURST_PARTITIONS))
        await loop.wait_idle()
        await _until(lambda: loop.bursting, "the burst to start")
        started = time.monotonic()
        assert not gc.isenabled()
        await _until(lambda: not loop.bursting, "the burst to end at the cap", timeout=10)
        took = time.monotonic() - started
        assert gc.isenabled() and executor.busy()
        assert took < 5, f"the burst ended {took:.1f} s after it was seen, past its 0.5 s cap"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        gc.enable()
    assert gcpause.held() == 0


def test_the_state_change_log_holds_a_line_at_most_2_s_while_the_controller_stays_busy(tmp_path):
    """README, Logs: while the controller is in a burst its state-change lines "wait (at most
    2 s)"; this controller never goes quiet."""
    log = statelog.StateChangeFile(tmp_path / "state-change.log", controller_id=7)
    log.hold_while(lambda: True)
    try:
        entry = C.StateChange("OnlinePartition", "OfflinePartition", (TopicPartition("held", 0),))
        logged = time.monotonic()
        statelog.log_state_changes(C.LogStateChanges(cause="test", entries=(entry,)),
                                   initial_state(ControllerConfig(broker_id=7)), 7, 1)
        time.sleep(1.0)
        assert "held-0" not in log.path.read_text(), "written while the controller was busy"
        while "held-0" not in log.path.read_text():
            assert time.monotonic() - logged < 6, "a line was held longer than 2 s (6 s with slack)"
            time.sleep(0.02)
    finally:
        log.close()


async def test_a_request_over_jute_maxbuffer_is_refused_before_it_is_sent(zk_connect):
    """README, Faults: "A ZooKeeper request over jute.maxbuffer (1 MiB) is refused with a clear
    error before it is sent": the session stays usable and nothing was written."""
    zk = await ZkSession.connect(zk_connect)
    try:
        with pytest.raises(ZkError, match=r"larger than ZooKeeper accepts \(jute.maxbuffer, 1,048,575 bytes\)"):
            # sent, the server would drop the connection and the write be re-sent for ever
            await asyncio.wait_for(zk.create("/big", b"x" * (1024 * 1024)), 20)
        assert await zk.exists("/big") is None
        await zk.create("/small", b"x" * (1024 * 1024 - 200))  # just under the limit: accepted
        data, _ = await zk.get("/small")
        assert len(data) == 1024 * 1024 - 200
    finally:
        await asyncio.wait_for(zk.close(), 20)


@pytest.mark.parametrize("partitions, offloaded", [(1900, False), (2000, True)])
async def test_decisions_run_in_a_worker_thread_from_2000_partitions_on(monkeypatch, partitions, offloaded):
    """README, How it is built: "from 2,000 partitions on, `step()` ... run[s] in a worker
    thread", so that ZooKeeper's heartbeats on the loop are not held up by a large decision."""
    threads: list[tuple[str, bool]] = []
    real = loop_module.step

    def recording(state, event):
        threads.append((type(event).__name__, threading.get_ident() == loop_thread))
        return real(state, event)

    monkeypatch.setattr(loop_module, "step", recording)
    loop_thread = threading.get_ident()
    executor = BusyRecorder()
    executor.busy_now = False
    loop = ControllerLoop(ControllerConfig(broker_id=3), executor)
    task = asyncio.create_task(loop.run())
    try:
        loop.put(_elected(partitions))
        await loop.wait_idle()
        loop.put(topic("small", 2))  # a one-partition decision on a state of that size
        await loop.wait_idle()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        gc.enable()
    on_loop = not offloaded
    assert threads == [("ControllerElected", on_loop), ("TopicsChanged", on_loop)], threads
