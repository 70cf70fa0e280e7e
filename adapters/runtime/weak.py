"""Callbacks that do not keep their object alive.

Why: a node (adapters/node.py) hands its bound methods to the components it owns (the loop's
executor, the ZooKeeper writer, the watches, the broker, the control server...). A bound method
holds its object, so each of those hand-offs closed a reference cycle node -> component ->
node, and a node that was closed or crashed and then dropped (the failover benchmark restarts
its victim on every run and drops a whole cluster per mode) was freed only by the cyclic
garbage collector, with everything hanging off it: the controller's state and the broker's
replicas, about 30 objects per partition. At 100,000 partitions that was 3 million objects
in one collection of several seconds, on the loop that runs the ZooKeeper heartbeats
(docs/notes/issue-16-cyclic-garbage.md). A component that holds the node through a
`weak_method` leaves the node to its owner: dropped, it is freed by reference counts at once.

A node that is running is referenced by its owner (the CLI's `run_until_stopped`, a test, the
benchmark) and by the frames of its own running tasks, so a call through a live callback always
finds it. A call after the object is gone returns `dead` (callbacks that deliver events or
answer questions: the event has nowhere to go); for a handler that must produce an answer, pass
`dead=ReferenceError` to raise instead.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable


def weak_method(method: Callable, dead: Any = None) -> Callable:
    """`method` (a bound method) called through a weak reference to its object. After the object
    is gone, a call returns `dead`, or raises it if it is an exception class."""
    ref = weakref.WeakMethod(method)
    raises = isinstance(dead, type) and issubclass(dead, BaseException)
    name = method.__qualname__

    def call(*args, **kwargs):
        bound = ref()
        if bound is None:
            if raises:
                raise dead(f"{name}: its object is gone")
            return dead
        return bound(*args, **kwargs)

    call.__qualname__ = call.__name__ = f"weak({name})"
    return call
