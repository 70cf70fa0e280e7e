"""The partitions of one LeaderAndIsr or UpdateMetadata request, as columns (issue 17).

A release of a 10,000-partition decision sends 10,000 partitions in UpdateMetadata and as many
in LeaderAndIsr; building one `PartitionView` tuple per partition per request was most of the
release's cost, and the sender then took every tuple apart again to write the request's columnar
body (adapters/control/requests.py). `emit_outbox` (draft.py) now gathers each request's rows
from the partition image into a `PartitionViews`: the columns, aligned with the partitions.

- The sender encodes the columns (`requests.views_body`), never the tuples.
- Everything else (the journal's digest of the commands, the in-memory shell, tests) sees a
  sequence of `PartitionView` values equal to the tuple the scalar path builds: they are made on
  first use and kept. `==` and `hash` are those of that tuple, so a command holding a
  `PartitionViews` equals the same command holding the tuple.
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, repeat

import numpy as np

from .columns import PartitionImage, _cut
from .values import LEADER_DURING_DELETE, PartitionView, TopicPartition

_new = tuple.__new__


class ColumnRows(Sequence):
    """Columns read as the sequence of values they stand for (`_values()`: made on first use,
    then kept): a `PartitionViews`, a `PartitionWrites` (partition_writes.py). Its length is
    that of `tps`; `==` and `hash` are those of the tuple of values, so a command holding one
    equals the same command holding the tuple."""

    __slots__ = ()
    tps: Sequence

    def _values(self) -> tuple:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.tps)

    def __iter__(self):
        return iter(self._values())

    def __getitem__(self, i):
        return self._values()[i]

    def __eq__(self, other) -> bool:
        if other is self:
            return True
        if isinstance(other, (ColumnRows, tuple, list)):
            return self._values() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values()!r})"


class PartitionViews(ColumnRows):
    """Columns of partition states, one row per partition of `tps` (see the module docstring).
    `isr` and `replicas` are left-packed matrices padded with -1; `adding` and `removing`, when
    not None, are masks over `replicas`' positions; `is_new`, when not None, a mask over rows."""

    __slots__ = ("tps", "leader", "leader_epoch", "isr", "controller_epoch", "zk_version", "replicas",
                 "adding", "removing", "is_new", "source", "_views")

    def __init__(self, tps: tuple[TopicPartition, ...], leader, leader_epoch, isr, controller_epoch, zk_version,
                 replicas, adding=None, removing=None, is_new=None, source=None):
        self.tps = tps
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.controller_epoch = controller_epoch
        self.zk_version = zk_version
        self.replicas = replicas
        self.adding = adding
        self.removing = removing
        self.is_new = is_new
        # (the `Gathering` of the `ImageRows` it was gathered by, the image row of each
        # partition) or None: the requests of one release gathered from the same columns, which
        # the digest writes a partition's text for once (digest._SharedRows); not part of the value
        self.source = source
        self._views: tuple[PartitionView, ...] | None = None

    def views(self) -> tuple[PartitionView, ...]:
        """The rows as `PartitionView` values (built once)."""
        views = self._views
        if views is None:
            views = self._views = self._build()
        return views

    def _build(self) -> tuple[PartitionView, ...]:
        n = len(self.tps)
        if not n:
            return ()
        # the replica and ISR lists are few distinct rows: each made once, then shared (below)
        reps = _row_tuples(self.replicas)
        isrs = _row_tuples(self.isr)
        if self.adding is not None:
            adding, removing = [()] * n, [()] * n
            flagged = np.flatnonzero(self.adding.any(axis=1) | self.removing.any(axis=1)).tolist()
            if flagged:
                adds, rems = self.adding[flagged].tolist(), self.removing[flagged].tolist()
                for k, add, rem in zip(flagged, adds, rems):
                    replicas = reps[k]
                    adding[k] = tuple(r for r, f in zip(replicas, add) if f)
                    removing[k] = tuple(r for r, f in zip(replicas, rem) if f)
        else:
            adding, removing = repeat((), n), repeat((), n)  # (two iterators: zip draws from each)
        new = self.is_new.tolist() if self.is_new is not None else repeat(False, n)
        return tuple(map(_view, zip(self.tps, self.leader.tolist(), self.leader_epoch.tolist(), isrs,
                                    self.controller_epoch.tolist(), self.zk_version.tolist(), reps, adding, removing,
                                    new)))

    _values = views


