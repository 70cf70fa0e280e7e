"""The broker requests of one decision, from the moment a handler asks for them to the commands
that send them: Kafka's ControllerBrokerRequestBatch and its sendRequestsToBrokers.

- `RequestBatch` gathers them while a decision is made. Each `Draft` holds one
  (`draft.requests`); the handlers fill it (`send_leader_and_isr`, `send_update_metadata_to_all`,
  `send_stop_replica`, the controlled-shutdown and election replies) and `Draft.finish` closes it.
- `Outbox` is the closed batch of a decision that writes partition states: its requests wait in
  `ControllerState.pending` until the write's outcome (`PartitionStatesWritten`, outcomes.py)
  releases them, so that brokers hear of a leader only once ZooKeeper holds it. A decision that
  writes nothing closes its batch as a `_Release`, sent in the same step.
- `emit_outbox` turns a released batch into `SendLeaderAndIsr`, `SendUpdateMetadata`,
  `SendStopReplica` and reply commands, reading every partition from the state as it is at
  release (so the requests carry the znode versions just written): from the image's columns for
  large releases, as `PartitionView` values for small ones.

Who executes the commands: the controller shell's senders (adapters/controller/senders.py), one
queue per broker. Nothing here does I/O.
"""
from __future__ import annotations

from itertools import chain
from typing import Iterable, Mapping, NamedTuple

import attrs
import numpy as np

from . import commands as C
from .columns import PAD
from .partition_batch import PartitionBatch
from .partition_views import ImageRows
from .pmap import NO_ENTRIES, FrozenDict, PMap
from .state import ControllerState, PartitionInfo
from .values import LEADER_DURING_DELETE, PartitionView, TopicPartition

ALL = None
"""UpdateMetadata for every partition with a leader (Kafka's "empty set means all")."""

_ABSENT = object()
_new = tuple.__new__  # builds the NamedTuple values of the hot path without a Python-level call


@attrs.frozen(slots=True)
class Outbox:
    """Broker requests and replies of a decision, waiting for its partition-state writes.

    - `leader_and_isr`: (broker, (tp, ...), {tp sent with is_new}).
    - `um_brokers` / `um_partitions`: UpdateMetadata recipients and partitions (None = all).
    - `stop_replica`: (broker, delete, (tp, ...)).
    - `intents`: (tp, (intent, ...)) to re-decide a partition whose write conflicted; an
      intent is (INIT,), (ELECT, strategy), (SHRINK, replica) or (BUMP,) (`intents.WriteIntent`).
    - `broker_epochs`: the registration epoch of each broker when the decision was made; a
      request to a broker that has since restarted (or left) is dropped, because it was meant
      for the previous incarnation (Kafka drops a broker's queue when it leaves).
    - `released`: partitions whose LeaderAndIsr and UpdateMetadata already went out with a
      progress report of the write (`PartitionStatesWritten(final=False)`).
    """

    leader_and_isr: tuple[tuple[int, tuple[TopicPartition, ...], frozenset[TopicPartition]], ...] = ()
    um_brokers: frozenset[int] = frozenset()
    um_partitions: tuple[TopicPartition, ...] | None = ()
    stop_replica: tuple[tuple[int, bool, tuple[TopicPartition, ...]], ...] = ()
    shutdown_replies: tuple[tuple[int, int], ...] = ()
    election_replies: tuple[tuple[int, tuple[tuple[TopicPartition, str | None], ...]], ...] = ()
    intents: FrozenDict = NO_ENTRIES  # {TopicPartition: (intent, ...)}: built whole, only read
    cause: str = ""
    broker_epochs: tuple[tuple[int, int], ...] = ()
    released: frozenset[TopicPartition] = frozenset()


