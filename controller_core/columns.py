"""The columnar partition image: every partition's state as numpy columns, in fixed-size chunks.

This is where `ControllerState.partitions` lives: one record of truth for every partition.

Why: a decision that touches the whole cluster (a broker failure, a controlled shutdown, a new
controller loading its snapshot) costs tens of microseconds per partition when it walks one
Python object per partition. Held as columns, "which partitions does broker 3 lead" is one
comparison over an int32 array, and an election rule over 10,000 partitions is a few operations
over the ISR and replica matrices (`vector_election.py`).

Layout. A partition gets a row id when it is first seen (an interned id: `index` maps
`TopicPartition -> row`; a deleted partition keeps its row, not present, and gets it back if
its topic is created again), and rows live in chunks of `CHUNK` rows. A `Chunk` holds one array
per column:

- `present`: the row holds a partition;
- `has_state`: the partition has a leader-and-ISR (it was elected once); the four int columns
  `leader`, `leader_epoch`, `controller_epoch`, `zk_version` hold its content when it has;
- `replicas`, `isr`: int32 matrices `[CHUNK, width]`, each row left-packed and padded with
  `PAD` (-1); `adding` / `removing`: bool matrices aligned with `replicas` (the replica at that
  position is being added / removed by a reassignment), `moving`: either is set in the row;
- `pstate`: the partition state machine's state, as an index into `PARTITION_STATES`;
- `rstate`: int8 matrix aligned with `replicas`, the replica state machine's state of each
  assigned replica, as an index into `REPLICA_STATES` (NonExistentReplica when it has none).

A partition the columns cannot hold exactly (a replica state for a replica outside the
assignment, a replica listed twice) is also kept whole in `odd`, a sparse persistent map that
`get` reads first; the whole-cluster decisions leave such images to the scalar path.

Reading one partition (`get`, `image[tp]`) builds a `PartitionInfo` from its row, its
`replica_states` in assignment order: the scalar rules read plain values, as before. Iteration
is in row order (callers that need an order sort, as they did over the hash map).

Persistence. An image is immutable by convention: nothing writes into an array after the image
holding it is built. `with_changes` copies only the chunks holding a changed row and shares all
others (a persistent vector of chunks), so a one-partition change costs one chunk copy, and a
step's changes cost one vectorized write per column of each chunk they touch.
"""
from __future__ import annotations

from itertools import chain, compress, repeat
from operator import itemgetter
from typing import Collection, Iterable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from .machines import REPLICA_VALID_PREVIOUS, PartitionState, ReplicaState
from .partition_info import PartitionInfo, _pair
from .pmap import EMPTY, PMap
from .values import LeaderIsr, PartitionView, ReplicaAssignment, TopicPartition, shared_assignment

CHUNK = 1024
"""Rows per chunk: a one-partition change copies this many rows of each column."""

PAD = -1
"""Padding of the replica and ISR matrices (no broker has a negative id)."""

MIN_WIDTH = 4

PARTITION_STATES: tuple[PartitionState, ...] = tuple(PartitionState)
REPLICA_STATES: tuple[ReplicaState, ...] = tuple(ReplicaState)
P_CODE = {s: i for i, s in enumerate(PARTITION_STATES)}  # plain ints: numpy scalars convert slowly
R_CODE = {s: i for i, s in enumerate(REPLICA_STATES)}
R_OFFLINE_FROM = np.array(sorted(R_CODE[s] for s in REPLICA_VALID_PREVIOUS[ReplicaState.OFFLINE]), np.int8)
"""The codes of the replica states a replica may go Offline from (the whole-cluster decisions
check a dead broker's replicas against them: `vector_election.one_of`)."""
R_NON_EXISTENT = R_CODE[ReplicaState.NON_EXISTENT]
_CODES = len(REPLICA_STATES)

_INT_COLUMNS = ("leader", "leader_epoch", "controller_epoch", "zk_version")
_new = tuple.__new__


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
    moving: np.ndarray
    pstate: np.ndarray
    rstate: np.ndarray


_LEADER, _LEADER_EPOCH, _CONTROLLER_EPOCH, _ZK_VERSION, _ISR = map(
    Chunk._fields.index, ("leader", "leader_epoch", "controller_epoch", "zk_version", "isr"))


def _empty_chunk(width: int) -> Chunk:
    ints = [np.zeros(CHUNK, np.int32) for _ in _INT_COLUMNS]
    return Chunk(
        np.zeros(CHUNK, bool), np.zeros(CHUNK, bool), *ints,
        np.full((CHUNK, width), PAD, np.int32), np.full((CHUNK, width), PAD, np.int32),
        np.zeros((CHUNK, width), bool), np.zeros((CHUNK, width), bool), np.zeros(CHUNK, bool),
        np.full(CHUNK, P_CODE[PartitionState.NON_EXISTENT], np.int8),
        np.full((CHUNK, width), R_NON_EXISTENT, np.int8),
    )


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


# -- rows to values and back --------------------------------------------------------------------

_STATES: dict[tuple, tuple] = {}
_SHARE_CAP = 1 << 16  # distinct shapes shared; past this, new ones are simply built
_assignment = shared_assignment  # a cluster has few distinct assignments: one value each


def _replica_states(replicas: tuple, codes: list) -> tuple:
    key = (replicas, tuple(codes))
    states = _STATES.get(key)
    if states is None:
        states = tuple(_pair(r, REPLICA_STATES[c]) for r, c in zip(replicas, codes) if c != R_NON_EXISTENT)
        if len(_STATES) < _SHARE_CAP:
            _STATES[key] = states
    return states


def _cut(values: list) -> tuple:
    """A padded row as a tuple (rows are left-packed)."""
    if values[-1] != PAD:
        return tuple(values)
    return tuple(values[:values.index(PAD)])


def _moving_at(ch: Chunk, s: int, replicas: tuple) -> tuple[tuple, tuple]:
    """The replicas being added and removed at slot `s` (`replicas` is the slot's, cut)."""
    if not ch.moving.item(s):
        return (), ()
    add = ch.adding[s].tolist()
    rem = ch.removing[s].tolist()
    return tuple(r for r, f in zip(replicas, add) if f), tuple(r for r, f in zip(replicas, rem) if f)


def _leader_isr_at(ch: Chunk, s: int) -> LeaderIsr | None:
    """The leader-and-ISR at slot `s`, None without a state."""
    if not ch.has_state.item(s):
        return None
    return _new(LeaderIsr, (ch.leader.item(s), ch.leader_epoch.item(s), _cut(ch.isr[s].tolist()),
                            ch.controller_epoch.item(s), ch.zk_version.item(s)))


def _info_at(ch: Chunk, s: int) -> PartitionInfo:
    replicas = _cut(ch.replicas[s].tolist())
    a = _assignment(replicas, *_moving_at(ch, s, replicas))
    return _new(PartitionInfo, (a, _leader_isr_at(ch, s), PARTITION_STATES[ch.pstate.item(s)],
                                _replica_states(replicas, ch.rstate[s, :len(replicas)].tolist())))


def _infos_at(ch: Chunk, slots) -> list[PartitionInfo]:
    """The partitions at `slots` of a chunk (a slice or an index array), built column by column."""
    reps = ch.replicas[slots].tolist()
    isrs = ch.isr[slots].tolist()
    rst = ch.rstate[slots].tolist()
    has = ch.has_state[slots].tolist()
    mov = ch.moving[slots].tolist()
    lead, lep, cep, ver = (ch.leader[slots].tolist(), ch.leader_epoch[slots].tolist(),
                           ch.controller_epoch[slots].tolist(), ch.zk_version[slots].tolist())
    pst = ch.pstate[slots].tolist()
    adds = rems = None
    if True in mov:
        adds, rems = ch.adding[slots].tolist(), ch.removing[slots].tolist()
    out = []
    states = PARTITION_STATES
    assignments: dict[tuple, ReplicaAssignment] = {}
    for k in range(len(reps)):
        rk = reps[k]
        replicas = _cut(rk) if rk else ()
        if mov[k]:
            a = _assignment(replicas, tuple(r for r, f in zip(replicas, adds[k]) if f),
                            tuple(r for r, f in zip(replicas, rems[k]) if f))
        else:
            a = assignments.get(replicas)
            if a is None:
                a = assignments[replicas] = _assignment(replicas, (), ())
        li = _new(LeaderIsr, (lead[k], lep[k], _cut(isrs[k]) if isrs[k] else (), cep[k], ver[k])) if has[k] else None
        out.append(_new(PartitionInfo, (a, li, states[pst[k]], _replica_states(replicas, rst[k][:len(replicas)]))))
    return out


