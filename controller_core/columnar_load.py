"""A new controller's partition image, built as columns straight from its ZooKeeper snapshot.

`failover.on_elected` (Kafka's onControllerFailover) stays the specification: for every topic of
the snapshot whose assignment `topics.validate_assignment` accepts, each partition becomes a
`PartitionInfo` (its assignment, its state znode or none, the partition state New without one,
else Online or Offline by whether its leader is live, each replica Online on a live broker and
ReplicaDeletionIneligible on a dead one), and the image is built from that map. Called by
`on_elected` first, `load` makes the same image without a value per partition: the assignments,
one shared value per distinct assignment as the ZooKeeper reader and the journal's codec give
them, are checked and laid out once per value; so are the state contents when the states come
as the reader's columns (`SnapshotStates`: each distinct content once, spread over the rows by
index); states given as pairs (a journal's record, tests) are flattened into a few lists,
checked and turned into columns with one numpy call each.

It is exact, or it declines (None) and `on_elected` walks the partitions:

- the cheap checks (partition ids 0..n-1 in order, non-empty replica lists of distinct
  non-negative int ids) only single topics out; the verdict on such a topic is the spec's own
  (`validate_assignment`), and if the spec accepts a topic the checks refused, the snapshot is
  left to the walk rather than guessing;
- anything `PartitionImage.build` would keep whole in `odd` (ids or numbers outside int32, a
  reassignment's adding or removing replicas not listed in assignment order, values of another
  type than int), a topic listed twice, or a switched-off path (`ENABLED`) declines.

tests/core/test_failover_load.py compares the two builds on random snapshots (rejected topics,
partitions without a state, dead leaders and replicas, reassignments, topics to delete).
"""
from __future__ import annotations

from itertools import chain, repeat
from operator import attrgetter, is_not, itemgetter, or_
from typing import NamedTuple

import numpy as np

from .columns import _I32, EMPTY_IMAGE, MIN_WIDTH, P_CODE, PAD, R_CODE, R_NON_EXISTENT, PartitionImage, _is_odd, _packed
from .machines import PartitionState, ReplicaState
from .partition_info import PartitionInfo, _pair
from .snapshot_states import SnapshotStates
from .state import TopicInfo
from .topics import validate_assignment
from .values import TopicPartition

ENABLED = True
"""Tests switch this off to compare with the per-partition build of `failover.on_elected`."""

_NEW, _ONLINE, _OFFLINE = P_CODE[PartitionState.NEW], P_CODE[PartitionState.ONLINE], P_CODE[PartitionState.OFFLINE]
_R_ONLINE, _R_INELIGIBLE = R_CODE[ReplicaState.ONLINE], R_CODE[ReplicaState.DELETION_INELIGIBLE]
_NO_STATE = (0, 0, (), 0, 0)  # what the columns hold for a partition without a state znode
_new = tuple.__new__
_replicas_of, _adding_of, _removing_of = attrgetter("replicas"), attrgetter("adding"), attrgetter("removing")
_first, _second = itemgetter(0), itemgetter(1)
_INT = {int}


class Loaded(NamedTuple):
    """What `on_elected` builds from the snapshot's topics: the accepted topics (snapshot
    order), the image of their partitions, and the reasons topics were rejected (snapshot order)."""

    topics: dict[str, TopicInfo]
    image: PartitionImage
    rejected: list[str]