class _Release(NamedTuple):
    """The requests of a decision that writes nothing, with the fields of `Outbox` that
    `emit_outbox` reads: they go out in the decision's own step and are never stored, so a
    plain tuple does (an ISR change releases one of these; building the attrs value cost more
    than the rest of its `_outbox`)."""

    leader_and_isr: tuple
    um_brokers: frozenset
    um_partitions: tuple | None
    stop_replica: tuple
    shutdown_replies: tuple
    election_replies: tuple
    broker_epochs: tuple


class RequestBatch:
    """The requests and replies one decision has asked for so far (see the module docstring).

    - `lai`: broker -> the partitions of its LeaderAndIsr (with their `is_new` flags);
    - `um_brokers`, `um_everyone`: UpdateMetadata recipients, or every live-or-shutting-down
      broker as they are when the decision is finished;
    - `um_all`, `um_tps`: the UpdateMetadata's partitions (`um_all`: every partition);
    - `stop`: (broker, delete) -> the partitions of its StopReplica;
    - `shutdown_replies`, `election_replies`: answers to requests, sent with the rest.
    """

    __slots__ = ("lai", "um_brokers", "um_everyone", "um_all", "um_tps", "stop", "shutdown_replies",
                 "election_replies")

    def __init__(self):
        self.lai: dict[int, PartitionBatch] = {}  # (a batch filled whole may know its rows)
        self.um_brokers: set[int] = set()
        self.um_everyone = False
        self.um_all = False
        self.um_tps = PartitionBatch()
        self.stop: dict[tuple[int, bool], PartitionBatch] = {}
        self.shutdown_replies: list[tuple[int, int]] = []
        self.election_replies: list = []

    def send_leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False) -> None:
        """LeaderAndIsr for `tp` to `brokers`, plus UpdateMetadata of `tp` to every broker,
        as Kafka's addLeaderAndIsrRequestForBrokers does."""
        lai = self.lai
        for b in brokers:
            per = lai.get(b)
            if per is None:
                per = lai[b] = PartitionBatch()
            per.add(tp, is_new)
        self.um_everyone = True
        if not self.um_all:
            self.um_tps.add(tp)

    def add_leader_and_isr(self, per_broker: Mapping[int, list], distinct: bool = False) -> None:
        """LeaderAndIsr (not new) of many partitions per broker, in each list's order: the batch
        `send_leader_and_isr` would build, broker by broker, for the whole-cluster decisions
        over the columns (`distinct`: no list names a partition twice, see
        `PartitionBatch.extend`). Their UpdateMetadata is the caller's (`um_tps`, in its own
        order)."""
        lai = self.lai
        for b, tps in per_broker.items():
            per = lai.get(b)
            if per is None:
                per = lai[b] = PartitionBatch()
            per.extend(tps, distinct)

    def send_update_metadata(self, brokers: Iterable[int], tps: Iterable[TopicPartition] | None) -> None:
        """UpdateMetadata of `tps` (ALL: every partition with a leader) to `brokers`."""
        self.um_brokers.update(brokers)
        self._um_partitions(tps)

    def send_update_metadata_to_all(self, tps: Iterable[TopicPartition] | None) -> None:
        """UpdateMetadata of `tps` to every live-or-shutting-down broker (as they are when the
        decision is finished)."""
        self.um_everyone = True
        self._um_partitions(tps)

    def _um_partitions(self, tps) -> None:
        if tps is ALL:
            self.um_all = True
        elif not self.um_all:
            self.um_tps.extend(tps)

    def send_stop_replica(self, broker: int, tp: TopicPartition, delete: bool) -> None:
        key = (broker, delete)
        tps = self.stop.get(key)
        if tps is None:
            tps = self.stop[key] = PartitionBatch()
        tps.add(tp)

    def close(self, brokers, parked: bool, intents: dict, cause: str) -> "Outbox | _Release | None":
        """The batch as the decision leaves it (None: nothing to send and no writes). `parked`
        (the decision writes partition states): an `Outbox` waiting for the writes (`intents`
        for retries, even with no request; `brokers`, the brokers as the decision saw them, so
        that a request to a broker that restarts meanwhile is dropped). Otherwise the requests
        go out in this very step, so they are only read by `emit_outbox` now, as a `_Release`:
        no retry intents, and no broker epochs, whose filter could drop nothing (they would be
        read from these same brokers)."""
        if self.um_everyone:
            self.um_brokers.update(brokers.keys())
        if not (self.lai or self.um_brokers or self.stop or self.shutdown_replies or self.election_replies
                or parked):
            return None  # (a decision with writes always parks an outbox: its intents, for retries)
        lai = self.lai
        if not parked:
            return _new(_Release, (
                tuple((b, per.tps(), per.new()) for b, per in lai.items()) if lai else (),
                frozenset(self.um_brokers), ALL if self.um_all else self.um_tps.tps(),
                tuple((b, d, tps.tps()) for (b, d), tps in self.stop.items()) if self.stop else (),
                tuple(self.shutdown_replies), tuple(self.election_replies), ()))
        return Outbox(
            leader_and_isr=tuple(
                (b, per.tps(), per.new()) for b, per in lai.items()) if lai else (),
            um_brokers=frozenset(self.um_brokers),
            um_partitions=ALL if self.um_all else self.um_tps.tps(),
            stop_replica=tuple((b, d, tps.tps()) for (b, d), tps in self.stop.items()) if self.stop else (),
            shutdown_replies=tuple(self.shutdown_replies),
            election_replies=tuple(self.election_replies),
            intents=FrozenDict(intents),
            cause=cause,
            broker_epochs=tuple((b, info.epoch) for b, info in sorted(brokers.items())),
        )

    def noted_rows(self, outbox: "Outbox | _Release") -> list[tuple[tuple, np.ndarray]]:
        """`(partitions of a request, their rows)` for the batches a whole-cluster decision
        filled whole with their rows (`PartitionBatch.rows`): gathered without a lookup."""
        out = []
        for (b, tps, _), per in zip(outbox.leader_and_isr, self.lai.values()):
            rows = per.rows()
            if rows is not None:
                out.append((tps, rows))
        rows = self.um_tps.rows()
        if rows is not None and outbox.um_partitions is not ALL:
            out.append((outbox.um_partitions, rows))
        return out


