"""The persistent map behind the controller state, wrapped in two helpers.

A controller with 100,000 partitions cannot copy its maps on every event (KRaft moved its
metadata image to persistent collections for that reason). `immutables.Map` is a HAMT written
in C: `set` shares all but a path of the tree, and a batch of changes goes through one mutation
that is frozen at the end. Everything else in the core goes through `pmap()` and `edit()`, so
the choice of library stays in this file. A map that is built whole and never edited key by key
(`FrozenDict`, below) needs none of that and is a plain dict underneath.
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


class FrozenDict(dict):
    """A dict that nobody changes once made: for a map that is built whole and only read
    afterwards (`Outbox.intents`, one entry per partition a decision writes). A failover's
    100,000 intents take ~5 ms to copy into one of these and 75-200 ms to build into a
    persistent map, and nothing ever `set`s one key of them. Immutable as the numpy columns
    are: by convention, with the mutating methods refused; equal to a dict of the same items,
    hashed by its items."""

    __slots__ = ()

    def _refused(self, *args, **kwargs):
        raise TypeError("a FrozenDict is not changed once made")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refused  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self):
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


NO_ENTRIES = FrozenDict()
