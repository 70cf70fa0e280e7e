"""Kafka 2.4's election rules over many partitions at once, on the columns of `columns.py`.

`election.py` is the specification: one partition, plain tuples, readable. These functions
compute the same results for n partitions from `[n, width]` matrices of replicas and ISRs
(left-packed, padded with `PAD`), and Hypothesis checks, in tests/core/test_vector_election.py,
that row i of every result equals the scalar rule applied to row i: empty ISRs, offline
replicas, ISR members that are not assigned, reassignments in flight, unclean allowed or not.

Each returns `(ok, leader, isr)`: `ok[i]` says whether a leader was found (the scalar rule did
not return None), `leader[i]` the chosen broker (PAD where not ok) and `isr[i]` the new ISR,
left-packed and padded. `offline` also returns `unclean[i]`. Who calls them: the whole-cluster
decisions (a broker failure's offline election), which then turn the rows into commands.
"""
from __future__ import annotations

from typing import Collection

import numpy as np

from .columns import PAD
from .values import NO_LEADER


def _as_ids(brokers: Collection[int]) -> np.ndarray:
    return np.fromiter(brokers, np.int32, len(brokers)) if brokers else np.zeros(0, np.int32)


_FEW = 16  # up to this many brokers, one comparison per broker beats np.isin's sort


def member(matrix: np.ndarray, brokers: Collection[int]) -> np.ndarray:
    """`matrix[i, j] in brokers` (False on padding)."""
    if len(brokers) <= _FEW:
        mask = np.zeros(matrix.shape, bool)
        for b in brokers:
            if b != PAD:
                mask |= matrix == b
        return mask
    return np.isin(matrix, _as_ids(brokers)) & (matrix != PAD)


def one_of(codes: np.ndarray, among: np.ndarray) -> np.ndarray:
    """`np.isin(codes, among)` for a few small codes (replica or partition state codes): a
    comparison per code, without isin's sort."""
    found = np.zeros(codes.shape, bool)
    for c in among.tolist():
        found |= codes == c
    return found


