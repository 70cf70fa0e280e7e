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

`configure()` (called when a node process starts, adapters/cli/node.py) fixes glibc's mmap
threshold at 512 KB. By default glibc raises that threshold each time it frees a large mapped
block, so after the first large free every later array up to that size comes from the heap, and
its pages stay with the process when freed: a new controller's 100,000-partition load gathers
~27 MB of request columns and the resident set stays 44.6 MB above where it started, with 21.3 MB
still allocated. Fixed at 512 KB, blocks from 512 KB up are mapped and unmapped each time:
`benchmarks/core_step.py`'s memory check 44.6 -> 33.9 MB, the price being the page faults of a
fresh mapping for each large temporary array (a 100,000-partition broker failure's decision
96-111 -> 127-132 ms; 10,000 partitions and an ISR change unchanged; end to end at 100,000
partitions within the runs' noise). Measured at 256 KB, 1 MB and 4 MB too (benchmarks/README.md,
"Evening", 2026-11-28): 512 KB is the smallest that kept the decisions' targets.

`freeze_survivors()` is the step both long-lived holders of a grown state take (the controller
loop for its partition image, a broker for its replicas): collect, move what survives out of the
cyclic collector's generations, trim.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os

MMAP_THRESHOLD = 512 * 1024
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h

_malloc_trim = _mallopt = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _malloc_trim = _libc.malloc_trim
    _malloc_trim.argtypes = [ctypes.c_size_t]
    _malloc_trim.restype = ctypes.c_int
    _mallopt = _libc.mallopt
    _mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    _mallopt.restype = ctypes.c_int
except (OSError, AttributeError):  # not glibc: nothing to trim this way
    _malloc_trim = _mallopt = None


def configure(threshold: int = MMAP_THRESHOLD) -> bool | None:
    """Fix the C heap's mmap threshold (see the module docstring): True if set, False if the C
    library refused it or `MALLOC_MMAP_THRESHOLD_` in the environment already chose one (the
    operator's setting wins), None where the C library has no `mallopt`."""
    if _mallopt is None:
        return None
    if os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return False
    return bool(_mallopt(_M_MMAP_THRESHOLD, threshold))


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
