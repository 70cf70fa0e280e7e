"""A new controller's partition states as its ZooKeeper reader gives them: one column per
field, each distinct state content listed once.

After an election most state znodes of a cluster hold the same bytes as many others (one leader,
ISR and epochs per replica set): the reader parses each distinct content once
(adapters/controller/watches.py). `SnapshotStates` keeps that shape instead of making a
`LeaderIsr` per partition: the partitions (`tps`), the distinct contents (`contents`, whose own
`zk_version` means nothing), which content each partition holds (`content_of`) and each
partition's znode version (`versions`). A 100,000-partition snapshot is then a tuple of its
partitions and two integer arrays.

Who builds it: the election adapter, for `ClusterSnapshot.partition_states`; `of(pairs)` for
anything else (tests, benchmarks). Who reads the columns: `columnar_load.load`, which lays out
the new controller's image from them without touching a partition in Python. Everyone else (the
specification's walk in `failover.on_elected`, the journal's codec, the replay's fold) sees what
the field always held, a sequence of `(TopicPartition, LeaderIsr)` pairs: it iterates, indexes
and compares as the tuple of those pairs, so the journal's encoding and every decision are the
same whichever form a snapshot came in.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Iterable, Iterator

import numpy as np

from .values import LeaderIsr, TopicPartition


class SnapshotStates(Sequence):
    """Partition states as columns (see the module docstring). Immutable: the arrays are
    read-only and nothing is set after construction."""

    __slots__ = ("tps", "contents", "content_of", "versions")

    tps: tuple[TopicPartition, ...]
    contents: tuple[LeaderIsr, ...]
    content_of: np.ndarray
    versions: np.ndarray

    def __init__(self, tps: tuple, contents: tuple, content_of, versions):
        content_of = np.asarray(content_of, np.int64)
        versions = np.asarray(versions, np.int64)
        if not (len(tps) == len(content_of) == len(versions)):
            raise ValueError(f"SnapshotStates: {len(tps)} partitions, {len(content_of)} content indexes "
                             f"and {len(versions)} versions")
        if len(content_of) and (content_of.min() < 0 or content_of.max() >= len(contents)):
            raise ValueError(f"SnapshotStates: a content index is outside the {len(contents)} contents")
        content_of.flags.writeable = False
        versions.flags.writeable = False
        for name, value in (("tps", tuple(tps)), ("contents", tuple(contents)), ("content_of", content_of),
                            ("versions", versions)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"SnapshotStates is immutable (tried to set {name})")

    @classmethod
    def of(cls, pairs: Iterable[tuple[TopicPartition, LeaderIsr]]) -> "SnapshotStates":
        """The columns of `(tp, LeaderIsr)` pairs, equal contents (all but the version) listed
        once. Every field must be an int (an ISR a tuple of ints): a bool would be merged with the
        int it equals."""
        tps, codes, versions = [], [], []
        index: dict[tuple, int] = {}
        contents: list[LeaderIsr] = []
        for tp, li in pairs:
            leader, leader_epoch, isr, controller_epoch, version = li
            if not (type(leader) is type(leader_epoch) is type(controller_epoch) is type(version) is int
                    and type(isr) is tuple and all(type(b) is int for b in isr)):
                raise TypeError(f"SnapshotStates.of: the state of {tp} holds a value that is not an int: {li!r}")
            key = (leader, leader_epoch, isr, controller_epoch)
            k = index.get(key)
            if k is None:
                k = index[key] = len(contents)
                contents.append(li if type(li) is LeaderIsr else LeaderIsr(*li))
            tps.append(tp)
            codes.append(k)
            versions.append(version)
        return cls(tuple(tps), tuple(contents), np.array(codes, np.int64), np.array(versions, np.int64))

    def encoded(self) -> list:
        """The pairs as the journal's codec encodes them (each `[[topic, partition], [leader,
        leader_epoch, [isr], controller_epoch, zk_version]]`), from the columns: a new
        controller's ControllerElected is journaled before it is decided, and encoding a
        100,000-partition snapshot a pair at a time was the larger part of that record's time.
        The lists of one content are made once and shared by its partitions' lists (the encoded
        event is only read, by the JSON writer)."""
        contents = self.contents
        heads = [[c[0], c[1], list(c[2]), c[3]] for c in contents]
        pairs = zip(self.tps, self.content_of.tolist(), self.versions.tolist())
        if all(c[4].__class__ is int for c in contents):
            return [[list(tp), [*heads[k], v]] for tp, k, v in pairs]
        # (a content whose own version is not an int: the pair holds it where it equals the
        # partition's, as iterating gives it)
        return [[list(tp), [*heads[k], contents[k][4] if contents[k][4] == v else v]] for tp, k, v in pairs]

    def __len__(self) -> int:
        return len(self.tps)

    def __iter__(self) -> Iterator[tuple[TopicPartition, LeaderIsr]]:
        contents = self.contents
        for tp, k, version in zip(self.tps, self.content_of.tolist(), self.versions.tolist()):
            li = contents[k]
            yield tp, (li if li[4] == version else li.with_version(version))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self)[i]
        li = self.contents[int(self.content_of[i])]
        version = int(self.versions[i])
        return self.tps[i], (li if li[4] == version else li.with_version(version))

    def __eq__(self, other) -> bool:
        if isinstance(other, SnapshotStates):
            return other is self or tuple(self) == tuple(other)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"SnapshotStates({len(self.tps)} partitions, {len(self.contents)} distinct states)"

    def __reduce__(self):
        return SnapshotStates, (self.tps, self.contents, self.content_of, self.versions)
