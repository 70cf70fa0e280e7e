"""Pausing CPython's cyclic garbage collector around the replay's big decodes and digests.

A snapshot head of 100,000 partitions decodes into a few hundred thousand small values with no
reference cycles; the collections their allocations trigger walk the whole heap and can triple
the decode's cost. The replay pauses the collector around that work. A plain pause (off, then
back on if it was on) is enough here: the fold runs in one thread per Python worker. The live
controller's counted, thread-safe pause is adapters/runtime/gcpause.py; the replay does not import it,
because only `controller_core` and `replay` are shipped to Spark executors (replay/package.py).
"""
from __future__ import annotations

import gc


class gc_paused:
    """Context manager: the collector is off inside (if it was on)."""

    __slots__ = ("was_enabled",)

    def __enter__(self) -> "gc_paused":
        self.was_enabled = gc.isenabled()
        if self.was_enabled:
            gc.disable()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.was_enabled:
            gc.enable()