_I32 = (1 << 31) - 1


def _ids_ok(ids: tuple) -> bool:
    return not ids or (min(ids) >= 0 and max(ids) <= _I32)


def _is_odd(info: PartitionInfo) -> bool:
    """Whether the columns cannot hold `info` exactly (see the module docstring): a replica
    listed twice or with a state outside the assignment, or ids and numbers outside Kafka's
    int32 (which only hand-made values have)."""
    a = info.assignment
    replicas = a.replicas
    if len(set(replicas)) != len(replicas) or not _ids_ok(replicas):
        return True
    for r, _ in info.replica_states:
        if r not in replicas:
            return True
    if a.adding or a.removing:
        for r in chain(a.adding, a.removing):
            if r not in replicas:
                return True
        if len(set(a.adding)) != len(a.adding) or len(set(a.removing)) != len(a.removing):
            return True
        if tuple(r for r in replicas if r in a.adding) != a.adding or \
                tuple(r for r in replicas if r in a.removing) != a.removing:
            return True  # the columns give them back in assignment order
    li = info.leader_isr
    if li is None:
        return False
    return not (_ids_ok(li[2]) and -_I32 - 1 <= li[0] <= _I32 and 0 <= li[1] <= _I32 and -_I32 - 1 <= li[3] <= _I32
                and -_I32 - 1 <= li[4] <= _I32)


def _representable(info: PartitionInfo) -> PartitionInfo:
    """What the columns hold of an odd partition (its exact value is in `odd`)."""
    def ok(v: int) -> int:
        return v if -_I32 - 1 <= v <= _I32 else 0

    a = info.assignment
    replicas = tuple(dict.fromkeys(r for r in a.replicas if 0 <= r <= _I32))
    ra = ReplicaAssignment(replicas, tuple(dict.fromkeys(r for r in a.adding if r in replicas)),
                           tuple(dict.fromkeys(r for r in a.removing if r in replicas)))
    li = info.leader_isr
    if li is not None:
        li = LeaderIsr(ok(li[0]), ok(li[1]), tuple(r for r in li[2] if 0 <= r <= _I32), ok(li[3]), ok(li[4]))
    return PartitionInfo(ra, li, info.state, tuple(p for p in info.replica_states if p[0] in replicas))


def _row_values(info) -> tuple:
    """One partition's row, as plain Python values (`info` is a `PartitionInfo`)."""
    a = info.assignment
    replicas = a.replicas
    adding, removing = a.adding, a.removing
    li = info.leader_isr
    rs = info.replica_states
    if rs:
        states = dict(rs)
        codes = tuple(R_CODE[states.get(r, ReplicaState.NON_EXISTENT)] for r in replicas)
    else:
        codes = (R_NON_EXISTENT,) * len(replicas)
    return (
        li is not None,
        (li[0], li[1], li[3], li[4]) if li is not None else (0, 0, 0, 0),
        replicas,
        li[2] if li is not None else (),
        tuple(r in adding for r in replicas) if adding else None,
        tuple(r in removing for r in replicas) if removing else None,
        P_CODE[info.state],
        codes,
    )


def _put(cols: dict, chunk: Chunk, name: str, at, values) -> None:
    """Write `values` at `at` into column `name`, copying the column first (once) unless it
    already holds them: a step that changes the ISR of a partition copies the ISR and version
    columns of its chunk, not its replica matrix."""
    a = cols.get(name)
    if a is None:
        old = getattr(chunk, name)
        if np.array_equal(old[at], values):
            return
        a = cols[name] = old.copy()
    a[at] = values


_FEW_ROWS = 16
"""Up to this many changed rows in a chunk are written one row at a time: numpy's per-call
overhead dominates a vectorized write of a handful of rows."""


def _write_few(chunk: Chunk, slots: list[int], rows: list, fresh: bool) -> Chunk:
    """`_write_rows` one row at a time, comparing plain values (same result): each column of
    the row is read once, and only a column whose value changes is copied (once) and written.
    An ISR change reads thirteen values and copies two 1-D columns and the ISR matrix."""
    cols: dict = chunk._asdict() if fresh else {}
    width = chunk.replicas.shape[1]
    for s, v in zip(slots, rows):
        if v is None:
            v = _GONE
            present = False
        else:
            present = True
        has, (leader, leader_epoch, controller_epoch, zk_version), replicas, isr, adding, removing, pcode, codes = v
        if chunk.present.item(s) != present:
            _put_one(cols, chunk, "present", s, present)
        if chunk.has_state.item(s) != has:
            _put_one(cols, chunk, "has_state", s, has)
        if chunk.leader.item(s) != leader:
            _put_one(cols, chunk, "leader", s, leader)
        if chunk.leader_epoch.item(s) != leader_epoch:
            _put_one(cols, chunk, "leader_epoch", s, leader_epoch)
        if chunk.controller_epoch.item(s) != controller_epoch:
            _put_one(cols, chunk, "controller_epoch", s, controller_epoch)
        if chunk.zk_version.item(s) != zk_version:
            _put_one(cols, chunk, "zk_version", s, zk_version)
        row = replicas + (PAD,) * (width - len(replicas))
        if tuple(chunk.replicas[s].tolist()) != row:
            _put_one(cols, chunk, "replicas", s, row)
        row = isr + (PAD,) * (width - len(isr))
        if tuple(chunk.isr[s].tolist()) != row:
            _put_one(cols, chunk, "isr", s, row)
        moving = adding is not None or removing is not None
        was_moving = chunk.moving.item(s)
        if was_moving != moving:
            _put_one(cols, chunk, "moving", s, moving)
        if moving or was_moving:
            for name, flags in (("adding", adding), ("removing", removing)):
                row = (flags or ()) + (False,) * (width - len(flags or ()))
                if tuple(getattr(chunk, name)[s].tolist()) != row:
                    _put_one(cols, chunk, name, s, row)
        if chunk.pstate.item(s) != pcode:
            _put_one(cols, chunk, "pstate", s, pcode)
        row = codes + (R_NON_EXISTENT,) * (width - len(codes))
        if tuple(chunk.rstate[s].tolist()) != row:
            _put_one(cols, chunk, "rstate", s, row)
    if fresh:
        return Chunk(**cols)
    if not cols:
        return chunk
    return _new(Chunk, tuple(map(cols.get, Chunk._fields, chunk)))  # the copied columns, the rest shared


def _put_one(cols: dict, chunk: Chunk, name: str, s: int, value) -> None:
    """Write `value` at row `s` of column `name`, copying the chunk's column first (once)."""
    a = cols.get(name)
    if a is None:
        a = cols[name] = getattr(chunk, name).copy()
    a[s] = value


_GONE = (False, (0, 0, 0, 0), (), (), None, None, P_CODE[PartitionState.NON_EXISTENT], ())


