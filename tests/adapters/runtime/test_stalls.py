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
