"""The columnar partition image: every partition's state as numpy columns, in fixed-size chunks.

Why: a decision that touches the whole cluster (a broker failure, a controlled shutdown, a new
controller loading its snapshot) costs tens of microseconds per partition when it walks one
Python object per partition. Held as columns, "which partitions does broker 3 lead" is one
comparison over an int32 array, and an election rule over 10,000 partitions is a few operations
over the ISR and replica matrices (`vector_election.py`).

Layout. A partition gets a row id when it is first seen (an interned id: `index` maps
`TopicPartition -> row`), and rows live in chunks of `CHUNK` rows. A `Chunk` holds one array per
column:

- `present`: the row holds a partition (rows of deleted partitions stay, not present);
- `has_state`: the partition has a leader-and-ISR (it was elected once); the four int columns
  `leader`, `leader_epoch`, `controller_epoch`, `zk_version` hold its content when it has;
- `replicas`, `isr`: int32 matrices `[CHUNK, width]`, each row left-packed and padded with
  `PAD` (-1); `adding` / `removing`: bool matrices aligned with `replicas` (the replica at that
  position is being added / removed by a reassignment);
- `pstate`: the partition state machine's state, as an index into `PARTITION_STATES`;
- `rstate`: int8 matrix aligned with `replicas`, the replica state machine's state of each
  assigned replica, as an index into `REPLICA_STATES` (NonExistentReplica when it has none).

Persistence. An image is immutable by convention: nothing writes into an array after the image
holding it is built. `with_partitions` copies only the chunks holding a changed row and shares
all others (a persistent vector of chunks), so a one-partition change costs one chunk copy and
an image per state costs little more than one image.

The image is a view of the partitions map (`ControllerState.partitions`), which stays the
record of truth for the rest of the core; `image_of` builds or updates it and remembers it for
the map it was made from (a memo of a pure function: the same map always gives an equal image).
"""
from __future__ import annotations

from itertools import chain
from typing import Iterable, Mapping, NamedTuple

import numpy as np

from .machines import PartitionState, ReplicaState
from .pmap import EMPTY, PMap
from .values import TopicPartition

CHUNK = 2048
"""Rows per chunk: a one-partition change copies this many rows of each column."""

PAD = -1
"""Padding of the replica and ISR matrices (no broker has a negative id)."""

MIN_WIDTH = 4

PARTITION_STATES: tuple[PartitionState, ...] = tuple(PartitionState)
REPLICA_STATES: tuple[ReplicaState, ...] = tuple(ReplicaState)
P_CODE = {s: i for i, s in enumerate(PARTITION_STATES)}  # plain ints: numpy scalars convert slowly
R_CODE = {s: i for i, s in enumerate(REPLICA_STATES)}
R_NON_EXISTENT = R_CODE[ReplicaState.NON_EXISTENT]

_INT_COLUMNS = ("leader", "leader_epoch", "controller_epoch", "zk_version")


class Chunk(NamedTuple):
    present: np.ndarray
    has_state: np.ndarray
    leader: np.ndarray
    leader_epoch: np.ndarray
    controller_epoch: np.ndarray
    zk_version: np.ndarray
    replicas: np.ndarray
    isr: np.ndarray
    adding: np.ndarray
    removing: np.ndarray
    pstate: np.ndarray
    rstate: np.ndarray


def _empty_chunk(width: int) -> Chunk:
    ints = [np.zeros(CHUNK, np.int32) for _ in _INT_COLUMNS]
    return Chunk(
        np.zeros(CHUNK, bool), np.zeros(CHUNK, bool), *ints,
        np.full((CHUNK, width), PAD, np.int32), np.full((CHUNK, width), PAD, np.int32),
        np.zeros((CHUNK, width), bool), np.zeros((CHUNK, width), bool),
        np.full(CHUNK, P_CODE[PartitionState.NON_EXISTENT], np.int8),
        np.full((CHUNK, width), R_NON_EXISTENT, np.int8),
    )


def _copy(chunk: Chunk) -> Chunk:
    return Chunk(*(a.copy() for a in chunk))


