"""Reporting an asyncio loop that stopped turning, with where it was stuck.

The ZooKeeper session's heartbeats run on the node's event loop (adapters/controller/loop.py),
so a loop held by one synchronous stretch for longer than the session timeout loses the
session, and with it the controller's role. The log then shows the expiry, not its cause. This
watchdog names the cause: a task on the loop marks a heartbeat every `interval` seconds; a
daemon thread checks it, and when the mark is older than `threshold` it logs one WARNING with
the loop thread's stack at that moment (from `sys._current_frames()`; the thread does not need
the loop to run), and one INFO line with the stall's length when the loop turns again.

Used by the failover benchmark, whose in-process nodes share its loop with the harness
(`kctl bench failover` writes these lines to nodes.log).
"""
from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

log = logging.getLogger("kctl.stalls")


class StallWatch:
    """Start with `start()` on the loop to watch; `stop()` when done."""

    def __init__(self, threshold: float = 2.0, interval: float = 0.25, depth: int = 12):
        self.threshold = threshold
        self.interval = interval
        self.depth = depth
        self.stalls: list[float] = []  # the length of each stall seen, in seconds
        self._mark = time.monotonic()
        self._thread_id: int | None = None
        self._task: asyncio.Task | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        self._thread_id = threading.get_ident()
        self._mark = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._beat())
        self._watcher = threading.Thread(target=self._watch, name="stall-watch", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()

    async def _beat(self) -> None:
        while True:
            self._mark = time.monotonic()
            await asyncio.sleep(self.interval)

    def _watch(self) -> None:
        reported_at = None  # the mark of the stall already reported
        while not self._stop.wait(self.interval):
            mark = self._mark
            late = time.monotonic() - mark
            if late > self.threshold and reported_at != mark:
                reported_at = mark
                frame = sys._current_frames().get(self._thread_id)
                stack = "".join(traceback.format_stack(frame, limit=self.depth)) if frame is not None else "(unknown)\n"
                log.warning("event loop stalled for %.1f s so far; its thread is at (innermost last):\n%s", late, stack)
            elif reported_at is not None and mark != reported_at:
                length = mark - reported_at
                self.stalls.append(length)
                log.info("event loop turned again after a stall of %.1f s", length)
                reported_at = None
