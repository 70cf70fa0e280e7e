"""Reporting an asyncio loop that stopped turning, with where it was stuck.

The ZooKeeper session's heartbeats run on the node's event loop (adapters/controller/loop.py),
so a loop held by one synchronous stretch for longer than the session timeout loses the
session, and with it the controller's role. The log then shows the expiry, not its cause. This
watchdog names the cause: a task on the loop marks a heartbeat every `interval` seconds; a
daemon thread checks it, and when the mark is older than `threshold` it logs one WARNING with
the loop thread's stack at that moment (from `sys._current_frames()`; the thread does not need
the loop to run), and one INFO line with the stall's length when the loop turns again.

A loop thread shown waiting in `select`/`poll` is not stuck there: it is waiting for the GIL,
held by another thread. So the warning also names a garbage collection in progress (which
holds the GIL from start to end, in whichever thread allocated; a full collection of a
100,000-partition heap takes seconds: `gc.callbacks`), and the innermost frames of every other
thread that is running Python code.

Used by the failover benchmark, whose in-process nodes share its loop with the harness
(`kctl bench failover` writes these lines to nodes.log).
"""
from __future__ import annotations

import asyncio
import gc
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
        self._collecting: tuple[int, float, int] | None = None  # (generation, since, thread) of a collection
        self.long_collections: list[tuple[int, float]] = []  # (generation, seconds) of those >= threshold / 4

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._collecting = (info["generation"], time.monotonic(), threading.get_ident())
        elif self._collecting is not None:
            generation, since, _ = self._collecting
            self._collecting = None
            took = time.monotonic() - since
            if took >= self.threshold / 4:
                self.long_collections.append((generation, took))

    def start(self) -> None:
        self._thread_id = threading.get_ident()
        gc.callbacks.append(self._on_gc)
        self._mark = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._beat())
        self._watcher = threading.Thread(target=self._watch, name="stall-watch", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
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
                frames = sys._current_frames()
                frame = frames.get(self._thread_id)
                stack = "".join(traceback.format_stack(frame, limit=self.depth)) if frame is not None else "(unknown)\n"
                log.warning("event loop stalled for %.1f s so far; its thread is at (innermost last):\n%s%s", late, stack,
                            self._others(frames))
            elif reported_at is not None and mark != reported_at:
                length = mark - reported_at
                self.stalls.append(length)
                log.info("event loop turned again after a stall of %.1f s", length)
                reported_at = None

    def _others(self, frames: dict) -> str:
        """What else holds or wants the GIL: a collection in progress, other busy threads."""
        out = []
        collecting = self._collecting
        if collecting is not None:
            generation, since, ident = collecting
            out.append(f"a garbage collection of generation {generation} has been running for "
                       f"{time.monotonic() - since:.1f} s in thread {_name(ident)}\n")
        for ident, frame in frames.items():
            if ident in (self._thread_id, threading.get_ident()) or _idle(frame):
                continue
            out.append(f"thread {_name(ident)} is at:\n" + "".join(traceback.format_stack(frame, limit=4)))
        return "".join(out)


_IDLE = {("threading.py", "wait"), ("queue.py", "get"), ("thread.py", "_worker"), ("selectors.py", "select")}


def _idle(frame) -> bool:
    """A thread blocked waiting for work (a pool's idle worker, a timer): not a GIL holder."""
    code = frame.f_code
    return (code.co_filename.rsplit("/", 1)[-1], code.co_name) in _IDLE


def _name(ident: int) -> str:
    for t in threading.enumerate():
        if t.ident == ident:
            return t.name
    return str(ident)
