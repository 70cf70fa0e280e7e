"""Handing the C heap's free pages back to the operating system after a large decision.

Why: a new controller's load of 100,000 partitions builds its requests (a LeaderAndIsr per broker,
an UpdateMetadata of every partition per broker) next to the state, and frees them once they
are sent. glibc's allocator keeps most of those freed pages (its heap top and free chunks below
`M_TRIM_THRESHOLD`), so the process stays some 20 MB larger than what it holds: measured with
`benchmarks/core_step.py`'s memory check, 50.7 MB of growth against 21.3 MB still allocated,
and 30.2 MB after `malloc_trim(0)`. The controller loop trims when it freezes a grown state out
of the collector (adapters/controller/loop.py, `_freeze_grown_state`): once per doubling of the
state, with the controller quiet.

`malloc_trim` is glibc's; elsewhere (musl, macOS) `trim()` does nothing and says so.

`freeze_survivors()` is the step both long-lived holders of a grown state take (the controller
loop for its partition image, a broker for its replicas): collect, move what survives out of the
cyclic collector's generations, trim.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc

_malloc_trim = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _malloc_trim = _libc.malloc_trim
    _malloc_trim.argtypes = [ctypes.c_size_t]
    _malloc_trim.restype = ctypes.c_int
except (OSError, AttributeError):  # not glibc: nothing to trim this way
    _malloc_trim = None


def trim() -> bool | None:
    """Release the C heap's free memory to the system: True if some was released, False if
    none could be, None where the C library has no `malloc_trim`."""
    if _malloc_trim is None:
        return None
    return bool(_malloc_trim(0))


def freeze_survivors() -> tuple[int, int, bool | None]:
    """Collect everything, then freeze what survives out of the collector's scans, then trim:
    returns (objects frozen, objects collected, what `trim()` returned).

    Unfrozen and collected first: a cycle frozen while alive is never collected once it dies,
    so a freeze without this keeps the dead of the previous one for good. Costs one full
    collection (tens of ms on a 100,000-partition process): call it when the process is quiet,
    after its state grew, not on every change."""
    gc.unfreeze()
    collected = gc.collect()
    gc.freeze()
    return gc.get_freeze_count(), collected, trim()
