"""Figures README states about the node's behaviour, each checked where it is implemented (see
docs/notes/issue-24.md for the list of README claims and what backs each)."""
from __future__ import annotations

import asyncio
import gc
import time

from adapters import gcpause, loop as loop_module, statelog
from adapters.loop import GC_BURST_PARTITIONS, ControllerLoop
from adapters.metrics import Window
from controller_core.state import ControllerConfig

from .test_gc_burst import _elected, _until
from .test_loop_journal import BusyRecorder


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
