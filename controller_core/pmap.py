"""The persistent map behind the controller state, wrapped in two helpers.

A controller with 100,000 partitions cannot copy its maps on every event (KRaft moved its
metadata image to persistent collections for that reason). `immutables.Map` is a HAMT written
in C: `set` shares all but a path of the tree, and a batch of changes goes through one mutation
that is frozen at the end. Everything else in the core goes through `pmap()` and `edit()`, so
the choice of library stays in this file.
"""
from __future__ import annotations

from typing import Iterable, Mapping, TypeVar

import immutables

K = TypeVar("K")
V = TypeVar("V")

PMap = immutables.Map
EMPTY: immutables.Map = immutables.Map()


def pmap(items: Mapping | Iterable | None = None) -> immutables.Map:
    """A persistent map from a dict or an iterable of pairs."""
    if not items:
        return EMPTY
    return immutables.Map(items)


def edit(m: immutables.Map):
    """A mutation of `m` (`mm[k] = v`, `del mm[k]`, `mm.finish()`); `m` itself never changes."""
    return m.mutate()