def _view(values: tuple) -> PartitionView:
    return _new(PartitionView, values)


_PACKED_BITS = 63


def distinct_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of `matrix` and, for each row, the index of its own among them:
    `(distinct, inverse)` with `distinct[inverse]` equal to `matrix`. A release's requests hold a
    handful of distinct replica lists and ISRs among thousands of rows. When a row's values fit
    one int64 (ids from -1 to 2**b - 2, b bits each, b times the width at most 63) the rows are
    told apart by that key, a one-dimensional `np.unique`; otherwise by `np.unique(axis=0)`,
    which sorts the rows as opaque records (a 25,000-partition request body took 161 ms that way,
    25 ms with the key)."""
    n, width = matrix.shape
    if not n or not width:
        return matrix[:min(n, 1)], np.zeros(n, np.intp)
    top = int(matrix.max())
    bits = (top + 1).bit_length()
    if int(matrix.min()) >= -1 and bits * width <= _PACKED_BITS:
        key = np.zeros(n, np.int64)
        for j in range(width):
            key = (key << bits) | (matrix[:, j].astype(np.int64) + 1)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return matrix[first], inverse.reshape(-1)
    distinct, inverse = np.unique(matrix, axis=0, return_inverse=True)
    return distinct, inverse.reshape(-1)


_FEW_ROWS = 64
"""Up to this many rows, `_row_tuples` shares equal rows through a dict, not `distinct_rows`."""


def _row_tuples(matrix: np.ndarray) -> list[tuple]:
    """Each row of a left-packed matrix (padded with -1) as a tuple, equal rows as one shared
    tuple: only the distinct rows are made in Python (`distinct_rows`)."""
    n, width = matrix.shape
    if not n or not width:
        return [()] * n
    if n <= _FEW_ROWS:  # sorting costs more than it saves (~60 us)
        made: dict = {}
        return [made.setdefault(row, row) for row in map(_cut, matrix.tolist())]
    distinct, inverse = distinct_rows(matrix)
    made = [_cut(row) for row in distinct.tolist()]
    return list(map(made.__getitem__, inverse.tolist()))


_REMEMBERED = 1024
"""The rows of requests of at least this many partitions are kept for later releases
(`remember_rows`)."""

_REQUEST_ROWS: dict[int, tuple] = {}
_REQUEST_ROWS_CAP = 64


def remember_rows(tps: tuple, index, rows: np.ndarray) -> None:
    """Keep the rows of a large request's partitions for the next releases of the same parked
    decision. A write of 100,000 partitions is released in four parts (three progress reports
    and the final outcome, outcomes.py), each over the very same request tuples; finding their
    rows again each time was half of every release. The rows are valid for any image holding
    the same row index: an index is immutable, a row id never changes once given, and an image
    that gains partitions gets a new index (then the rows are found again, not trusted).

    Keyed by the tuple's identity, holding the tuple and the index, so no id is reused while the
    entry lives. (Entries are only added or dropped whole, as draft.py's `_LIVE`: threads may
    share the memo, a race costs a recomputation.)"""
    if tps.__class__ is not tuple or len(tps) < _REMEMBERED:
        return
    if len(_REQUEST_ROWS) >= _REQUEST_ROWS_CAP:
        _REQUEST_ROWS.clear()
    rows = rows.view()
    rows.flags.writeable = False  # (shared by the releases: nobody writes into it)
    _REQUEST_ROWS[id(tps)] = (tps, index, rows)


def _recalled_rows(tps, index) -> np.ndarray | None:
    hit = _REQUEST_ROWS.get(id(tps))
    if hit is not None and hit[0] is tps and hit[1] is index:
        return hit[2]
    return None


class Gathering:
    """Who gathered a `PartitionViews`: one per `ImageRows` (one release), holding only the
    number of rows of the image it read (not the image or its columns: a request keeps it)."""

    __slots__ = ("size",)

    def __init__(self, size: int):
        self.size = size


class ImageRows:
    """The image's columns, concatenated once for all the requests of one release."""

    def __init__(self, image: PartitionImage, hints: dict | None = None):
        self.image = image
        self.gathering = Gathering(image.size)
        # id(sequence of partitions) -> their rows, as the decision that listed them knew them
        # (Draft.finish: a whole-cluster decision's requests): no lookup at all
        self.hints = hints if hints is not None else {}
        self._columns: dict[str, np.ndarray] = {}

    def column(self, name: str) -> np.ndarray:
        a = self._columns.get(name)
        if a is None:
            a = self._columns[name] = self.image.column(name)
        return a

    def rows_of(self, tps) -> np.ndarray:
        """The row id of each partition of `tps`, -1 for one the image does not know: noted by
        the decision, kept from an earlier release of the same request (`remember_rows`), or
        looked up in the index, one C-level lookup each. (Matching the partitions by object
        identity against a sorted array of the rows' ids was tried; since the index's dict is
        read directly, the lookups cost 0.6x of it.)"""
        rows = self.hints.get(id(tps))
        if rows is not None and len(rows) == len(tps):
            return rows
        if len(tps) < _REMEMBERED:
            return self._looked_up(tps)
        index = self.image.index
        rows = _recalled_rows(tps, index)
        if rows is None:
            rows = self._looked_up(tps)
            remember_rows(tps, index, rows)
        return rows

    def every_partition(self) -> list[TopicPartition]:
        """Every partition of the image, sorted (UpdateMetadata of all partitions), its rows
        kept as a hint (no sort when the image's rows are in partition order)."""
        tps = self.image.keys()
        rows = np.flatnonzero(self.column("present"))
        if not self.image.in_order:
            order = sorted(range(len(tps)), key=tps.__getitem__)
            tps = [tps[k] for k in order]
            rows = rows[np.array(order, np.intp)]
        self.hints[id(tps)] = rows
        return tps

    def _looked_up(self, tps) -> np.ndarray:
        return self.image.rows_of(tps)

    def mask_of(self, tps) -> np.ndarray:
        """A mask over the image's rows: the rows of `tps` (partitions it does not know left out)."""
        mask = np.zeros(self.image.size, bool)
        rows = self.rows_of(tps if isinstance(tps, (list, tuple)) else list(tps))
        mask[rows[rows >= 0]] = True
        return mask

    def views(self, tps, is_new: frozenset = frozenset(), deleting: frozenset = frozenset(),
              for_metadata: bool = False, among: np.ndarray | None = None) -> PartitionViews:
        """The partitions of `tps` (in that order) that exist and have a leader-and-ISR, as they
        are sent to brokers: in UpdateMetadata (`for_metadata`), a topic queued for deletion shows
        leader -2 (LeaderDuringDelete), as `request_batch.partition_view` does. With `among` (a mask over
        the image's rows, `mask_of`), only the partitions whose rows it holds."""
        rows = self.rows_of(tps)
        if among is not None:
            inside = rows >= 0
            inside[inside] = among[rows[inside]]
            tps = list(compress(tps, inside.tolist()))
            rows = rows[inside]
        found = rows >= 0
        ok = found.copy()
        at = rows[found]
        ok[found] = self.column("present")[at] & self.column("has_state")[at]
        if ok.all():
            kept = tuple(tps)
        else:
            kept = tuple(compress(tps, ok.tolist()))
            rows = rows[ok]
        leader = self.column("leader")[rows]
        if for_metadata and deleting:
            gone = np.fromiter((tp.topic in deleting for tp in kept), bool, len(kept))
            if gone.any():
                leader = np.where(gone, LEADER_DURING_DELETE, leader).astype(leader.dtype)
        adding = removing = None
        if self.column("moving")[rows].any():
            adding, removing = self.column("adding")[rows], self.column("removing")[rows]
        new = None
        if is_new:
            new = np.fromiter((tp in is_new for tp in kept), bool, len(kept))
            if not new.any():
                new = None
        return PartitionViews(kept, leader, self.column("leader_epoch")[rows], self.column("isr")[rows],
                              self.column("controller_epoch")[rows], self.column("zk_version")[rows],
                              self.column("replicas")[rows], adding, removing, new, source=(self.gathering, rows))