# -- releasing a batch ------------------------------------------------------------------------


def partition_view(state: ControllerState, tp: TopicPartition, info: PartitionInfo, for_metadata: bool = False) -> PartitionView:
    """The partition as sent to brokers. In UpdateMetadata (only there, as in Kafka) a topic
    queued for deletion shows leader -2 (LeaderDuringDelete) so brokers stop serving it."""
    li = info.leader_isr
    a = info.assignment
    leader = LEADER_DURING_DELETE if for_metadata and tp.topic in state.topics_to_delete else li.leader
    return _new(PartitionView, (tp, leader, li.leader_epoch, li.isr, li.controller_epoch, li.zk_version, a.replicas,
                                a.adding, a.removing, False))


def emit_outbox(state: ControllerState, outbox: Outbox, skip: frozenset[TopicPartition] = frozenset(),
                only: frozenset[TopicPartition] | None = None, known: dict | None = None,
                hints: dict | None = None) -> list:
    """Turn a released outbox into broker requests, built from the current state (so they carry
    the znode versions just written). Requests to brokers that are gone are dropped, and
    partitions in `skip` (their write conflicted and is being re-decided, or they went out
    earlier) are left out. With `only` (a write's progress), just the LeaderAndIsr and
    UpdateMetadata of those partitions go out; the rest waits for the final outcome."""
    commands: list = []
    parts = state.partitions
    brokers = all_brokers = state.brokers
    if outbox.broker_epochs:
        decided = dict(outbox.broker_epochs)
        brokers = {b: info for b, info in brokers.items() if decided.get(b) == info.epoch}
    epoch = state.epoch
    live_brokers = _live_brokers(all_brokers)
    shutting_down = tuple(sorted(state.shutting_down)) if state.shutting_down else ()
    if parts.odd or _few(outbox):
        _requests_from_views(commands, state, outbox, brokers, live_brokers, shutting_down, skip, only, known)
    else:
        _requests_from_columns(commands, state, outbox, brokers, live_brokers, shutting_down, skip, only, hints)

    if only is not None:
        return commands
    for b, delete, tps in outbox.stop_replica:
        broker = brokers.get(b)
        if broker is not None and tps:
            commands.append(C.SendStopReplica(
                broker_id=b, broker_epoch=broker.epoch, controller_epoch=epoch, delete=delete, partitions=tps))

    for request_id, broker_id in outbox.shutdown_replies:
        commands.append(C.ReplyControlledShutdown(
            request_id=request_id, broker_id=broker_id, error=None,
            partitions_remaining=partitions_led_by(state, broker_id)))

    for request_id, results in outbox.election_replies:
        commands.append(C.ReplyLeaderElection(request_id=request_id, results=results))
    return commands


