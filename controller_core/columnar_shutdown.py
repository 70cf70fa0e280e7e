"""A controlled shutdown decided over the columns of the partition image, inside `step()`.

`shutdown.on_controlled_shutdown` (Kafka's doControlledShutdown) stays the specification. Once
the broker is marked shutting down, it walks every partition: the replicated ones the broker
leads go through the controlled-shutdown election (`partitions.to_online` with
CONTROLLED_SHUTDOWN), the ones it follows are stopped on it and its replica goes Offline, leaving
the ISR (`replicas.move`). This module makes the same decision for the common case:

- which partitions the broker leads or follows, the election of the led ones
  (`vector_election.controlled_shutdown`) and the ISR shrink of the followed ones
  (`vector_election.shrink`) are array operations over the partitions' rows;
- the request batch, the writes and the state-change log are filled in the order the scalar
  handlers fill them (led partitions sorted, then followed partitions sorted), from plain values
  taken from the columns, so the commands, and their digest, are the same;
- a refused election (only the shutting-down broker in the ISR: common, and the broker asks
  again until nothing is left) is logged with the walk's detail and leaves the partition as it
  is; where a replica outside the cached ISR might have saved it, the partition is marked for the
  issue-22 re-read exactly as `partitions.choose` marks it;
- a partition it leads that is Offline (left so by a refused election) is elected the same way,
  logged from Offline, and goes Online when a leader is found;
- the new state is written into the columns of the changed chunks.

Anything else returns False before touching the draft, and the caller walks the partitions: a
partition it leads in another state, a state written by a newer controller, a replica whose
state may not go Offline, an image holding partitions the columns cannot represent, a draft
that already holds requests or writes. tests/core/test_columnar_shutdown.py checks on random
clusters that `step()` gives the same state and commands with and without this path.

Called by `shutdown.on_controlled_shutdown` (the core's ControlledShutdownRequested handler);
its results are executed by the shell like any decision's (WritePartitionStates, then the parked
requests).
"""
from __future__ import annotations

from itertools import compress

import numpy as np

from . import vector_election as V
from .columns import P_CODE, PAD, R_CODE, R_OFFLINE_FROM, REPLICA_STATES, _cut
from .draft import DecisionParked, Draft
from .intents import WriteIntent
from .partition_batch import PartitionBatch, by_broker
from .machines import PartitionState, ReplicaState
from .partitions import CONTROLLED_SHUTDOWN, refusal

ENABLED = True
"""Tests (and the benchmark's "before" figures) switch this off to run the scalar path."""

_ONLINE, _OFFLINE = P_CODE[PartitionState.ONLINE], P_CODE[PartitionState.OFFLINE]
_R_OFFLINE = R_CODE[ReplicaState.OFFLINE]
_ELECT = ((WriteIntent.ELECT, CONTROLLED_SHUTDOWN),)