def _write_rows(chunk: Chunk, slots: list[int], rows: list, fresh: bool) -> Chunk:
    """The chunk with `rows` (from `_row_values`, or None: not present) written at `slots`,
    column by column (one numpy call a column, not a write per row). Columns the rows leave
    as they were are shared with `chunk`; `fresh`: the chunk is this change's own (written in
    place)."""
    if len(slots) <= _FEW_ROWS:
        return _write_few(chunk, slots, rows, fresh)
    cols: dict = chunk._asdict() if fresh else {}
    width = chunk.replicas.shape[1]
    gone = [slot for slot, row in zip(slots, rows) if row is None]
    if gone:
        g = np.array(gone, np.intp)
        n = len(gone)
        _put(cols, chunk, "present", g, np.zeros(n, bool))
        _put(cols, chunk, "has_state", g, np.zeros(n, bool))
        _put(cols, chunk, "replicas", g, np.full((n, width), PAD, np.int32))
        _put(cols, chunk, "isr", g, np.full((n, width), PAD, np.int32))
        _put(cols, chunk, "adding", g, np.zeros((n, width), bool))
        _put(cols, chunk, "removing", g, np.zeros((n, width), bool))
        _put(cols, chunk, "moving", g, np.zeros(n, bool))
        _put(cols, chunk, "rstate", g, np.full((n, width), R_NON_EXISTENT, np.int8))
        _put(cols, chunk, "pstate", g, np.full(n, _GONE[6], np.int8))
        for name in _INT_COLUMNS:
            _put(cols, chunk, name, g, np.zeros(n, np.int32))
        kept = [(slot, row) for slot, row in zip(slots, rows) if row is not None]
        slots = [slot for slot, _ in kept]
        rows = [row for _, row in kept]
    if rows:
        at = np.array(slots, np.intp)
        n = len(rows)
        _put(cols, chunk, "present", at, np.ones(n, bool))
        _put(cols, chunk, "has_state", at, np.array([v[0] for v in rows], bool))
        ints = np.array([v[1] for v in rows], np.int64).reshape(n, 4)
        _put(cols, chunk, "leader", at, ints[:, 0].astype(np.int32))
        _put(cols, chunk, "leader_epoch", at, ints[:, 1].astype(np.int32))
        _put(cols, chunk, "controller_epoch", at, ints[:, 2].astype(np.int32))
        _put(cols, chunk, "zk_version", at, ints[:, 3].astype(np.int32))
        _put(cols, chunk, "replicas", at, _matrix([v[2] for v in rows], width, PAD, np.int32))
        _put(cols, chunk, "isr", at, _matrix([v[3] for v in rows], width, PAD, np.int32))
        moving = [v[4] is not None or v[5] is not None for v in rows]
        _put(cols, chunk, "moving", at, np.array(moving, bool))
        if True in moving or chunk.moving[at].any():
            _put(cols, chunk, "adding", at, _matrix([v[4] or () for v in rows], width, False, bool))
            _put(cols, chunk, "removing", at, _matrix([v[5] or () for v in rows], width, False, bool))
        _put(cols, chunk, "pstate", at, np.array([v[6] for v in rows], np.int8))
        _put(cols, chunk, "rstate", at, _matrix([v[7] for v in rows], width, R_NON_EXISTENT, np.int8))
    if fresh:
        return Chunk(**cols)
    return chunk._replace(**cols) if cols else chunk


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
            chunk.moving[slot] = True
            chunk.adding[slot, :m] = [r in a.adding for r in a.replicas]
            chunk.removing[slot, :m] = [r in a.removing for r in a.replicas]
    return chunk


def _width_of(info) -> int:
    li = info.leader_isr
    return max(len(info.assignment.replicas), len(li[2]) if li is not None else 0)


_first = itemgetter(0)