def contained(values: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """`values[i, j] in sets[i, :]` row by row (False on padding of `values`)."""
    if values.shape[1] == 0 or sets.shape[1] == 0:
        return np.zeros(values.shape, bool)
    # a comparison per column of `sets` (a few): 7x faster at 10,000 x 3 than broadcasting to
    # a [n, width, width] cube and reducing it
    found = values == sets[:, :1]
    for k in range(1, sets.shape[1]):
        found |= values == sets[:, k:k + 1]
    return found & (values != PAD)


def live_outside_isr(replicas: np.ndarray, isr: np.ndarray, live_at: np.ndarray) -> np.ndarray:
    """Per row: some replica marked live in `live_at` (`member(replicas, live)`, or the
    candidates a strategy may take) is missing from the row's ISR. An election refused on such
    a row may be the cached ISR's fault, so it is re-read before the refusal is final
    (`partitions.choose`, step.py); the columnar paths note those rows with this one rule."""
    return row_any(live_at & ~contained(replicas, isr))


def row_any(mask: np.ndarray) -> np.ndarray:
    """`mask.any(axis=1)`, a column at a time: numpy's reduction along a row of a few cells
    costs ~30 ns a row, an OR of columns ~1 ns a cell (100,000 x 3: 2.9 against 0.24 ms)."""
    n, width = mask.shape
    if not width:
        return np.zeros(n, bool)
    out = mask[:, 0].copy()
    for j in range(1, width):
        out |= mask[:, j]
    return out


def row_count(mask: np.ndarray) -> np.ndarray:
    """`mask.sum(axis=1)` (int64), a column at a time (see `row_any`)."""
    n, width = mask.shape
    out = np.zeros(n, np.int64)
    for j in range(width):
        out += mask[:, j]
    return out


def first(mask: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, whether `mask` has a True and the value at the first True (PAD if none); the
    columns taken from the last to the first, so the first True's value is the one that stays
    (100,000 x 3: 2.5 ms against 6 ms for `argmax` along the rows and a gather)."""
    width = mask.shape[1]
    picked = np.full(len(mask), PAD, np.int32)
    for j in range(width - 1, -1, -1):
        np.copyto(picked, values[:, j], where=mask[:, j], casting="unsafe")
    return row_any(mask), picked


def pack(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Keep `values[i, j]` where `keep[i, j]`, left-packed in their order, padded with PAD."""
    out = np.full(values.shape, PAD, np.int32)
    # each kept value's place is the number of kept values before it in its row; one column at a
    # time (a few) rather than one scatter over every kept cell: 2x faster at 10,000 x 3
    place = np.cumsum(keep, axis=1, dtype=np.int16) - 1
    for j in range(values.shape[1]):
        rows = np.flatnonzero(keep[:, j])
        out[rows, place[rows, j]] = values[rows, j]
    return out


def led_by(leader: np.ndarray, has_state: np.ndarray, brokers: Collection[int]) -> np.ndarray:
    """Rows whose leader is one of `brokers`."""
    return has_state & member(leader[:, None], brokers)[:, 0]


def offline(replicas: np.ndarray, isr: np.ndarray, live: Collection[int], unclean_allowed: np.ndarray,
            gone_replicas: np.ndarray | None = None, gone_isr: np.ndarray | None = None):
    """`election.offline` per row: the first live in-ISR replica, and the ISR's live members;
    failing that, where `unclean_allowed[i]`, the first live replica alone. Returns
    `(ok, leader, isr, unclean)`. `gone_replicas` / `gone_isr` (masks over `replicas` / `isr`)
    mark replicas on failed log dirs: not live for this row's election (`partitions.choose`)."""
    live_replica = member(replicas, live)
    live_member = member(isr, live)
    if gone_replicas is not None:
        live_replica &= ~gone_replicas
        live_member &= ~gone_isr
    ok_clean, clean_leader = first(live_replica & contained(replicas, isr), replicas)
    ok_any, any_leader = first(live_replica, replicas)
    unclean = ~ok_clean & ok_any & unclean_allowed
    ok = ok_clean | unclean
    leader = np.where(ok_clean, clean_leader, np.where(unclean, any_leader, PAD)).astype(np.int32)
    clean_isr = pack(isr, live_member)
    alone = np.full_like(clean_isr, PAD)
    if alone.shape[1]:
        alone[:, 0] = any_leader
    new_isr = np.where(ok_clean[:, None], clean_isr, np.where(unclean[:, None], alone, PAD)).astype(np.int32)
    return ok, leader, new_isr, unclean


def controlled_shutdown(replicas: np.ndarray, isr: np.ndarray, live_or_shutting_down: Collection[int],
                        shutting_down: Collection[int], gone: np.ndarray | None = None):
    """`election.controlled_shutdown` per row: the first in-ISR replica that is live and not
    shutting down; the shutting-down brokers leave the ISR. Returns `(ok, leader, isr)`.
    `gone` (a mask over `replicas`) marks replicas on failed log dirs: not eligible."""
    eligible = member(replicas, live_or_shutting_down) & contained(replicas, isr) & ~member(replicas, shutting_down)
    if gone is not None:
        eligible &= ~gone
    ok, leader = first(eligible, replicas)
    new_isr = pack(isr, (isr != PAD) & ~member(isr, shutting_down))
    return ok, leader, np.where(ok[:, None], new_isr, PAD).astype(np.int32)


def preferred(replicas: np.ndarray, isr: np.ndarray, live: Collection[int]):
    """`election.preferred` per row: the first assigned replica, if live and in the ISR; the ISR
    is unchanged. Returns `(ok, leader, isr)`."""
    head = replicas[:, :1]
    ok = (member(head, live) & contained(head, isr))[:, 0] if replicas.shape[1] else np.zeros(len(replicas), bool)
    leader = np.where(ok, head[:, 0] if replicas.shape[1] else PAD, PAD).astype(np.int32)
    return ok, leader, np.where(ok[:, None], isr, PAD).astype(np.int32)


def shrink(isr: np.ndarray, leader: np.ndarray, leader_epoch: np.ndarray, broker: int, idx: np.ndarray) -> np.ndarray:
    """`replicas.shrink_isr` of `broker` (a dead replica) for the rows `idx`, in place: it leaves
    the ISR unless it is the last member, a partition it led has no leader, and a change bumps
    the leader epoch once. Returns the rows that changed."""
    if not len(idx):
        return idx
    sub = isr[idx]
    shrunk = pack(sub, (sub != PAD) & (sub != broker))
    new_isr = np.where((row_count(sub != PAD) == 1)[:, None], sub, shrunk)
    old = leader[idx]
    new_leader = np.where(old == broker, NO_LEADER, old)
    changed = (new_leader != old) | row_any(new_isr != sub)
    hit = idx[changed]
    leader[hit] = new_leader[changed]
    isr[hit] = new_isr[changed]
    leader_epoch[hit] += 1
    return hit


def marked(matrix: np.ndarray, mask: np.ndarray) -> list[tuple[int, ...]]:
    """Per row, the values of `matrix` where `mask` is set, sorted (for the few rows a log line
    names them in)."""
    return [tuple(sorted(v for v, m in zip(values, marks) if m))
            for values, marks in zip(matrix.tolist(), mask.tolist())]


def row(matrix: np.ndarray, i: int) -> tuple[int, ...]:
    """Row i of a left-packed matrix as a tuple, without its padding."""
    return tuple(v for v in matrix[i].tolist() if v != PAD)
