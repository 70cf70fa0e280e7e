"""Pausing CPython's cyclic garbage collector, counted, from any thread.

Why the controller touches the collector at all: its state is a large graph of small immutable
values (a 10,000-partition cluster is a few hundred thousand objects) that hold no reference
cycles and are freed by reference counts. The cyclic collector cannot free any of them, but it
walks all of them: a full collection landing inside a 10,000-partition failover took 130-160 ms
of the controller's critical path (measured with `gc.callbacks` in the failover benchmark).

Several adapters pause it at once, from different threads: the wire decoder around one big
parse (in a broker's decoding thread) and the controller loop for a whole burst of work on a
large cluster (adapters/controller/loop.py). A plain "disable, then enable if it was enabled" lets one
user's `enable()` end another's pause; here the collector is off while any pause is held and
back on (if it was on before the first) when the last one ends.

The pure core's codec keeps its own plain pause (`controller_core.codec.gc_paused`: the core
takes no locks). Mixed with these, the worst it can do is turn the collector back on during
part of a burst; it never leaves it off, and a host that disabled the collector itself keeps
it disabled: no pause turns it on.
"""
from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_holders = 0
_was_enabled = False


def pause() -> None:
    """Hold the collector off until the matching `resume()`."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            if _was_enabled:
                gc.disable()
        _holders += 1


def resume() -> None:
    """End one `pause()`; the last one turns the collector back on if it was on."""
    global _holders
    with _lock:
        if _holders == 0:
            raise RuntimeError("gcpause.resume() without a pause")
        _holders -= 1
        if _holders == 0 and _was_enabled:
            gc.enable()


def held() -> int:
    """How many pauses are held (tests)."""
    return _holders


class gc_paused:
    """Context manager: the collector is off inside (see the module docstring)."""

    __slots__ = ()

    def __enter__(self) -> "gc_paused":
        pause()
        return self

    def __exit__(self, *exc_info) -> None:
        resume()
