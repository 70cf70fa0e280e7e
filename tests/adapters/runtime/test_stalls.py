"""The stall watchdog reports a loop held by a synchronous stretch, with the function that held
it, and stays silent while the loop turns."""
from __future__ import annotations

import asyncio
import logging
import time

from adapters.runtime.stalls import StallWatch


def _hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # a synchronous stretch, as a 100,000-partition decision on the loop would be


async def test_a_held_loop_is_reported_with_its_stack_and_length(caplog):
    caplog.set_level(logging.INFO, logger="kctl.stalls")
    watch = StallWatch(threshold=0.3, interval=0.05)
    watch.start()
    try:
        await asyncio.sleep(0.2)
        _hold_the_loop(0.8)
        await asyncio.sleep(0.3)
    finally:
        watch.stop()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "_hold_the_loop" in warnings[0].getMessage()
    assert len(watch.stalls) == 1 and 0.6 < watch.stalls[0] < 1.5


async def test_a_turning_loop_is_not_reported(caplog):
    caplog.set_level(logging.INFO, logger="kctl.stalls")
    watch = StallWatch(threshold=0.3, interval=0.05)
    watch.start()
    try:
        for _ in range(10):
            _hold_the_loop(0.05)
            await asyncio.sleep(0.05)
    finally:
        watch.stop()
    assert not [r for r in caplog.records if r.name == "kctl.stalls"]
    assert watch.stalls == []


async def test_a_stall_names_a_garbage_collection_in_progress_and_other_busy_threads(caplog):
    """A loop waiting for the GIL shows as waiting in select(); the report then has to name the
    holder: a collection in progress (seen through gc.callbacks) or another thread's frames."""
    import gc
    import threading

    caplog.set_level(logging.INFO, logger="kctl.stalls")
    watch = StallWatch(threshold=0.3, interval=0.05)
    watch.start()
    done = threading.Event()

    def _busy_worker():
        while not done.is_set():
            time.sleep(0.01)

    worker = threading.Thread(target=_busy_worker, name="busy-worker")
    worker.start()
    was_enabled = gc.isenabled()
    gc.disable()  # only the simulated collection below: a real one's "stop" would end it early
    try:
        assert watch._on_gc in gc.callbacks
        watch._on_gc("start", {"generation": 2})  # as the interpreter calls it when a collection starts
        _hold_the_loop(0.8)
        watch._on_gc("stop", {"generation": 2})
        await asyncio.sleep(0.3)
    finally:
        if was_enabled:
            gc.enable()
        done.set()
        worker.join()
        watch.stop()
    assert watch._on_gc not in gc.callbacks
    message = [r for r in caplog.records if r.levelno == logging.WARNING][0].getMessage()
    assert "garbage collection of generation 2 has been running for" in message
    assert "thread busy-worker is at" in message and "_busy_worker" in message
    assert watch.long_collections and watch.long_collections[0][0] == 2