_LIVE: dict[int, tuple] = {}
_LIVE_CAP = 64


def _live_brokers(brokers) -> tuple:
    """The brokers' `BrokerInfo` values in id order (every request's live-broker list), made
    once per brokers map: the map changes only when a broker comes or goes, and a decision
    sending one partition to every broker spent a fair share of its release sorting them again.
    Keyed by the map's identity and holding the map, so the id cannot be reused while the
    entry lives; the map is immutable, so its list never changes. (Entries are only added or
    dropped whole: threads may share the cache, a race costs a recomputation.)"""
    hit = _LIVE.get(id(brokers))
    if hit is not None and hit[0] is brokers:
        return hit[1]
    values = tuple(map(brokers.__getitem__, sorted(brokers.keys())))
    if brokers.__class__ is not PMap:
        return values  # (a plain mapping, as some tests build states: it could change)
    if len(_LIVE) >= _LIVE_CAP:
        _LIVE.clear()
    _LIVE[id(brokers)] = (brokers, values)
    return values


COLUMNS_MIN = 256
"""A release sending fewer partitions than this builds `PartitionView`s (an ISR change sends one
partition to every broker: gathering it from the columns would cost more than the value)."""


def _few(outbox: Outbox) -> bool:
    um = outbox.um_partitions
    if um is ALL:
        return False
    lai = outbox.leader_and_isr
    return len(um) + (sum(len(tps) for _, tps, _ in lai) if lai else 0) < COLUMNS_MIN


def _requests_from_columns(commands: list, state: ControllerState, outbox: Outbox, brokers, live_brokers,
                           shutting_down, skip, only, hints: dict | None = None) -> None:
    """LeaderAndIsr and UpdateMetadata of a release, each request's partitions gathered from the
    image's columns (partition_views.py): no value is built per partition here."""
    parts = state.partitions
    epoch = state.epoch
    rows = ImageRows(parts, hints)
    among = None
    if skip or only is not None:
        # the rows to send, as a mask: a large write's progress sends a quarter of each request,
        # and testing each partition for membership cost more than the rest of the release
        among = rows.mask_of(only) if only is not None else np.ones(parts.size, bool)
        if skip:
            among &= ~rows.mask_of(skip)

    for b, tps, new_tps in outbox.leader_and_isr:
        broker = brokers.get(b)
        if broker is None:
            continue
        views = rows.views(tps, is_new=new_tps, among=among)
        if views:
            commands.append(C.SendLeaderAndIsr(
                broker_id=b, broker_epoch=broker.epoch, controller_epoch=epoch,
                partitions=views, live_leaders=live_brokers))

    if outbox.um_brokers and not (only is not None and outbox.um_partitions is ALL):
        # sorted: replayable
        um_tps = rows.every_partition() if outbox.um_partitions is ALL else outbox.um_partitions
        views = rows.views(um_tps, deleting=state.topics_to_delete, for_metadata=True, among=among)
        for b in (sorted(outbox.um_brokers) if views or only is None else ()):
            broker = brokers.get(b)
            if broker is not None:
                commands.append(C.SendUpdateMetadata(
                    broker_id=b, broker_epoch=broker.epoch, controller_epoch=epoch,
                    partitions=views, live_brokers=live_brokers, shutting_down=shutting_down))