def _widen(chunk: Chunk, width: int) -> Chunk:
    old = chunk.replicas.shape[1]
    if old >= width:
        return chunk
    extra = width - old

    def grow(a, fill):
        return np.concatenate([a, np.full((CHUNK, extra), fill, a.dtype)], axis=1)

    return chunk._replace(replicas=grow(chunk.replicas, PAD), isr=grow(chunk.isr, PAD),
                          adding=grow(chunk.adding, False), removing=grow(chunk.removing, False),
                          rstate=grow(chunk.rstate, R_NON_EXISTENT))


def _row_values(info) -> tuple:
    """One partition's row, as plain Python values (`info` is a `state.PartitionInfo`)."""
    a = info.assignment
    replicas = a.replicas
    adding, removing = a.adding, a.removing
    states = dict(info.replica_states)
    li = info.leader_isr
    return (
        li is not None,
        (li[0], li[1], li[3], li[4]) if li is not None else (0, 0, 0, 0),
        replicas,
        li[2] if li is not None else (),
        tuple(r in adding for r in replicas) if adding else None,
        tuple(r in removing for r in replicas) if removing else None,
        P_CODE[info.state],
        tuple(R_CODE[states.get(r, ReplicaState.NON_EXISTENT)] for r in replicas),
    )


def _write_rows(chunk: Chunk, slots: list[int], rows: list) -> None:
    """Write `rows` (from `_row_values`, or None: not present) at `slots` of a chunk just copied,
    column by column (one numpy call a column, not a write per row)."""
    width = chunk.replicas.shape[1]
    at = np.array(slots, np.intp)
    chunk.present[at] = False
    chunk.has_state[at] = False
    kept = [(slot, row) for slot, row in zip(slots, rows) if row is not None]
    if not kept:
        chunk.replicas[at] = PAD
        chunk.isr[at] = PAD
        chunk.adding[at] = False
        chunk.removing[at] = False
        chunk.rstate[at] = R_NON_EXISTENT
        return
    gone = [slot for slot, row in zip(slots, rows) if row is None]
    if gone:
        g = np.array(gone, np.intp)
        chunk.replicas[g] = PAD
        chunk.isr[g] = PAD
        chunk.adding[g] = False
        chunk.removing[g] = False
        chunk.rstate[g] = R_NON_EXISTENT
    at = np.array([slot for slot, _ in kept], np.intp)
    values = [row for _, row in kept]
    chunk.present[at] = True
    chunk.has_state[at] = [v[0] for v in values]
    ints = np.array([v[1] for v in values], np.int64).reshape(len(values), 4)
    chunk.leader[at] = ints[:, 0]
    chunk.leader_epoch[at] = ints[:, 1]
    chunk.controller_epoch[at] = ints[:, 2]
    chunk.zk_version[at] = ints[:, 3]
    chunk.replicas[at] = _matrix([v[2] for v in values], width, PAD, np.int32)
    chunk.isr[at] = _matrix([v[3] for v in values], width, PAD, np.int32)
    chunk.adding[at] = _matrix([v[4] or () for v in values], width, False, bool)
    chunk.removing[at] = _matrix([v[5] or () for v in values], width, False, bool)
    chunk.pstate[at] = [v[6] for v in values]
    chunk.rstate[at] = _matrix([v[7] for v in values], width, R_NON_EXISTENT, np.int8)