def chunk_groups(rows: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """`(chunk, positions, slots)` for each chunk that row ids `rows` fall in, chunks ascending:
    the positions in `rows` of that chunk's rows (in their order there) and their slots. A bulk
    read or write over row ids works a chunk at a time through it (one sort of the chunk ids)."""
    if not len(rows):
        return []
    c_of = rows >> _SHIFT
    order = np.argsort(c_of, kind="stable")
    bounds = np.flatnonzero(np.diff(c_of[order])) + 1
    return [(int(c_of[part[0]]), part, rows[part] & _MASK) for part in np.split(order, bounds)]


class RowIndex:
    """`TopicPartition -> row id` of an image loaded whole (`PartitionImage.from_columns`): a
    plain dict for the rows it was built with, and a persistent map of the rows added since.

    Why not one persistent map, as `build` makes: a HAMT of 100,000 entries is some 37,000
    nodes the garbage collector tracks, and building it in the middle of a new controller's load
    (a heap holding the whole snapshot) costs full collections over that heap. A row id never
    changes once given (a deleted partition keeps its row), so the dict is never written after
    construction and is shared by every later image; `mutate` adds to the persistent part only.
    Reads as the `PMap` it stands for (`get`, `[]`, `in`, iteration, `mutate().finish()`)."""

    __slots__ = ("base", "extra", "get")

    def __init__(self, base: dict, extra: PMap = EMPTY):
        self.base = base
        self.extra = extra
        # the dict's own C `get` when nothing was added: the image's hottest read
        self.get = base.get if not extra else self._get

    def _get(self, tp, default=None):
        r = self.base.get(tp)
        return r if r is not None else self.extra.get(tp, default)

    def __getitem__(self, tp) -> int:
        r = self.get(tp)
        if r is None:
            raise KeyError(tp)
        return r

    def __contains__(self, tp) -> bool:
        return tp in self.base or tp in self.extra

    def __len__(self) -> int:
        return len(self.base) + len(self.extra)

    def __iter__(self):
        return chain(self.base, self.extra)

    def keys(self):
        return list(self)

    def items(self):
        return chain(self.base.items(), self.extra.items())

    def mutate(self) -> "_RowIndexMutation":
        return _RowIndexMutation(self)


class _RowIndexMutation:
    __slots__ = ("index", "extra")

    def __init__(self, index: RowIndex):
        self.index = index
        self.extra = index.extra.mutate()

    def get(self, tp, default=None):
        r = self.index.base.get(tp)
        return r if r is not None else self.extra.get(tp, default)

    def __setitem__(self, tp, row: int) -> None:
        assert tp not in self.index.base, "a row id never changes"
        self.extra[tp] = row

    def finish(self) -> RowIndex:
        return RowIndex(self.index.base, self.extra.finish())


class PartitionImage:
    """The partitions as column chunks (see the module docstring): a read-only mapping
    `TopicPartition -> PartitionInfo` whose arrays are read with `column` and `chunks`."""

    __slots__ = ("chunks", "index", "tp_chunks", "width", "size", "count", "odd", "in_order")

    def __init__(self, chunks: tuple[Chunk, ...], index: PMap, tp_chunks: tuple[tuple, ...], width: int,
                 size: int, count: int, odd: PMap = EMPTY, in_order: bool = False):
        self.chunks = chunks
        self.index = index  # TopicPartition -> row id
        self.tp_chunks = tp_chunks  # per chunk, the TopicPartition of each used row
        self.width = width
        self.size = size  # rows used (present or not)
        self.count = count  # rows present
        self.odd = odd  # TopicPartition -> PartitionInfo the columns cannot hold exactly
        # rows are in partition order (as `build` lays them; rows added since are appended, so
        # an image that gained partitions says False): a whole-cluster decision then needs no sort
        self.in_order = in_order

    # -- building -------------------------------------------------------------------------------

    @classmethod
    def build(cls, partitions: Mapping) -> "PartitionImage":
        """An image of a whole partitions map, rows in sorted partition order."""
        items = sorted(partitions.items(), key=_first)
        chunks, tp_chunks = [], []
        odd = {tp: info for tp, info in items if _is_odd(info)}
        if odd:
            items = [(tp, _representable(info) if tp in odd else info) for tp, info in items]
        width = max([MIN_WIDTH] + [_width_of(info) for _, info in items])
        for start in range(0, len(items), CHUNK):
            part = items[start:start + CHUNK]
            chunks.append(_build_chunk([info for _, info in part], width))
            tp_chunks.append(tuple(tp for tp, _ in part))
        index = PMap(zip((tp for tp, _ in items), range(len(items))))
        return cls(tuple(chunks), index, tuple(tp_chunks), width, len(items), len(items), PMap(odd) if odd else EMPTY,
                   True)

    @classmethod
    def from_columns(cls, tps: list, width: int, columns: dict[str, np.ndarray]) -> "PartitionImage":
        """An image of `tps` (distinct, sorted: rows in partition order, as `build` lays them)
        whose rows are given whole, one array per column of `Chunk` aligned with `tps` (matrices
        `[len(tps), width]`), every partition present and none odd: the caller has checked that
        the columns hold each partition exactly (`_is_odd` says no to each). A new controller
        loads its snapshot this way (`columnar_load.py`) without a `PartitionInfo` a partition.

        The chunks are views of one padded array per column: nothing writes into them (an image
        copies a chunk's column before changing it), so they can share it."""
        n = len(tps)
        if not n:
            return EMPTY_IMAGE
        n_chunks = -(-n // CHUNK)
        template = _empty_chunk(width)
        parts = {}
        for name in Chunk._fields:
            blank = getattr(template, name)
            values = columns[name]
            full = np.empty((n_chunks * CHUNK,) + blank.shape[1:], blank.dtype)
            full[:n] = values
            full[n:] = blank[0]
            parts[name] = [full[c * CHUNK:(c + 1) * CHUNK] for c in range(n_chunks)]
        chunks = tuple(_new(Chunk, tuple(parts[name][c] for name in Chunk._fields)) for c in range(n_chunks))
        tp_chunks = tuple(tuple(tps[c * CHUNK:(c + 1) * CHUNK]) for c in range(n_chunks))
        return cls(chunks, RowIndex(dict(zip(tps, range(n)))), tp_chunks, width, n, n, EMPTY, True)

    def with_changes(self, changes: Mapping, before: Mapping | None = None) -> "PartitionImage":
        """The image after each partition in `changes` took its value there (None: removed).
        Only the chunks holding a changed row are copied; each is written one column at a time.

        `before` (optional): values some of these partitions have in this image, each as `get`
        returns it or as it was given to the `with_changes` that made its row (a `Draft` keeps
        what it read and wrote). When every change keeps its partition's assignment, replica
        states and state and changes only its leader-and-ISR (an ISR change, an election), the
        changed fields are found by comparing with `before`, without reading the rows."""
        if not changes:
            return self
        if before is not None and len(changes) <= _FEW_ROWS:
            image = self._with_leader_isrs(changes, before)
            if image is not None:
                return image
        index = self.index
        size = self.size
        count = self.count
        width = self.width
        chunks = list(self.chunks)
        tp_chunks = list(self.tp_chunks)
        by_chunk: dict[int, tuple[list[int], list]] = {}
        new_index = None
        odd = self.odd
        odd_mut = None
        for tp, info in changes.items():
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
                was = False
            else:
                ch = chunks[row // CHUNK]
                was = ch.present.item(row % CHUNK)
            if info is None:
                values = None
                if was:
                    count -= 1
            else:
                strange = _is_odd(info)
                values = _row_values(_representable(info) if strange else info)
                if not was:
                    count += 1
                need = max(len(values[2]), len(values[3]))
                if need > width:
                    width = need
            if info is not None and strange:
                if odd_mut is None:
                    odd_mut = odd.mutate()
                odd_mut[tp] = info
            elif odd and (tp in odd if odd_mut is None else tp in odd_mut):
                if odd_mut is None:
                    odd_mut = odd.mutate()
                del odd_mut[tp]
            slots, rows = by_chunk.setdefault(row // CHUNK, ({}, None))
            slots[row % CHUNK] = values  # a later change of the same row wins
        if width != self.width:
            chunks = [_widen(ch, width) for ch in chunks]
        old = len(self.chunks)
        for c, (slots, _) in by_chunk.items():
            # a chunk of this image is copied before writing (a widened one shares its 1-D
            # columns); a chunk appended by this call is fresh
            chunks[c] = _write_rows(chunks[c], list(slots), list(slots.values()), c >= old)
        return PartitionImage(tuple(chunks), new_index.finish() if new_index is not None else index,
                              tuple(tp_chunks), width, size, count, odd_mut.finish() if odd_mut is not None else odd,
                              self.in_order and new_index is None)

    def _with_leader_isrs(self, changes: Mapping, before: Mapping) -> "PartitionImage | None":
        """`with_changes` of changes to the leader-and-ISR alone (see there); None if any change
        is of another kind, or its partition is held whole in `odd`, or its value would need a
        wider image or is not representable (the general path then does it all)."""
        index = self.index
        odd = self.odd
        width = self.width
        found = []
        for tp, info in changes.items():
            old = before.get(tp)
            if info is None or old is None or (odd and tp in odd):
                return None
            li, was = info[1], old[1]
            if li is None or was is None or info[2] is not old[2]:
                return None
            a, b = info[0], old[0]
            if (a is not b and a != b) or info[3] != old[3]:  # (mostly the very same objects)
                return None
            isr = li[2]
            if len(isr) > width or (isr and (min(isr) < 0 or max(isr) > _I32)) \
                    or not (-_I32 - 1 <= li[0] <= _I32 and 0 <= li[1] <= _I32
                            and -_I32 - 1 <= li[3] <= _I32 and -_I32 - 1 <= li[4] <= _I32):
                return None  # (as `_is_odd` says of the leader-and-ISR)
            row = index.get(tp)
            if row is None:
                return None
            found.append((row, li, was))
        chunks = list(self.chunks)
        copied: dict[int, dict] = {}
        for row, li, was in found:
            c = row >> _SHIFT
            s = row & _MASK
            cols = copied.get(c)
            if cols is None:
                cols = copied[c] = {}
            chunk = self.chunks[c]
            if li[0] != was[0]:
                _put_one(cols, chunk, "leader", s, li[0])
            if li[1] != was[1]:
                _put_one(cols, chunk, "leader_epoch", s, li[1])
            if li[2] != was[2]:
                _put_one(cols, chunk, "isr", s, li[2] + (PAD,) * (width - len(li[2])))
            if li[3] != was[3]:
                _put_one(cols, chunk, "controller_epoch", s, li[3])
            if li[4] != was[4]:
                _put_one(cols, chunk, "zk_version", s, li[4])
        for c, cols in copied.items():
            if cols:
                chunks[c] = _new(Chunk, tuple(map(cols.get, Chunk._fields, self.chunks[c])))
        return PartitionImage(tuple(chunks), index, self.tp_chunks, width, self.size, self.count, odd, self.in_order)

    def leader_isr_row(self, tp: TopicPartition) -> "tuple | None":
        """`(row, leader_isr, replicas, adding, removing)` of a present partition, as `get(tp)`
        would give its `leader_isr` (None: no state yet) and its assignment's three tuples,
        without building the rest of its `PartitionInfo`; None if it is absent or held whole in
        `odd`. The ISR-change path (isr_change.py) reads a partition this way."""
        at = self._present(tp)
        if at is None or (self.odd and tp in self.odd):
            return None
        ch, s, r = at
        replicas = _cut(ch.replicas[s].tolist())
        return (r, _leader_isr_at(ch, s), replicas, *_moving_at(ch, s, replicas))

    def with_leader_isr(self, row: int, li: LeaderIsr, was: LeaderIsr) -> "PartitionImage | None":
        """The image after the partition at `row`, whose leader-and-ISR is `was` (as
        `leader_isr_row` read it), took `li`: `_with_leader_isrs` of one change, for a row read
        by `leader_isr_row`. None if `li` is not something the columns hold exactly (the caller
        then goes the general way)."""
        leader, leader_epoch, isr, controller_epoch, zk_version = li
        width = self.width
        if isr.__class__ is not tuple or len(isr) > width or (isr and (min(isr) < 0 or max(isr) > _I32)) \
                or not (-_I32 - 1 <= leader <= _I32 and 0 <= leader_epoch <= _I32
                        and -_I32 - 1 <= controller_epoch <= _I32 and -_I32 - 1 <= zk_version <= _I32):
            return None  # (as `_is_odd` says of the leader-and-ISR)
        c = row >> _SHIFT
        s = row & _MASK
        chunk = self.chunks[c]
        columns = list(chunk)  # the changed ones copied (once), the rest shared
        if leader != was[0]:
            a = columns[_LEADER] = chunk.leader.copy()
            a[s] = leader
        if leader_epoch != was[1]:
            a = columns[_LEADER_EPOCH] = chunk.leader_epoch.copy()
            a[s] = leader_epoch
        if isr != was[2]:
            a = columns[_ISR] = chunk.isr.copy()
            a[s] = isr + (PAD,) * (width - len(isr))
        if controller_epoch != was[3]:
            a = columns[_CONTROLLER_EPOCH] = chunk.controller_epoch.copy()
            a[s] = controller_epoch
        if zk_version != was[4]:
            a = columns[_ZK_VERSION] = chunk.zk_version.copy()
            a[s] = zk_version
        chunks = list(self.chunks)
        chunks[c] = _new(Chunk, columns)
        return PartitionImage(tuple(chunks), self.index, self.tp_chunks, width, self.size, self.count, self.odd,
                              self.in_order)

    def with_partitions(self, partitions: Mapping, changed: Iterable[TopicPartition]) -> "PartitionImage":
        """The image after the partitions in `changed` took their values in `partitions`
        (absent there: removed)."""
        return self.with_changes({tp: partitions.get(tp) for tp in changed})

    def with_columns(self, *groups: tuple[np.ndarray, dict]) -> "PartitionImage":
        """The image with new values in some columns of some present rows: each group is
        `(rows, {column: values aligned with rows})`. The whole-cluster decisions write their
        results this way; each changed column of each changed chunk is copied once."""
        chunks = list(self.chunks)
        copied: dict[int, dict] = {}
        groups = [(np.asarray(rows, np.intp), cols) for rows, cols in groups if len(rows)]
        if sum(len(rows) for rows, _ in groups) >= _WHOLE_COLUMNS * CHUNK:
            whole = self._with_whole_columns(chunks, groups)
            if whole is not None:
                return whole
        for rows, cols in groups:
            for c, part, at in chunk_groups(rows):
                mine = copied.setdefault(c, {})
                for name, values in cols.items():
                    a = mine.get(name)
                    if a is None:
                        a = mine[name] = getattr(chunks[c], name).copy()
                    a[at] = values[part]
        for c, mine in copied.items():
            chunks[c] = chunks[c]._replace(**mine)
        return PartitionImage(tuple(chunks), self.index, self.tp_chunks, self.width, self.size, self.count, self.odd,
                              self.in_order)

    def _with_whole_columns(self, chunks: list, groups: list) -> "PartitionImage | None":
        """`with_columns` for a change over much of the image (a broker failure's elections on a
        large cluster): each changed column is laid out whole once (the chunks joined), written
        with one assignment per group, and the changed chunks become views of it, as
        `from_columns` lays them out; the unchanged chunks stay shared. A chunk at a time, the
        same 100,000-row change was some 1,500 small copies and assignments (12.1 against 5.8 ms,
        docs/bench/2026-11-28-forenoon/with-columns-ab.txt).
        None when a chunk is not `CHUNK` rows (the chunk-at-a-time way then)."""
        if any(len(ch.present) != CHUNK for ch in chunks):
            return None
        touched = np.zeros(len(chunks), bool)
        names: dict[str, list] = {}
        for rows, cols in groups:
            touched[rows >> _SHIFT] = True
            for name, values in cols.items():
                names.setdefault(name, []).append((rows, values))
        changed = np.flatnonzero(touched).tolist()
        replaced: dict[int, dict] = {c: {} for c in changed}
        for name, writes in names.items():
            full = np.concatenate([getattr(ch, name) for ch in chunks])
            for rows, values in writes:
                full[rows] = values
            for c in changed:
                replaced[c][name] = full[c * CHUNK:(c + 1) * CHUNK]
        for c, mine in replaced.items():
            chunks[c] = chunks[c]._replace(**mine)
        return PartitionImage(tuple(chunks), self.index, self.tp_chunks, self.width, self.size, self.count, self.odd,
                              self.in_order)

    # -- the mapping (what the scalar rules read) -------------------------------------------------

    def _present(self, tp: TopicPartition) -> tuple[Chunk, int, int] | None:
        """`(chunk, slot, row)` of a partition the image holds, None if it holds none."""
        r = self.index.get(tp)
        if r is None:
            return None
        ch = self.chunks[r >> _SHIFT]
        s = r & _MASK
        return (ch, s, r) if ch.present.item(s) else None

    def get(self, tp: TopicPartition, default=None):
        at = self._present(tp)
        if at is None:
            return default
        if self.odd:
            info = self.odd.get(tp)
            if info is not None:
                return info
        return _info_at(at[0], at[1])

    def __getitem__(self, tp: TopicPartition) -> PartitionInfo:
        info = self.get(tp)
        if info is None:
            raise KeyError(tp)
        return info

    def __contains__(self, tp) -> bool:
        r = self.index.get(tp)
        return r is not None and self.chunks[r >> _SHIFT].present.item(r & _MASK)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[TopicPartition]:
        for ch, tps in zip(self.chunks, self.tp_chunks):
            yield from compress(tps, ch.present[:len(tps)].tolist())

    def keys(self) -> list[TopicPartition]:
        """Every partition, in row order (one C-level pass a chunk)."""
        return list(chain.from_iterable(
            compress(tps, ch.present[:len(tps)].tolist()) for ch, tps in zip(self.chunks, self.tp_chunks)))

    def items(self) -> list[tuple[TopicPartition, PartitionInfo]]:
        """Every partition with its value, in row order, built a chunk at a time."""
        out: list = []
        odd = self.odd
        for ch, tps in zip(self.chunks, self.tp_chunks):
            n = len(tps)
            present = ch.present[:n].tolist()
            infos = _infos_at(ch, slice(0, n))
            if False in present:
                out.extend((tp, info) for tp, info, p in zip(tps, infos, present) if p)
            else:
                out.extend(zip(tps, infos))
        if odd:
            out = [(tp, odd.get(tp, info)) for tp, info in out]
        return out

    def values(self) -> list[PartitionInfo]:
        return [info for _, info in self.items()]

    def get_many(self, tps: Iterable[TopicPartition]) -> list[PartitionInfo | None]:
        """`[self.get(tp) for tp in tps]`, built a chunk at a time."""
        tps = list(tps)
        out: list = [None] * len(tps)
        index = self.index
        by_chunk: dict[int, tuple[list[int], list[int]]] = {}
        for k, tp in enumerate(tps):
            r = index.get(tp)
            if r is not None:
                at, slots = by_chunk.setdefault(r >> _SHIFT, ([], []))
                at.append(k)
                slots.append(r & _MASK)
        odd = self.odd
        for c, (at, slots) in by_chunk.items():
            ch = self.chunks[c]
            if len(slots) <= _FEW_ROWS:
                present = [ch.present.item(s) for s in slots]
                infos = [_info_at(ch, s) if p else None for s, p in zip(slots, present)]
            else:
                idx = np.array(slots, np.intp)
                present = ch.present[idx].tolist()
                infos = _infos_at(ch, idx)
            for k, info, p in zip(at, infos, present):
                if p:
                    out[k] = odd.get(tps[k], info) if odd else info
        return out

    def assignment_of(self, tp: TopicPartition) -> ReplicaAssignment | None:
        """`get(tp).assignment` (None: absent), from the replica columns without building the
        rest of the partition: the replay's history reads the assignment of every partition an
        ISR change lists."""
        at = self._present(tp)
        if at is None:
            return None
        if self.odd:
            info = self.odd.get(tp)
            if info is not None:
                return info.assignment
        ch, s, _ = at
        replicas = _cut(ch.replicas[s].tolist())
        return _assignment(replicas, *_moving_at(ch, s, replicas))

    def assignments_of(self, tps: Sequence[TopicPartition]) -> list[ReplicaAssignment | None]:
        """`[get(tp).assignment ...]` (None for a partition the image does not hold), read from
        the replica columns without building the partitions: the reassignment plan, relisted on
        every rewrite, is checked against the assignments alone."""
        rows = self.rows_of(tps)
        out: list = [None] * len(tps)
        known = np.flatnonzero(rows >= 0)
        if not len(known):
            return out
        odd = self.odd
        for c, part, slots in chunk_groups(rows[known]):
            ch = self.chunks[c]
            where = known[part].tolist()
            present = ch.present[slots].tolist()
            moving = ch.moving[slots].tolist()
            for k, s, row, p, m in zip(where, slots.tolist(), ch.replicas[slots].tolist(), present, moving):
                if not p:
                    continue
                info = odd.get(tps[k]) if odd else None
                if info is not None:
                    out[k] = info.assignment
                    continue
                replicas = _cut(row)
                out[k] = _assignment(replicas, *_moving_at(ch, s, replicas)) if m else _assignment(replicas, (), ())
        return out

    def leaders_of(self, tps: Sequence[TopicPartition]) -> list[int | None]:
        """`[get(tp).leader_isr.leader ...]` (None for a partition the image does not hold or
        that has no leader-and-ISR), read from the leader column without building the
        partitions: the replay's history notes the leader each write replaced."""
        rows = self.rows_of(tps)
        out: list = [None] * len(tps)
        known = np.flatnonzero(rows >= 0)
        odd = self.odd
        for c, part, slots in chunk_groups(rows[known]):
            ch = self.chunks[c]
            present = ch.present[slots].tolist()
            held = (ch.present[slots] & ch.has_state[slots]).tolist()
            for k, p, h, leader in zip(known[part].tolist(), present, held, ch.leader[slots].tolist()):
                if odd and p and (info := odd.get(tps[k])) is not None:
                    out[k] = None if info.leader_isr is None else info.leader_isr.leader
                elif h:
                    out[k] = leader
        return out

    def views_many(self, tps: Iterable[TopicPartition]) -> dict:
        """`{tp: PartitionView or None}`: each partition as it is sent to brokers (None: absent
        or without a leader-and-ISR), built straight from the columns a chunk at a time."""
        out: dict = {}
        index = self.index
        by_chunk: dict[int, tuple[list, list[int]]] = {}
        for tp in tps:
            r = index.get(tp)
            if r is None:
                out[tp] = None
            else:
                at, slots = by_chunk.setdefault(r >> _SHIFT, ([], []))
                at.append(tp)
                slots.append(r & _MASK)
        odd = self.odd
        for c, (at, slots) in by_chunk.items():
            ch = self.chunks[c]
            idx = np.array(slots, np.intp)
            ok = (ch.present[idx] & ch.has_state[idx]).tolist()
            reps = ch.replicas[idx].tolist()
            isrs = ch.isr[idx].tolist()
            lead, lep, cep, ver = (ch.leader[idx].tolist(), ch.leader_epoch[idx].tolist(),
                                   ch.controller_epoch[idx].tolist(), ch.zk_version[idx].tolist())
            mov = ch.moving[idx].tolist()
            adds = rems = None
            if True in mov:
                adds, rems = ch.adding[idx].tolist(), ch.removing[idx].tolist()
            cut_of: dict[tuple, tuple] = {}
            for k, tp in enumerate(at):
                if not ok[k]:
                    out[tp] = None
                    continue
                if odd and tp in odd:
                    info = odd[tp]
                    li, a = info.leader_isr, info.assignment
                    out[tp] = _new(PartitionView, (tp, li[0], li[1], li[2], li[3], li[4], a.replicas, a.adding,
                                                   a.removing, False))
                    continue
                key = tuple(reps[k])
                replicas = cut_of.get(key)
                if replicas is None:
                    replicas = cut_of[key] = _cut(reps[k])
                if mov[k]:
                    adding = tuple(r for r, f in zip(replicas, adds[k]) if f)
                    removing = tuple(r for r, f in zip(replicas, rems[k]) if f)
                else:
                    adding = removing = ()
                out[tp] = _new(PartitionView, (tp, lead[k], lep[k], _cut(isrs[k]), cep[k], ver[k], replicas, adding,
                                               removing, False))
        return out

    def set(self, tp: TopicPartition, info: PartitionInfo) -> "PartitionImage":
        return self.with_changes({tp: info})

    def delete(self, tp: TopicPartition) -> "PartitionImage":
        if tp not in self:
            raise KeyError(tp)
        return self.with_changes({tp: None})

    def mutate(self) -> "ImageMutation":
        return ImageMutation(self)

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, (PartitionImage, Mapping, PMap)):
            return NotImplemented
        other = as_image(other)
        if self.count != other.count:
            return False
        if self.chunks == () or (self.index is other.index and all(
                a is b for x, y in zip(self.chunks, other.chunks) for a, b in zip(x, y))):
            return self.odd == other.odd
        return dict(self.items()) == dict(other.items())

    def __hash__(self) -> int:
        return hash(frozenset(self.items()))

    def __repr__(self) -> str:
        return f"PartitionImage({self.count} partitions, {len(self.chunks)} chunks, width {self.width})"

    # -- columns (what the whole-cluster decisions read) --------------------------------------------

    def column(self, name: str) -> np.ndarray:
        """One column over every used row (row id order), as one array (a fresh concatenation)."""
        if not self.chunks:
            return getattr(_empty_chunk(self.width), name)[:0]
        parts = [getattr(ch, name) for ch in self.chunks]
        last = self.size - (len(parts) - 1) * CHUNK
        parts[-1] = parts[-1][:last]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def topic_mask(self, topics: Collection[str]) -> np.ndarray:
        """A mask over every used row: the partitions of `topics`. (One membership test per row,
        a few milliseconds at 100,000 partitions; the decisions ask only while a deletion is
        queued.)"""
        return np.fromiter((tp.topic in topics for chunk in self.tp_chunks for tp in chunk), bool, self.size)

    def tps(self, rows: np.ndarray) -> list[TopicPartition]:
        """The partitions of row ids."""
        tc = self.tp_chunks
        if len(rows) == self.size and (not len(rows) or (rows[0] == 0 and (np.diff(rows) == 1).all())):
            return list(chain.from_iterable(tc))  # every row, in order (a whole-cluster decision)
        return [tc[r >> _SHIFT][r & _MASK] for r in rows.tolist()]

    def tps_sorted(self, rows: np.ndarray) -> tuple[list[TopicPartition], np.ndarray | None]:
        """The partitions of row ids `rows` (ascending) in partition order, and the permutation
        of `rows` that puts them there (None: they already are, as when the image lays its rows
        out in partition order, `in_order`). The whole-cluster decisions act in the rule's
        order: partitions sorted."""
        tps = self.tps(rows)
        if self.in_order or not len(rows):
            return tps, None
        order = np.array(sorted(range(len(tps)), key=tps.__getitem__), np.intp)
        return [tps[k] for k in order.tolist()], order

    def row(self, tp: TopicPartition) -> int | None:
        return self.index.get(tp)

    def rows_of(self, tps) -> np.ndarray:
        """The row id of each partition of `tps` (a sequence), -1 for one the image does not
        know: a release looks up every partition of its requests, a landed write its versions.
        A `RowIndex`'s dict first, one C-level lookup each (its own `get` is a Python call once
        rows were added since the load); the few misses then in the whole index."""
        index = self.index
        found = list(map(index.base.get if index.__class__ is RowIndex else index.get, tps))
        try:
            return np.fromiter(found, np.intp, len(found))
        except TypeError:  # (None: added since the load, or not in the image)
            get = index.get
            return np.fromiter((get(tp, -1) if r is None else r for tp, r in zip(tps, found)), np.intp, len(found))

    def replica_states(self, tp: TopicPartition) -> list[tuple[int, ReplicaState]] | None:
        """`(replica, ReplicaState)` of each assigned replica of `tp` in assignment order
        (NonExistentReplica for one without a state), None if absent: what
        `get(tp).replica_state(r)` gives for each of its replicas, read from two rows of the
        chunk without building the partition (topic deletion asks this of every partition of
        every queued topic on every StopReplica answer)."""
        at = self._present(tp)
        if at is None:
            return None
        if self.odd:
            info = self.odd.get(tp)
            if info is not None:
                return [(x, info.replica_state(x)) for x in info.assignment.replicas]
        ch, s, _ = at
        replicas = _cut(ch.replicas[s].tolist())
        return list(zip(replicas, map(REPLICA_STATES.__getitem__, ch.rstate[s, :len(replicas)].tolist())))

    def replica_state_sets(self, groups: Sequence[Sequence[TopicPartition]]) -> list[set[ReplicaState]]:
        """For each group of partitions, the states `replica_states` gives for their replicas,
        as one set (partitions the image does not hold give none): read a chunk at a time for
        all groups at once, without a value per replica. Topic deletion asks this for every
        queued topic (a group) on every StopReplica answer, and needs only which states occur
        (all deleted, any in progress, any ineligible)."""
        found: list[set[ReplicaState]] = [set() for _ in groups]
        tps: list = []
        group_of: list[int] = []
        odd = self.odd
        for g, members in enumerate(groups):
            if odd:
                for tp in members:
                    info = odd.get(tp)
                    if info is None:
                        tps.append(tp)
                        group_of.append(g)
                    elif tp in self:
                        found[g].update(map(info.replica_state, info.assignment.replicas))
            else:
                tps.extend(members)
                group_of.extend(repeat(g, len(members)))
        rows = self.rows_of(tps)
        known = rows >= 0
        rows = rows[known]
        if not len(rows):
            return found
        group = np.array(group_of, np.int64)[known]
        keys: set[int] = set()  # group * _CODES + state code
        for c, part, slots in chunk_groups(rows):  # (a topic's rows are one chunk or a few)
            ch = self.chunks[c]
            present = ch.present[slots]
            slots = slots[present]
            key = group[part][present][:, None] * _CODES + ch.rstate[slots]
            keys.update(np.unique(key[ch.replicas[slots] != PAD]).tolist())
        for k in keys:
            found[k // _CODES].add(REPLICA_STATES[k % _CODES])
        return found

    def read(self, tp: TopicPartition) -> tuple | None:
        """One partition's row as plain values, None if absent: `(leader_isr or None, replicas,
        adding, removing, PartitionState, ((replica, ReplicaState), ...))`, the leader_isr as a
        `(leader, leader_epoch, isr, controller_epoch, zk_version)` tuple; replica states listed
        for assigned replicas that have one, in assignment order."""
        at = self._present(tp)
        if at is None:
            return None
        info = _info_at(at[0], at[1])
        li, a = info.leader_isr, info.assignment
        return (tuple(li) if li is not None else None, a.replicas, a.adding, a.removing, info.state,
                info.replica_states)


_WHOLE_COLUMNS = 16
"""From this many chunks' worth of changed rows, `with_columns` writes whole columns."""
_SHIFT = CHUNK.bit_length() - 1
_MASK = CHUNK - 1
assert 1 << _SHIFT == CHUNK


class ImageMutation:
    """A batch of changes to an image (`m[tp] = info`, `del m[tp]`, `m.pop(tp, None)`), applied
    chunk by chunk by `finish()`; the image itself never changes."""

    __slots__ = ("image", "changes")

    def __init__(self, image: PartitionImage):
        self.image = image
        self.changes: dict = {}

    def get(self, tp, default=None):
        if tp in self.changes:
            v = self.changes[tp]
            return default if v is None else v
        return self.image.get(tp, default)

    def __getitem__(self, tp):
        v = self.get(tp)
        if v is None:
            raise KeyError(tp)
        return v

    def __setitem__(self, tp, info) -> None:
        self.changes[tp] = info

    def set(self, tp, info) -> None:
        self.changes[tp] = info

    def __delitem__(self, tp) -> None:
        if self.get(tp) is None:
            raise KeyError(tp)
        self.changes[tp] = None

    def pop(self, tp, *default):
        v = self.get(tp)
        if v is None:
            if default:
                return default[0]
            raise KeyError(tp)
        self.changes[tp] = None
        return v

    def finish(self) -> PartitionImage:
        return self.image.with_changes(self.changes)


EMPTY_IMAGE = PartitionImage((), EMPTY, (), MIN_WIDTH, 0, 0, EMPTY, True)


def as_image(partitions) -> PartitionImage:
    """The image of a partitions mapping (itself if it is one): `ControllerState.partitions`'
    converter, so that a state built from a plain map (tests, decoded snapshots) holds columns."""
    if partitions.__class__ is PartitionImage:
        return partitions
    if not partitions:
        return EMPTY_IMAGE
    return PartitionImage.build(partitions)


def image_of(partitions) -> PartitionImage:
    """The image of a state's partitions (kept for the callers of the earlier memo)."""
    return as_image(partitions)


# -- the snapshot layout (codec) ----------------------------------------------------------------------

def encode_columns(image: PartitionImage) -> dict | None:
    """A snapshot's partitions as JSON columns (state codec v5), or None when some partition is
    odd (the codec then writes the per-partition layout of v4, which its decoder also reads).

    ``{"tps": [[topic, p], ...], "has_state": [0|1, ...], "leader": [...], "leader_epoch": [...],
    "controller_epoch": [...], "zk_version": [...], "isr": [[...], ...], "replicas": [[...], ...],
    "adding": [[...], ...], "removing": [[...], ...], "pstate": [code, ...], "rstate": [[code per
    replica], ...], "partition_states": [names], "replica_states": [names]}``, one entry per
    partition in partition order; state codes index the two name lists, so the encoding does not
    depend on the enums' order."""
    if image.odd:
        return None
    present = image.column("present")
    rows = np.flatnonzero(present)
    tps = image.tps(rows)
    # partition order, not row order: equal states encode equally whatever their history
    order = sorted(range(len(tps)), key=tps.__getitem__)
    rows = rows[np.array(order, np.intp)] if order else rows
    tps = [tps[k] for k in order]
    n_rep = (image.column("replicas")[rows] != PAD).sum(axis=1).tolist()
    n_isr = (image.column("isr")[rows] != PAD).sum(axis=1).tolist()

    def cut(name: str, counts: list) -> list:
        return [r[:k] for r, k in zip(image.column(name)[rows].tolist(), counts)]

    replicas = cut("replicas", n_rep)
    moving = image.column("moving")[rows].tolist()
    if True in moving:
        add_m = image.column("adding")[rows].tolist()
        rem_m = image.column("removing")[rows].tolist()
        adding = [[r for r, f in zip(reps, flags) if f] if m else [] for reps, flags, m in zip(replicas, add_m, moving)]
        removing = [[r for r, f in zip(reps, flags) if f] if m else [] for reps, flags, m in zip(replicas, rem_m, moving)]
    else:
        adding = removing = [[] for _ in tps]
    return {
        "tps": [[tp[0], tp[1]] for tp in tps],
        "has_state": [int(h) for h in image.column("has_state")[rows].tolist()],
        "leader": image.column("leader")[rows].tolist(),
        "leader_epoch": image.column("leader_epoch")[rows].tolist(),
        "controller_epoch": image.column("controller_epoch")[rows].tolist(),
        "zk_version": image.column("zk_version")[rows].tolist(),
        "isr": cut("isr", n_isr),
        "replicas": replicas,
        "adding": adding,
        "removing": removing,
        "pstate": image.column("pstate")[rows].tolist(),
        "rstate": cut("rstate", n_rep),
        "partition_states": [s.value for s in PARTITION_STATES],
        "replica_states": [s.value for s in REPLICA_STATES],
    }


_COLUMN_KEYS = ("tps", "has_state", "leader", "leader_epoch", "controller_epoch", "zk_version", "isr", "replicas",
                "adding", "removing", "pstate", "rstate", "partition_states", "replica_states")


def decode_columns(d: dict, error) -> PartitionImage:
    """The image `encode_columns` wrote; `error(message)` raises the codec's error.

    The columns as `encode_columns` writes them (partitions sorted and distinct, every value in
    Kafka's int32, every assignment exact) become the image's arrays directly
    (`_decoded_columns`); anything else (a hand-edited or damaged snapshot, an odd partition) is
    read a partition at a time, which names what is wrong or keeps the odd partition whole."""
    if set(d) != set(_COLUMN_KEYS):
        missing, extra = sorted(set(_COLUMN_KEYS) - set(d)), sorted(set(d) - set(_COLUMN_KEYS))
        error(f"partition columns: missing {missing}, unknown {extra}")
    try:
        image = _decoded_columns(d)
    except (ValueError, TypeError, OverflowError, KeyError, IndexError):
        image = None  # (numpy refused a value: a list where an int belongs, say)
    return image if image is not None else _decode_partitions(d, error)


def _int_array(values: list, n: int | None = None) -> np.ndarray | None:
    """`values` (plain ints) as an int64 array, or None if one is not an int (a float or a
    string would be converted or refused by numpy, where the per-partition reading names it).
    (A bool among ints reads as the int, as the per-partition path stores it.)"""
    a = np.array(values) if values else np.zeros(0, np.int64)
    if a.dtype != np.int64 or a.ndim != 1 or (n is not None and len(a) != n):
        return None
    return a


def _ragged(rows: list, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Lists of ints as (lengths, values row after row), or None if a row is not a list of ints."""
    for r in rows:
        if r.__class__ is not list:
            return None
    lens = np.fromiter(map(len, rows), np.int64, n)
    flat = _int_array(list(chain.from_iterable(rows)))
    return None if flat is None else (lens, flat)


def _packed(flat: np.ndarray, lens: np.ndarray, width: int, fill=PAD, dtype=np.int64) -> np.ndarray:
    """The rows whose values are `flat` (row after row, `lens[k]` values in row k) as a
    left-packed `[len(lens), width]` matrix padded with `fill`. Row-major boolean assignment
    fills each row's leading cells in order: no tuple is built per row (on a heap holding a
    100,000-partition snapshot, each allocation of many small tuples costs garbage-collector
    passes over all of it). A new controller's load (columnar_load.py) and a snapshot's
    columns (`decode_columns`) read their matrices this way."""
    m = np.full((len(lens), width), fill, dtype)
    m[np.arange(width) < lens[:, None]] = flat
    return m


def _decoded_columns(d: dict) -> "PartitionImage | None":
    """`decode_columns` for columns as `encode_columns` writes them, built as arrays (a 10,000
    partition snapshot: ~110 ms a partition at a time, most of a replay task's head); None where
    the per-partition reading must look (see `decode_columns`), never a different image."""
    import sys

    try:
        pcodes = np.array([P_CODE[PartitionState(v)] for v in d["partition_states"]] or [0], np.int8)
        rcodes = np.array([R_CODE[ReplicaState(v)] for v in d["replica_states"]] or [0], np.int8)
    except (ValueError, TypeError):
        return None
    raw = d["tps"]
    n = len(raw) if raw.__class__ is list else 0
    if not n or any(d[k].__class__ is not list or len(d[k]) != n for k in _COLUMN_KEYS[:12]):
        return None
    intern = sys.intern
    tps = []
    for t in raw:
        if t.__class__ is not list or len(t) != 2 or t[0].__class__ is not str or t[1].__class__ is not int:
            return None
        tps.append(_new(TopicPartition, (intern(t[0]), t[1])))
    if any(map(TopicPartition.__ge__, tps, tps[1:])):
        return None  # not sorted and distinct (a duplicate is an error the other path names)
    ints = [_int_array(d[k], n) for k in ("has_state",) + _INT_COLUMNS + ("pstate",)]
    reps, isrs, states = _ragged(d["replicas"], n), _ragged(d["isr"], n), _ragged(d["rstate"], n)
    if any(a is None for a in ints) or reps is None or isrs is None or states is None:
        return None
    has, leader, leader_epoch, controller_epoch, zk_version, pstate = ints
    has = has != 0
    rep_lens, rep_flat = reps
    isr_lens, isr_flat = isrs
    if not np.array_equal(states[0], rep_lens):
        return None
    low, high = -_I32 - 1, _I32
    if len(rep_flat) and (rep_flat.min() < 0 or rep_flat.max() > high):
        return None
    if (pstate < 0).any() or (pstate >= len(d["partition_states"])).any() or \
            (states[1] < 0).any() or (states[1] >= len(d["replica_states"])).any():
        return None
    width = max(MIN_WIDTH, int(rep_lens.max()), int(isr_lens[has].max()) if has.any() else 0)
    rep_m = _packed(rep_flat, rep_lens, width)
    ordered = np.sort(rep_m, axis=1)
    if ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != PAD)).any():
        return None  # a replica listed twice: odd
    # (a partition without a leader-and-ISR has no ISR, whatever its list held, however long)
    isr_m = _packed(isr_flat, isr_lens, max(width, int(isr_lens.max())))[:, :width]
    isr_m[~has] = PAD
    if (isr_m[has] < PAD).any() or (isr_m > high).any() or (leader[has] < low).any() or (leader[has] > high).any() \
            or (leader_epoch[has] < 0).any() or (leader_epoch[has] > high).any() \
            or (controller_epoch[has] < low).any() or (controller_epoch[has] > high).any() \
            or (zk_version[has] < low).any() or (zk_version[has] > high).any():
        return None  # outside int32 (or a negative ISR id): kept whole, as odd
    if (isr_m[has] == PAD).sum() != (width * int(has.sum()) - int(isr_lens[has].sum())):
        return None  # an ISR id of -1 would read back as padding
    adding = np.zeros((n, width), bool)
    removing = np.zeros((n, width), bool)
    moving = np.zeros(n, bool)
    add_rows, rem_rows = d["adding"], d["removing"]
    for k in range(n):
        a, r = add_rows[k], rem_rows[k]
        if a or r:
            if a.__class__ is not list or r.__class__ is not list:
                return None
            replicas = d["replicas"][k]
            # the columns give them back in assignment order, each once (else odd: `_is_odd`)
            if [x for x in replicas if x in a] != a or [x for x in replicas if x in r] != r \
                    or len(set(a)) != len(a) or len(set(r)) != len(r):
                return None
            moving[k] = True
            adding[k, :len(replicas)] = [x in a for x in replicas]
            removing[k, :len(replicas)] = [x in r for x in replicas]
        elif a.__class__ is not list or r.__class__ is not list:
            return None
    for column in (leader, leader_epoch, controller_epoch, zk_version):
        column[~has] = 0  # as `build` writes a partition without a leader-and-ISR
    return PartitionImage.from_columns(tps, width, {
        "present": np.ones(n, bool), "has_state": has,
        "leader": leader.astype(np.int32), "leader_epoch": leader_epoch.astype(np.int32),
        "controller_epoch": controller_epoch.astype(np.int32), "zk_version": zk_version.astype(np.int32),
        "replicas": rep_m.astype(np.int32), "isr": isr_m.astype(np.int32),
        "adding": adding, "removing": removing, "moving": moving,
        "pstate": pcodes[pstate], "rstate": _packed(rcodes[states[1]], rep_lens, width, R_NON_EXISTENT, np.int8),
    })


def _decode_partitions(d: dict, error) -> PartitionImage:
    """`decode_columns` a partition at a time (any input: what is wrong is named)."""
    import sys

    try:
        pnames = {s.value: s for s in PartitionState}
        rnames = {s.value: s for s in ReplicaState}
        pstates = [pnames[v] for v in d["partition_states"]]
        rstates = [rnames[v] for v in d["replica_states"]]
        n = len(d["tps"])
        if any(len(d[k]) != n for k in _COLUMN_KEYS[:12]):
            error("partition columns of different lengths")
        infos = {}
        for k in range(n):
            topic, p = d["tps"][k]
            if topic.__class__ is not str or p.__class__ is not int:
                error(f"partition columns: bad partition {d['tps'][k]!r}")
            replicas = tuple(d["replicas"][k])
            li = None
            if d["has_state"][k]:
                li = LeaderIsr(d["leader"][k], d["leader_epoch"][k], tuple(d["isr"][k]), d["controller_epoch"][k],
                               d["zk_version"][k])
            codes = d["rstate"][k]
            if len(codes) != len(replicas):
                error(f"partition columns: replica states of {topic}-{p} do not match its replicas")
            infos[TopicPartition(sys.intern(topic), p)] = PartitionInfo(
                _assignment(replicas, tuple(d["adding"][k]), tuple(d["removing"][k])), li, pstates[d["pstate"][k]],
                tuple(_pair(r, rstates[c]) for r, c in zip(replicas, codes) if rstates[c] is not ReplicaState.NON_EXISTENT))
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        error(f"partition columns: {exc!r}")
    if len(infos) != n:
        error("partition columns: a partition is listed twice")
    try:
        return as_image(infos)
    except (TypeError, ValueError, OverflowError) as exc:
        error(f"partition columns: {exc!r}")