def on_controlled_shutdown(d: Draft, broker_id: int) -> bool:
    """Move leadership and the broker's follower replicas away (`broker_id` is already in the
    draft's shutting-down set) if it is the common case (see the module docstring); False, with
    the draft untouched, if not."""
    if not ENABLED or d.has_writes or d.requests.lai or d.requests.stop or d.log or d.requests.um_tps or d.requests.um_all:
        return False  # (the batch below is built as if it were the decision's first)
    image = d.partitions
    if image.odd or not image.count:
        return False
    epoch = d.epoch
    replicas = image.column("replicas")
    # the partitions doControlledShutdown looks at: replicated, with a leader-and-ISR, holding a
    # replica on the broker, of a topic not queued for deletion
    mine = (image.column("present") & image.column("has_state") & V.row_any(replicas == broker_id)
            & (V.row_count(replicas != PAD) > 1))
    rows = np.flatnonzero(mine)
    if not len(rows):
        return False
    tps = image.tps(rows)
    to_delete = d.topics_to_delete
    if to_delete:
        keep = [tp.topic not in to_delete for tp in tps]
        rows = rows[np.array(keep, bool)]
        tps = [tp for tp, k in zip(tps, keep) if k]
        if not tps:
            return False
    # the decision order: partitions sorted (shutdown.py sorts both lists)
    order = sorted(range(len(tps)), key=tps.__getitem__)
    rows = rows[np.array(order, np.intp)]
    tps = [tps[k] for k in order]

    leader = image.column("leader")[rows]
    if (image.column("controller_epoch")[rows] > epoch).any():
        return False  # refused one by one (an election, or the replica's move to Offline)
    is_led = leader == broker_id
    led = np.flatnonzero(is_led)
    fol = np.flatnonzero(~is_led)
    l_rows, f_rows = rows[led], rows[fol]
    l_pstate = image.column("pstate")[l_rows]
    was_offline = l_pstate == _OFFLINE  # (elected as the Online ones are, logged from Offline)
    if ((l_pstate != _ONLINE) & ~was_offline).any():
        return False  # a New partition is initialized, not elected
    rstate = image.column("rstate")[f_rows]
    at = replicas[f_rows] == broker_id  # one position per row (the image is not odd)
    codes = rstate[at]
    if not V.one_of(codes, R_OFFLINE_FROM).all():
        return False  # an illegal transition, logged as such by replicas.move
    isr = image.column("isr")
    everyone = d.live_or_shutting_down
    l_reps, f_reps = replicas[l_rows], replicas[f_rows]
    l_isr = isr[l_rows]
    # replicas on failed log dirs (rules 4): not eligible for their own partition's election, nor
    # told of it, nor a reason to re-read (partitions.choose); nearly always none
    gone = d.offline_dir_cells(image, replicas)[l_rows] if d.replicas_on_offline_dirs else None
    ok, new_leader, new_isr = V.controlled_shutdown(l_reps, l_isr, everyone, d.shutting_down, gone)
    l_tps = [tps[k] for k in led.tolist()]
    refused = np.flatnonzero(~ok)
    if len(refused) or was_offline.any():
        # the walk logs each refusal and leaves the partition as it is; one that a replica not in
        # the cached ISR might have saved is re-read first (issue 22: step() drops this draft)
        _log_elections(d, l_tps, ok, l_isr, was_offline, l_reps, gone)
        if d.config.rules >= 2:
            candidate = V.member(l_reps, everyone) & ~V.member(l_reps, d.shutting_down)
            if gone is not None:
                candidate &= ~gone
            unsure = V.live_outside_isr(l_reps, l_isr, candidate)
            confirmed = d.confirmed
            for k in refused[unsure[refused]].tolist():
                if l_tps[k] not in confirmed:
                    d.unconfirmed[l_tps[k]] = None
            if d.unconfirmed and not confirmed:
                # the decision will be dropped for the re-read, and a controlled shutdown is its
                # decision's last part: the writes and requests below would be built for nothing
                raise DecisionParked
        won = np.flatnonzero(ok)
        l_rows, l_reps, new_leader, new_isr = l_rows[won], l_reps[won], new_leader[won], new_isr[won]
        gone = None if gone is None else gone[won]
        l_tps = [l_tps[k] for k in won.tolist()]
        was_offline = was_offline[won]
    elif l_tps:
        d.record_many(PartitionState.ONLINE, PartitionState.ONLINE, l_tps)

    # -- the new columns: led partitions elect; the broker leaves the ISR of followed ones -------
    l_epoch = image.column("leader_epoch")[l_rows].astype(np.int64) + 1
    f_isr = isr[f_rows].copy()
    f_leader = leader[fol].copy()
    f_epoch = image.column("leader_epoch")[f_rows].astype(np.int64)
    holding = np.flatnonzero(V.row_any(f_isr == broker_id))
    hit = V.shrink(f_isr, f_leader, f_epoch, broker_id, holding)  # ascending: the followed order

    # -- the request batch, in the scalar order: the elections' LeaderAndIsr (live or shutting
    # down replicas), StopReplica of every followed partition, then the LeaderAndIsr of each
    # followed partition to its other replicas (dead ones too, as replicas._to_offline sends)
    f_tps = [tps[k] for k in fol.tolist()]
    told = V.member(l_reps, everyone)
    if gone is not None:
        told &= ~gone
    sent = np.concatenate((told, (f_reps != PAD) & ~at))
    both = l_tps + f_tps
    for b, rows in by_broker(np.concatenate((l_reps, f_reps)), sent):
        d.requests.lai[b] = PartitionBatch()  # (the draft's batch is empty: checked above)
        d.requests.lai[b].extend(list(map(both.__getitem__, rows.tolist())), distinct=True)  # (leads or follows, not both)
    if l_tps or f_tps:
        d.requests.um_everyone = True  # (a refused election sends nothing)
        d.requests.um_tps.extend(l_tps + f_tps, distinct=True)
    if f_tps:
        d.requests.stop[(broker_id, False)] = stopped = PartitionBatch()  # (empty before: checked above)
        stopped.extend(f_tps, distinct=True)
        distinct, first = np.unique(codes, return_index=True)
        for code in distinct[np.argsort(first)].tolist():  # in the order the walk meets them
            d.record_many(REPLICA_STATES[code], ReplicaState.OFFLINE, list(compress(f_tps, (codes == code).tolist())),
                          broker_id)

    # -- the writes: the elections, then the shrinks, each with the intent that produced it ------
    s_tps = [f_tps[k] for k in hit.tolist()]
    w_tps = l_tps + s_tps
    w_rows = np.concatenate((l_rows, f_rows[hit])).astype(np.intp)
    d.add_intents(dict.fromkeys(l_tps, _ELECT))
    d.intents.update(dict.fromkeys(s_tps, ((WriteIntent.SHRINK, broker_id),)))
    written_columns = d.write_rows(w_tps, w_rows, np.concatenate((new_leader, f_leader[hit])),
                                   np.concatenate((l_epoch, f_epoch[hit])),
                                   np.concatenate((new_isr, f_isr[hit])))

    # -- the new state, column by column, in the chunks that changed ----------------------------
    new_rstate = rstate.copy()
    new_rstate[at] = _R_OFFLINE
    revived = l_rows[was_offline]  # (Offline partitions elected: Online now)
    d.replace_image(image.with_columns((w_rows, written_columns), (f_rows, {"rstate": new_rstate}),
                                       (revived, {"pstate": np.full(len(revived), _ONLINE, np.int8)})))
    return True


def _log_elections(d: Draft, tps: list, ok: np.ndarray, isr: np.ndarray, was_offline: np.ndarray,
                   replicas: np.ndarray, gone: np.ndarray | None) -> None:
    """The state-change log of the elections when some were refused or some partitions were
    Offline: one group per outcome and prior state (a refusal's detail names the partition's
    ISR, and its replicas on failed log dirs), each partition in the walk's order, the groups in
    the order the walk first logs each."""
    online, offline = PartitionState.ONLINE, PartitionState.OFFLINE
    groups: dict[tuple, list] = {}
    details: dict[tuple, str] = {}
    on_failed = [()] * len(tps) if gone is None else V.marked(replicas, gone)
    for tp, won, members, was, failed in zip(tps, ok.tolist(), isr.tolist(), was_offline.tolist(), on_failed):
        if won:
            key = (offline if was else online, online, -1, True, "")
        else:
            cut = (tuple(members), failed)
            detail = details.get(cut)
            if detail is None:
                detail = details[cut] = refusal(CONTROLLED_SHUTDOWN, _cut(members), failed)
            key = (offline if was else online, online, -1, False, detail)
        group = groups.get(key)
        if group is None:
            groups[key] = [tp]
        else:
            group.append(tp)
    d.log.update(groups)