def _requests_from_views(commands: list, state: ControllerState, outbox: Outbox, brokers, live_brokers,
                         shutting_down, skip, only, known) -> None:
    """The same requests from `PartitionView` values: for an image holding partitions its
    columns cannot represent (`PartitionImage.odd`), and for small releases."""
    parts = state.partitions
    epoch = state.epoch
    deleting = state.topics_to_delete
    # the partitions this release sends, built from the image a chunk at a time
    lai = outbox.leader_and_isr
    wanted = dict.fromkeys(chain.from_iterable(tps for b, tps, _ in lai if b in brokers)) if lai else {}
    um_tps: Iterable[TopicPartition] = ()
    send_um = outbox.um_brokers and not (only is not None and outbox.um_partitions is ALL)
    if send_um:
        um_tps = sorted(parts.keys()) if outbox.um_partitions is ALL else outbox.um_partitions  # sorted: replayable
        wanted.update(dict.fromkeys(um_tps))
    # each as sent in LeaderAndIsr (None: absent or without a leader); partitions the decision
    # has already built from this very state's image are not read again
    views: dict = {}
    missing = wanted
    if known:
        missing = []
        for tp in wanted:
            info = known.get(tp, _ABSENT)
            if info is _ABSENT:
                missing.append(tp)
            else:
                views[tp] = None if info is None or info.leader_isr is None else partition_view(state, tp, info)
    if missing:
        views.update(parts.views_many(missing))

    filtering = bool(skip) or only is not None
    for b, tps, new_tps in lai:
        broker = brokers.get(b)
        if broker is None:
            continue
        items = []
        for tp in tps:
            if filtering and (tp in skip or (only is not None and tp not in only)):
                continue
            v = views[tp]
            if v is None:
                continue
            items.append(v._replace(is_new=True) if tp in new_tps else v)
        if items:
            commands.append(C.SendLeaderAndIsr(
                broker_id=b, broker_epoch=broker.epoch, controller_epoch=epoch,
                partitions=tuple(items), live_leaders=live_brokers))

    if send_um:
        um = []
        for tp in um_tps:
            if filtering and (tp in skip or (only is not None and tp not in only)):
                continue
            v = views[tp]
            if v is not None:
                # in UpdateMetadata, as partition_view(..., for_metadata=True)
                um.append(v._replace(leader=LEADER_DURING_DELETE) if tp.topic in deleting else v)
        um_tuple = tuple(um)
        if um_tuple or only is None:
            for b in sorted(outbox.um_brokers):
                broker = brokers.get(b)
                if broker is not None:
                    commands.append(C.SendUpdateMetadata(
                        broker_id=b, broker_epoch=broker.epoch, controller_epoch=epoch,
                        partitions=um_tuple, live_brokers=live_brokers, shutting_down=shutting_down))


def partitions_led_by(state: ControllerState, broker_id: int) -> tuple[TopicPartition, ...]:
    """Kafka's replicatedPartitionsBrokerLeads: replicated partitions of topics not being
    deleted whose leader is `broker_id` (what a controlled shutdown still waits for)."""
    image = state.partitions
    if image.odd:
        led = [tp for tp, info in image.items() if (li := info.leader_isr) is not None and li.leader == broker_id
               and len(info.assignment.replicas) > 1 and tp.topic not in state.topics_to_delete]
    else:
        rows = np.flatnonzero(image.column("present") & image.column("has_state")
                              & (image.column("leader") == broker_id)
                              & ((image.column("replicas") != PAD).sum(axis=1) > 1))
        to_delete = state.topics_to_delete
        led = [tp for tp in image.tps(rows) if tp.topic not in to_delete]
    led.sort()
    return tuple(led)