def load(topics: tuple, partition_states, live: frozenset[int]) -> Loaded | None:
    """The image of the snapshot's partitions as `on_elected` builds it (see the module
    docstring), or None when the columns cannot be trusted to hold it exactly."""
    if not ENABLED:
        return None
    names = [t for t, _ in topics]
    if len(set(names)) != len(names):
        return None  # a later entry would overwrite part of an earlier one: the walk knows how
    if not names:
        return Loaded({}, EMPTY_IMAGE, [])
    by_name = sorted(topics, key=lambda e: e[0])  # rows in partition order, as `build` lays them
    counts = [len(parts) for _, parts in by_name]
    n_all = sum(counts)
    pairs = list(chain.from_iterable(parts for _, parts in by_name))
    ps = list(map(_first, pairs))
    ras = list(map(_second, pairs))
    if not set(map(type, ps)) <= _INT:
        return None
    # the assignments: a cluster has a few dozen distinct values among its partitions, shared
    # (values.shared_assignment, as the ZooKeeper reader and the journal codec make them), so
    # each distinct object is checked and laid out once and every row takes its own by `code`.
    # The objects are told apart by id (`ras` holds them, so the ids stay theirs meanwhile),
    # sorted by numpy: a snapshot with one value per partition costs that sort, ~10 % more load.
    first, code = np.unique(np.fromiter(map(id, ras), np.int64, n_all), return_index=True, return_inverse=True)[1:]
    code = code.reshape(-1)
    uniq = list(map(ras.__getitem__, first.tolist()))
    reps = list(map(_replicas_of, uniq))
    ids = list(chain.from_iterable(reps))
    if not set(map(type, ids)) <= _INT:
        return None  # (a bool id: validate_assignment's verdict differs from numpy's)
    try:
        u_lens = np.fromiter(map(len, reps), np.int64, len(uniq))
        flat = np.fromiter(ids, np.int64, len(ids))
        p_arr = np.fromiter(ps, np.int64, n_all)
    except OverflowError:
        return None
    width = max(MIN_WIDTH, int(u_lens.max()) if n_all else 0)

    # -- the cheap checks, then the spec's verdict on each topic they single out ----------------
    u_suspect = u_lens == 0
    if len(flat):
        u_suspect[np.repeat(np.arange(len(uniq)), u_lens)[flat < 0]] = True
        if (flat > _I32).any():
            return None  # valid, but odd in the columns
    u_rep = _packed(flat, u_lens, width)
    srt = np.sort(u_rep, axis=1)
    u_suspect |= ((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] != PAD)).any(axis=1)
    lens = u_lens[code]
    rep_m = u_rep[code]
    topic_of = np.repeat(np.arange(len(by_name)), counts)
    starts = np.cumsum([0] + counts[:-1])
    suspect_row = u_suspect[code] | (p_arr != np.arange(n_all) - np.repeat(starts, counts).astype(np.int64))
    suspects = set(topic_of[suspect_row].tolist()) if suspect_row.any() else set()
    suspects.update(i for i, c in enumerate(counts) if c == 0)
    reasons: dict[str, str] = {}
    for i in sorted(suspects):
        topic, parts = by_name[i]
        reason = validate_assignment(dict(parts), same_factor=False)
        if reason is None:
            return None  # the cheap checks refused what the spec accepts: the walk decides
        reasons[topic] = reason
    rejected = [f"topic {t}: {reasons[t]}; ignoring it" for t in names if t in reasons]
    infos: dict[int, TopicInfo] = {}  # one value per partition count (frozen: shared safely)
    accepted = {t: infos.get(len(parts)) or infos.setdefault(len(parts), TopicInfo(len(parts)))
                for t, parts in topics if t not in reasons}

    if reasons:
        keep = ~np.isin(topic_of, np.array(sorted(suspects), np.int64))
        lens = lens[keep]
        width = max(MIN_WIDTH, int(lens.max()) if len(lens) else 0)  # as wide as the kept rows need
        rep_m = rep_m[keep, :width]
        code = code[keep]
        by_name = [e for e in by_name if e[0] not in reasons]
    n = len(code)
    if not n:
        return Loaded(accepted, EMPTY_IMAGE, rejected)

    # -- the state znodes: the snapshot's own partitions when it lists a state for each, in
    # order (as the election adapter reads them), else looked up one by one ---------------------
    columns = _state_columns(by_name, partition_states, n) if type(partition_states) is SnapshotStates else None
    if columns is not None:  # the reader's columns: each distinct content read once
        tps, ints, isr_flat, isr_lens, content_of = columns
        has = np.ones(n, bool)
    else:
        content_of = None
        tps, lis = _states_in_order(by_name, partition_states, n)
        if tps is None:
            tps = [_new(TopicPartition, (t, p)) for t, parts in by_name for p in range(len(parts))]
            get = dict(partition_states).get
            lis = list(map(get, tps))
        if None in lis:
            has = np.fromiter(map(is_not, lis, repeat(None)), bool, n)
            lis = [_NO_STATE if li is None else li for li in lis]
        else:
            has = np.ones(n, bool)
        # one list a field (not `zip(*lis)`: that makes an iterator, a tracked object, per partition)
        leaders, leps, isrs, ceps, vers = (list(map(itemgetter(k), lis)) for k in range(5))
        isr_ids = list(chain.from_iterable(isrs))
        # numpy infers an integer dtype only if every value is an int (a bool among ints reads as
        # the int it is equal to, as it does in the walk's comparisons); anything else declines
        ints = np.array((leaders, leps, ceps, vers))
        isr_flat = np.array(isr_ids) if isr_ids else np.zeros(0, np.int64)
        if ints.dtype.kind != "i" or isr_flat.dtype.kind != "i":
            return None
        ints = ints.astype(np.int64)
        isr_lens = np.fromiter(map(len, isrs), np.int64, n)
    lo = -_I32 - 1
    if ((ints < lo) | (ints > _I32)).any() or (ints[1] < 0).any() \
            or (len(isr_flat) and ((isr_flat < 0) | (isr_flat > _I32)).any()):
        return None  # odd: `build` keeps such a partition whole
    width = max(width, int(isr_lens.max()))
    if width > rep_m.shape[1]:
        rep_m = np.concatenate([rep_m, np.full((n, width - rep_m.shape[1]), PAD, np.int64)], axis=1)
    isr_m = _packed(isr_flat, isr_lens, width)
    if content_of is not None:
        isr_m = isr_m[content_of]  # (the distinct contents' ISRs, spread over their partitions)

    # -- the machines' states: partitions by their leader, replicas by their broker ----------------
    live_ids = np.array(sorted(live), np.int64)
    leader = ints[0]
    pstate = np.where(~has, _NEW, np.where(np.isin(leader, live_ids), _ONLINE, _OFFLINE)).astype(np.int8)
    assigned = rep_m != PAD
    rstate = np.where(assigned, np.where(np.isin(rep_m, live_ids), _R_ONLINE, _R_INELIGIBLE),
                      R_NON_EXISTENT).astype(np.int8)

    # -- reassignments in flight: few, checked one by one as `build` checks them ------------------
    # (per distinct assignment, of those the kept rows use)
    if set(map(_adding_of, uniq)) | set(map(_removing_of, uniq)) == {()}:
        u_moving = np.zeros(len(uniq), bool)
    else:
        u_moving = np.fromiter(map(or_, map(bool, map(_adding_of, uniq)), map(bool, map(_removing_of, uniq))), bool,
                               len(uniq))
        used = np.zeros(len(uniq), bool)
        used[code] = True
        u_moving &= used  # (a rejected topic's: not checked)
    if not u_moving.any():
        moving = np.zeros(n, bool)
        adding = np.zeros((n, width), bool)
        removing = np.zeros((n, width), bool)
    else:
        u_adding = np.zeros((len(uniq), width), bool)
        u_removing = np.zeros((len(uniq), width), bool)
        for k in np.flatnonzero(u_moving).tolist():
            ra = uniq[k]
            info = PartitionInfo(ra, None, PartitionState.NEW,
                                 tuple(_pair(r, ReplicaState.ONLINE) for r in ra.replicas))
            if _is_odd(info):
                return None
            m = len(ra.replicas)
            u_adding[k, :m] = [r in ra.adding for r in ra.replicas]
            u_removing[k, :m] = [r in ra.removing for r in ra.replicas]
        moving = u_moving[code]
        adding = u_adding[code]
        removing = u_removing[code]

    image = PartitionImage.from_columns(tps, width, {
        "present": np.ones(n, bool),
        "has_state": has,
        "leader": ints[0].astype(np.int32),
        "leader_epoch": ints[1].astype(np.int32),
        "controller_epoch": ints[2].astype(np.int32),
        "zk_version": ints[3].astype(np.int32),
        "replicas": rep_m.astype(np.int32),
        "isr": isr_m.astype(np.int32),
        "adding": adding,
        "removing": removing,
        "moving": moving,
        "pstate": pstate,
        "rstate": rstate,
    })
    return Loaded(accepted, image, rejected)