class PartitionImage:
    """The partitions as column chunks (see the module docstring). Read with `column`,
    `rows_of`, `tps`; never write into the arrays it returns."""

    __slots__ = ("chunks", "index", "tp_chunks", "width", "size")

    def __init__(self, chunks: tuple[Chunk, ...], index: PMap, tp_chunks: tuple[tuple, ...], width: int, size: int):
        self.chunks = chunks
        self.index = index  # TopicPartition -> row id
        self.tp_chunks = tp_chunks  # per chunk, the TopicPartition of each used row
        self.width = width
        self.size = size  # rows used (present or not)

    # -- building -------------------------------------------------------------------------------

    @classmethod
    def build(cls, partitions: Mapping) -> "PartitionImage":
        """An image of a whole partitions map, rows in sorted partition order."""
        tps = sorted(partitions.keys())
        width = max([MIN_WIDTH] + [len(partitions[tp].assignment.replicas) for tp in tps]
                    + [len(li[2]) for tp in tps if (li := partitions[tp].leader_isr) is not None])
        chunks, tp_chunks = [], []
        for start in range(0, len(tps), CHUNK):
            part = tps[start:start + CHUNK]
            chunk = _build_chunk([partitions[tp] for tp in part], width)
            chunks.append(chunk)
            tp_chunks.append(tuple(part))
        index = PMap(zip(tps, range(len(tps))))
        return cls(tuple(chunks), index, tuple(tp_chunks), width, len(tps))

    def with_partitions(self, partitions: Mapping, changed: Iterable[TopicPartition]) -> "PartitionImage":
        """The image after the partitions in `changed` took their values in `partitions`
        (absent there: removed). Only the chunks holding a changed row are copied."""
        index = self.index
        size = self.size
        width = self.width
        chunks = list(self.chunks)
        tp_chunks = list(self.tp_chunks)
        by_chunk: dict[int, tuple[list[int], list]] = {}
        new_index = None
        for tp in changed:
            info = partitions.get(tp)
            row = index.get(tp) if new_index is None else new_index.get(tp)
            if row is None:
                if info is None:
                    continue
                row = size
                size += 1
                if new_index is None:
                    new_index = index.mutate()
                new_index[tp] = row
                c = row // CHUNK
                if c == len(chunks):
                    chunks.append(_empty_chunk(width))
                    tp_chunks.append(())
                tp_chunks[c] = tp_chunks[c] + (tp,)
            values = None if info is None else _row_values(info)
            if values is not None:
                need = max(len(values[2]), len(values[3]))
                if need > width:
                    width = need
            slots, rows = by_chunk.setdefault(row // CHUNK, ([], []))
            slots.append(row % CHUNK)
            rows.append(values)
        if width != self.width:
            chunks = [_widen(ch, width) for ch in chunks]
        for c, (slots, rows) in by_chunk.items():
            # a chunk of this image is copied before writing (a widened one shares its 1-D columns);
            # a chunk appended by this call is fresh
            chunk = chunks[c] if c >= len(self.chunks) else _copy(chunks[c])
            _write_rows(chunk, slots, rows)
            chunks[c] = chunk
        return PartitionImage(tuple(chunks), new_index.finish() if new_index is not None else index,
                              tuple(tp_chunks), width, size)

    # -- reading --------------------------------------------------------------------------------

    def column(self, name: str) -> np.ndarray:
        """One column over every used row (row id order), as one array (a fresh concatenation)."""
        if not self.chunks:
            return _empty_chunk(self.width)._asdict()[name][:0]
        parts = [getattr(ch, name) for ch in self.chunks]
        last = self.size - (len(parts) - 1) * CHUNK
        parts[-1] = parts[-1][:last]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def tps(self, rows: np.ndarray) -> list[TopicPartition]:
        """The partitions of row ids."""
        tc = self.tp_chunks
        return [tc[r // CHUNK][r % CHUNK] for r in rows.tolist()]

    def row(self, tp: TopicPartition) -> int | None:
        return self.index.get(tp)

    def read(self, tp: TopicPartition) -> tuple | None:
        """One partition's row as plain values, None if absent: `(leader_isr or None, replicas,
        adding, removing, PartitionState, ((replica, ReplicaState), ...))`, the leader_isr as a
        `(leader, leader_epoch, isr, controller_epoch, zk_version)` tuple; replica states listed
        for assigned replicas that have one."""
        r = self.index.get(tp)
        if r is None:
            return None
        ch, s = self.chunks[r // CHUNK], r % CHUNK
        if not ch.present[s]:
            return None
        replicas = tuple(v for v in ch.replicas[s].tolist() if v != PAD)
        n = len(replicas)
        li = None
        if ch.has_state[s]:
            li = (int(ch.leader[s]), int(ch.leader_epoch[s]), tuple(v for v in ch.isr[s].tolist() if v != PAD),
                  int(ch.controller_epoch[s]), int(ch.zk_version[s]))
        return (li, replicas,
                tuple(replicas[j] for j in range(n) if ch.adding[s, j]),
                tuple(replicas[j] for j in range(n) if ch.removing[s, j]),
                PARTITION_STATES[ch.pstate[s]],
                tuple((replicas[j], REPLICA_STATES[ch.rstate[s, j]]) for j in range(n)
                      if ch.rstate[s, j] != R_NON_EXISTENT))


def _matrix(rows: list, width: int, fill, dtype) -> np.ndarray:
    """`[len(rows), width]` from tuples, each padded with `fill` (one C-level pass)."""
    pads = [(fill,) * k for k in range(width + 1)]
    flat = chain.from_iterable([r + pads[width - len(r)] for r in rows])
    return np.fromiter(flat, dtype, len(rows) * width).reshape(len(rows), width)


def _build_chunk(infos: list, width: int) -> Chunk:
    """A chunk of `infos`, built column by column from Python lists (one numpy call a column,
    not a numpy write per row)."""
    chunk = _empty_chunk(width)
    n = len(infos)
    if not n:
        return chunk
    chunk.present[:n] = True
    lis = [info.leader_isr for info in infos]
    chunk.has_state[:n] = [li is not None for li in lis]
    for k, name in ((0, "leader"), (1, "leader_epoch"), (3, "controller_epoch"), (4, "zk_version")):
        getattr(chunk, name)[:n] = [li[k] if li is not None else 0 for li in lis]
    chunk.pstate[:n] = [P_CODE[info.state] for info in infos]
    assignments = [info.assignment for info in infos]
    chunk.replicas[:n] = _matrix([a.replicas for a in assignments], width, PAD, np.int32)
    chunk.isr[:n] = _matrix([li[2] if li is not None else () for li in lis], width, PAD, np.int32)
    non_existent = ReplicaState.NON_EXISTENT
    rcodes = []
    memo: dict[tuple, tuple] = {}  # a cluster has few distinct (states, replicas) shapes
    for info, a in zip(infos, assignments):
        key = (info.replica_states, a.replicas)
        codes = memo.get(key)
        if codes is None:
            d = dict(info.replica_states)
            codes = memo[key] = tuple(R_CODE[d.get(r, non_existent)] for r in a.replicas)
        rcodes.append(codes)
    chunk.rstate[:n] = _matrix(rcodes, width, R_NON_EXISTENT, np.int8)
    for slot, a in enumerate(assignments):
        if a.adding or a.removing:
            m = len(a.replicas)
            chunk.adding[slot, :m] = [r in a.adding for r in a.replicas]
            chunk.removing[slot, :m] = [r in a.removing for r in a.replicas]
    return chunk


EMPTY_IMAGE = PartitionImage((), EMPTY, (), MIN_WIDTH, 0)

# -- the image of a state's partitions map ---------------------------------------------------------

_MEMO_SIZE = 8
_memo: dict[int, tuple[object, object, object]] = {}  # id(map) -> (map, image or base map, changed)


def image_of(partitions: PMap) -> PartitionImage:
    """The image of a partitions map: remembered if it was made or announced (`derive`) for
    this very map, else built. The memo holds a reference to each map it keys, so an id is
    never reused while its entry exists."""
    entry = _memo.get(id(partitions))
    if entry is not None and entry[0] is partitions:
        image = entry[1]
        if isinstance(image, PartitionImage):
            return image
        base, changed = entry[1], entry[2]
        image = image_of(base).with_partitions(partitions, changed)
    elif not partitions:
        return EMPTY_IMAGE
    else:
        image = PartitionImage.build(partitions)
    _remember(partitions, image, None)
    return image


def derive(partitions: PMap, base: PMap, changed: Iterable[TopicPartition]) -> None:
    """Announce that `partitions` is `base` with the partitions in `changed` changed. Costs
    nothing now: the image of `partitions` is made from `base`'s when it is first asked for,
    and only if `base`'s is known (a chain of small changes then costs their chunk copies)."""
    if partitions is base:
        return
    entry = _memo.get(id(base))
    if entry is None or entry[0] is not base:
        return
    if isinstance(entry[1], PartitionImage):
        _remember(partitions, base, frozenset(changed))
    else:  # base is itself a pending change: fold the two into one
        _remember(partitions, entry[1], entry[2] | frozenset(changed))


def _remember(partitions: PMap, image_or_base, changed) -> None:
    if len(_memo) >= _MEMO_SIZE and id(partitions) not in _memo:
        # drop the oldest entries that are no base of a pending change kept here
        bases = {id(e[1]) for e in _memo.values() if not isinstance(e[1], PartitionImage)}
        for key in list(_memo):
            if len(_memo) < _MEMO_SIZE:
                break
            if key not in bases:
                del _memo[key]
        while len(_memo) >= _MEMO_SIZE:
            del _memo[next(iter(_memo))]
    _memo[id(partitions)] = (partitions, image_or_base, changed)
