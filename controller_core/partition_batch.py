"""The partitions one request of a decision's batch carries, in the order they were added.

A `Draft` collects, for each broker, the partitions of its LeaderAndIsr (each with the `is_new`
flag Kafka's addLeaderAndIsrRequestForBrokers gives a replica that is being created), and the
partitions of the decision's UpdateMetadata. A partition added twice is sent once, at its first
place; `is_new` once set stays set. A dict `tp -> is_new` says all that, and the scalar rules add
one partition at a time to it.

A whole-cluster decision over the columns (columnar_*.py) adds each broker's partitions at once,
already distinct: a new controller tells each of five brokers about 60,000 of 100,000
partitions. Hashing every one of them into a dict (and reading the flags back for the request)
was a quarter of that decision, for nothing: no partition is added twice there. So a batch
keeps such a block as the list it was given (`extend(..., distinct=True)`, with the rows of the
image the caller found them at, when it knows them), and only a later addition that may repeat
one of its partitions makes the set of members, once.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np


class PartitionBatch:
    """Distinct partitions in the order of their first addition, each new or not (see the
    module docstring). Filled by the `Draft` and the columnar decisions, read once by
    `Draft._outbox` (`tps()`, `new()`) when the decision is finished."""

    __slots__ = ("_block", "_rows", "_more", "_members", "_new")

    def __init__(self) -> None:
        self._block: list = []  # partitions given whole and distinct, before anything else
        self._rows: np.ndarray | None = None  # their rows in the image, when the caller knew them
        self._more: dict | None = None  # later additions `tp -> None`, in order
        self._members: set | None = None  # every partition, made on the first later addition
        self._new: set | None = None

    def __len__(self) -> int:
        return len(self._block) + (len(self._more) if self._more else 0)

    def __bool__(self) -> bool:
        return bool(self._block) or bool(self._more)

    def _membership(self) -> set:
        members = self._members
        if members is None:
            members = self._members = set(self._block)
            self._more = {}
        return members

    def add(self, tp, is_new: bool = False) -> None:
        """One partition (the scalar rules' way)."""
        if self._block:
            members = self._membership()
            if tp not in members:
                members.add(tp)
                self._more[tp] = None
        elif self._more is None:
            self._more = {tp: None}
        elif tp not in self._more:
            self._more[tp] = None
        if is_new:
            if self._new is None:
                self._new = {tp}
            else:
                self._new.add(tp)

    def extend(self, tps: Iterable, distinct: bool = False, rows: np.ndarray | None = None) -> None:
        """Many partitions, none new. `distinct=True`: the caller guarantees that `tps` lists no
        partition twice (distinct rows of the image), and may give `rows`, the image rows they
        were found at; into an empty batch they then go as they are, without hashing one (a
        list is kept, not copied: the caller does not change it afterwards)."""
        if isinstance(tps, (list, tuple)) and not tps:
            return  # (nothing to add: no membership set of a 100,000-partition block made for it)
        if distinct and not self:
            self._block = tps if isinstance(tps, list) else list(tps)
            self._rows = rows if rows is not None and len(rows) == len(self._block) else None
            return
        if self._block:
            members = self._membership()
            more = self._more
            for tp in tps:
                if tp not in members:
                    members.add(tp)
                    more[tp] = None
        elif self._more is None:
            self._more = dict.fromkeys(tps)
        else:
            self._more.update(dict.fromkeys(tps))

    def tps(self) -> tuple:
        """The partitions, in the order of their first addition."""
        if not self._more:
            return tuple(self._block)
        return tuple(self._block) + tuple(self._more)

    def new(self) -> frozenset:
        """The partitions sent with `is_new`."""
        return frozenset(self._new) if self._new else frozenset()

    def rows(self) -> np.ndarray | None:
        """The image rows of `tps()`, if the batch is one block whose rows the caller gave."""
        return self._rows if not self._more else None



_FEW_BROKERS = 16
"""Up to this many distinct brokers, `by_broker` finds each one's rows by a comparison over the
matrix (a pass per broker) instead of sorting every entry: at 100,000 rows of 3 replicas over 5
brokers, 3.5 against 24 ms."""


def by_broker(reps: np.ndarray, sent: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """`(broker, rows)` for every broker that `sent[i, j]` marks as a recipient of row i
    (`reps[i, j]` is the broker), the rows ascending: the brokers in the order a walk over the
    rows (and over each row's replicas) first meets them. That is the order in which
    `RequestBatch.send_leader_and_isr`, called partition by partition, makes the brokers' batches;
    the whole-cluster decisions (columnar_*.py) fill each broker's batch whole from its rows.
    (A row that names a broker twice, as a tiled matrix does, is listed twice.)"""
    ids = reps[sent]  # row-major: row order, then replica order within a row
    if not len(ids):
        return []
    lo, hi = int(ids.min()), int(ids.max())
    if hi - lo < 1 << 16:
        counts = np.bincount((ids - lo).astype(np.intp))
        present = np.flatnonzero(counts)
        if len(present) <= _FEW_BROKERS:
            width = reps.shape[1]
            found = []
            for v in present.tolist():
                at = np.flatnonzero(((reps == v + lo) & sent).ravel())  # its entries, row-major
                found.append((int(at[0]), v + lo, at // width))
            found.sort(key=lambda f: f[0])  # by first mention
            return [(b, rows) for _, b, rows in found]
        # many brokers: a stable radix sort of 16-bit keys, each broker's entries in row order
        at_row = np.nonzero(sent)[0]
        grouped = np.argsort((ids - lo).astype(np.uint16), kind="stable")
        sizes = counts[present]
        ends = np.cumsum(sizes)
        starts = ends - sizes
        firsts = grouped[starts]  # each broker's first entry
        return [(int(present[k]) + lo, at_row[grouped[starts[k]:ends[k]]])
                for k in np.argsort(firsts, kind="stable").tolist()]
    at_row = np.nonzero(sent)[0]
    brokers, first = np.unique(ids, return_index=True)
    grouped = np.argsort(ids, kind="stable")  # each broker's entries, still in row order
    starts = np.searchsorted(ids[grouped], brokers)
    ends = np.append(starts[1:], len(ids))
    return [(brokers[k].item(), at_row[grouped[starts[k]:ends[k]]]) for k in np.argsort(first, kind="stable").tolist()]


def by_state_and_broker(codes: np.ndarray, reps: np.ndarray, sent: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """`by_broker` over (state code, broker) pairs: `(code, broker, rows)` for each pair that
    `sent` marks (`codes[i, j]` the state of replica `reps[i, j]`), in the order a walk first
    meets them: a replica log's groups, one line per state left and broker."""
    keys = codes.astype(np.int64) * (1 << 32) + reps.astype(np.int64)
    return [(key >> 32, key & 0xFFFFFFFF, rows) for key, rows in by_broker(keys, sent)]


def picker(tps: list):
    """`rows -> [tps[r] for r in rows]` for an array of positions. A long list is picked from as
    an object array: numpy's gather is ~3x faster than a Python step per row (10,000 rows of 6,000
    picked: 0.07 against 0.21 ms), once the array is made (0.16 ms: worth it from two picks)."""
    if len(tps) < 256:
        return lambda rows: list(map(tps.__getitem__, rows.tolist()))
    held = np.fromiter(tps, object, len(tps))  # (not np.array: it would unpack the tuples)
    return lambda rows: held[rows].tolist()