def _states_in_order(by_name: list, partition_states: tuple, n: int) -> tuple[list | None, list | None]:
    """`(tps, leader_isrs)` of the rows when the snapshot lists exactly one state for each of
    them, in row order (topics by name, partitions 0..n-1): the snapshot's own `TopicPartition`
    values are then the rows', found without building or hashing one. (None, None) if not."""
    if len(partition_states) != n:
        return None, None
    tps = list(map(_first, partition_states))
    if not _in_row_order(by_name, tps):
        return None, None
    return tps, list(map(_second, partition_states))


def _in_row_order(by_name: list, tps: list) -> bool:
    """Whether `tps` are the rows' partitions in row order (topics by name, partitions 0..n-1)."""
    ps = list(map(_second, tps))
    if ps != list(chain.from_iterable(range(len(parts)) for _, parts in by_name)) or not set(map(type, ps)) <= _INT:
        return False
    if list(map(_first, tps)) != list(chain.from_iterable(repeat(t, len(parts)) for t, parts in by_name)):
        return False
    return set(map(type, tps)) <= {TopicPartition}


def _state_columns(by_name: list, states: SnapshotStates, n: int) -> tuple | None:
    """`(tps, ints, isr_flat, isr_lens, content_of)` straight from the reader's columns, when
    they list one state per row in row order and every distinct content is some partition's;
    None if not (the caller then reads them as pairs). `ints` holds per partition its leader,
    leader epoch, controller epoch and znode version; the ISRs are the distinct contents' (their
    members `isr_flat`, `isr_lens[k]` for content k), which `content_of` spreads over the rows.
    Only the distinct contents are checked and flattened in Python: a few hundred values for
    100,000 partitions after an election."""
    if len(states) != n:
        return None
    tps = list(states.tps)
    if not _in_row_order(by_name, tps):
        return None
    contents, code = states.contents, states.content_of
    if not np.bincount(code, minlength=len(contents)).all():
        return None
    fields = np.array([(li[0], li[1], li[3]) for li in contents])
    isrs = [li[2] for li in contents]
    isr_ids = list(chain.from_iterable(isrs))
    isr_flat = np.array(isr_ids) if isr_ids else np.zeros(0, np.int64)
    if fields.dtype.kind != "i" or isr_flat.dtype.kind != "i":  # (as the pairs' path declines)
        return None
    ints = np.empty((4, n), np.int64)
    ints[:3] = fields.astype(np.int64).T[:, code]
    ints[3] = states.versions
    return tps, ints, isr_flat, np.fromiter(map(len, isrs), np.int64, len(isrs)), code
