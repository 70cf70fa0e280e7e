"""The controller's ZooKeeper watches, turned into level-triggered events.

Kafka's order on failover is "register watches, then read": here the watches' own first reads
*are* the snapshot. While the controller is being elected, every delivery updates a snapshot
builder; once every watch has delivered and the partition states have been read (pipelined),
the snapshot is handed over and, in the same turn of the event loop, deliveries start going to
the controller's queue. A change is therefore either in the snapshot or in an event after it,
never lost and never seen twice out of order.

Reads that a trigger needs (broker registrations, ISR change notifications) run in one serial
task per watch that coalesces triggers, so a slow read never lets an older listing overtake a
newer one.

Bad input (anything an admin or a stray tool may have written) never stops a watch: each
unreadable znode is logged once, as one ERROR line naming the path and what was wrong, and is
then ignored (registrations, configs, notifications that are not notifications) or deleted
after reading (ISR change notifications, as Kafka does). Admin requests are passed on with
their parse problem and the core decides what to do with them.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Callable

from controller_core import events as E
from controller_core.snapshot_states import SnapshotStates
from controller_core.values import LeaderIsr, TopicPartition

from adapters.znodes import codec as zkdata, paths as zkpaths
from adapters.runtime.gcpause import gc_paused
from adapters.zookeeper.session import Fenced, NoNode, ZkError
from adapters.zookeeper.watch import Serial

log = logging.getLogger("kctl.watches")

_BROKER_ID = re.compile(r"0|[1-9][0-9]{0,9}")
"""A broker registration's name: the id in canonical decimal. `int()` alone would also take
"-1", "007", " 7" or "1_0", and two names for one id, or a negative id (-1 means "no leader"
to the core), must never reach the controller."""

UNCLEAN_KEY = "unclean.leader.election.enable"

DECODE_OFF_LOOP = 2000
"""State znodes read at once from which they are parsed in a worker thread."""


def _parsed_states(tps, paths, values, missing: list | None, contents: list):
    """`(tp, k, version)` for each partition: its state znode's content is `contents[k]` (whose
    own version is the first reader's), or k is None if the znode is missing (the partition is
    also appended to `missing`) or unreadable (logged). Many partitions hold the very same bytes
    (one leader, ISR and epochs for every partition of a replica set after an election): each
    distinct content is parsed once, and appended to `contents` (100,000 states: 0.6 s of
    parsing in a new controller's path to its first decision)."""
    content_of: dict[bytes, int] = {}
    for tp, path in zip(tps, paths):
        value = values.get(path)
        if value is None:
            if missing is not None:
                missing.append(tp)
            yield tp, None, -1
            continue
        data, version = value[0], value[1].version
        if type(data) is not bytes:
            data = bytes(data)
        k = content_of.get(data)
        if k is None:
            try:
                li = zkdata.decode_partition_state(data, version, tp=tp)
            except zkdata.ZnodeFormatError as exc:  # (not kept: the error names its partition)
                log.error("unreadable state of %s: %s", tp, exc)
                yield tp, None, version
                continue
            k = content_of[data] = len(contents)
            contents.append(li)
        yield tp, k, version


def _decode_states(tps, paths, values, missing: list | None) -> tuple:
    """(tp, LeaderIsr or None) for each partition, in order (see `_parsed_states`)."""
    contents: list[LeaderIsr] = []
    out = []
    for tp, k, version in _parsed_states(tps, paths, values, missing, contents):
        li = None if k is None else contents[k]
        out.append((tp, li if li is None or li[4] == version else li.with_version(version)))
    return tuple(out)


def _decode_state_columns(tps, paths, values, missing: list | None) -> SnapshotStates:
    """`_decode_states` for a new controller's snapshot, as columns: the partitions that have a
    readable state, which distinct content each holds and its znode version; no `LeaderIsr` is
    made per partition (controller_core/snapshot_states.py, read by the columnar load)."""
    contents: list[LeaderIsr] = []
    kept, codes, versions = [], [], []
    for tp, k, version in _parsed_states(tps, paths, values, missing, contents):
        if k is not None:
            kept.append(tp)
            codes.append(k)
            versions.append(version)
    return SnapshotStates(tuple(kept), tuple(contents), codes, versions)


def broker_id_of(name: str) -> int | None:
    """The broker id a `/brokers/ids` child name stands for, or None if it is not one."""
    if not _BROKER_ID.fullmatch(name):
        return None
    value = int(name)
    return value if value <= zkdata.INT32_MAX else None


class ControllerWatches:
    """Every watch the active controller holds. `start()` arms them and produces the snapshot;
    `stop()` cancels everything (resignation)."""

    def __init__(self, zk, put_event: Callable, clock: Callable[[], int] = lambda: int(time.time() * 1000),
                 own_writes: dict | None = None, read_many: Callable | None = None,
                 epoch_zk_version: Callable[[], int] = lambda: -1):
        """`own_writes` (the ZooKeeper writer's): admin znodes this controller wrote, path ->
        (version, data) or (-1, None) for a deletion. A watch firing that reads back exactly
        that is the controller's own write echoed, not a request, and is not delivered: the
        core already knows it (and a late echo would read as a request again).

        `read_many(paths)` reads partition states in bulk (default `zk.get_many`; the
        benchmark's kafka-2.4 mode reads them as Kafka 2.4 does, adapters/controller/zkpattern.py)."""
        self.zk = zk
        self.read_many = read_many if read_many is not None else zk.get_many
        self.put_event = put_event
        self.clock = clock
        self.own_writes = own_writes if own_writes is not None else {}
        self.epoch_zk_version = epoch_zk_version  # the controller's fencing token (-1: unknown)
        self.live = False
        self.read_timing: dict[str, float] = {}  # the last failover read's parts, in seconds (start)
        self.watches: list = []
        self.serials: list[Serial] = []
        self.topic_watches: dict[str, list] = {}
        self.partition_watches: dict[TopicPartition, object] = {}
        self.rereads: set[asyncio.Task] = set()  # ReadPartitionStates in progress
        # the snapshot builder (also the watcher's view of ZooKeeper)
        self.brokers: tuple = ()
        self.broker_names: list[str] = []
        # a data watch per registration, so a broker that rewrites its registration in place
        # (new endpoint or rack, same session) is re-read, like Kafka's BrokerModifications;
        # the mzxid each was last read at tells a real change from the watch's first delivery
        self.broker_watches: dict[str, object] = {}
        self.broker_mzxid: dict[str, int] = {}
        self.topic_names: frozenset[str] = frozenset()
        self.topics: dict[str, object] = {}  # topic -> {p: ReplicaAssignment} | str (problem)
        self.topic_delivered: dict[str, asyncio.Future] = {}
        self.configs: dict[str, tuple] = {}
        self.deletions: frozenset[str] = frozenset()
        self.reassignment: E.ReassignmentRequested | None = None
        self.preferred: E.PreferredElectionRequested | None = None
        # bad znodes already logged, by path: the znode's mzxid when logged (a listing is re-read
        # on every change of any broker, and one bad registration must not log on each)
        self._reported: dict[str, int] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self, on_snapshot: Callable[[E.ClusterSnapshot], None]) -> None:
        """Register the watches, read the cluster, hand `on_snapshot` the snapshot; logs at INFO
        how long each part of the read took (a failover's time before its first decision), and
        keeps it in `read_timing`."""
        t0 = time.perf_counter()  # (the topics' and brokers' reads start with their watches)
        self.live = False
        # The paths' checks and the watches' first reads are all sent at once: one session's
        # requests are answered in order, so the callbacks run in the order they did when each
        # waited for the previous answer, and a new controller waits one round trip per group
        # instead of one per request (some fifteen sequential round trips on a loaded machine
        # were tens of ms of a failover).
        await asyncio.gather(*(self.zk.ensure_path(path) for path in (
            zkpaths.BROKERS_IDS, zkpaths.TOPICS, zkpaths.DELETE_TOPICS, zkpaths.ISR_CHANGE_NOTIFICATION,
            zkpaths.CONFIG_TOPICS)))
        brokers = Serial(self._read_brokers, "brokers")
        self._broker_serial = brokers
        isr = Serial(self._read_isr_notifications, "isr-changes")
        topic_starter = Serial(self._sync_topic_watches, "topics")
        self.serials += [brokers, isr, topic_starter]
        self._isr_serial = isr
        armed = await asyncio.gather(
            self.zk.watch_children(zkpaths.BROKERS_IDS, lambda names: self._on_broker_ids(names, brokers)),
            self.zk.watch_children(zkpaths.TOPICS, lambda names: self._on_topic_names(names, topic_starter)),
            self.zk.watch_children(zkpaths.DELETE_TOPICS, self._on_deletions),
            self.zk.watch_data(zkpaths.REASSIGN_PARTITIONS, self._on_reassignment),
            self.zk.watch_data(zkpaths.PREFERRED_REPLICA_ELECTION, self._on_preferred),
            self.zk.watch_children(zkpaths.ISR_CHANGE_NOTIFICATION, lambda names: self._on_isr(names, isr)),
            return_exceptions=True)
        self.watches += [w for w in armed if not isinstance(w, BaseException)]  # (`stop` cancels them)
        failed = next((w for w in armed if isinstance(w, BaseException)), None)
        if failed is not None:
            raise failed
        await brokers.first
        await isr.first
        timing = self.read_timing = {"brokers_s": time.perf_counter() - t0, "topics_s": 0.0, "states_s": 0.0}
        # The load allocates a few hundred thousand acyclic values for 10,000 partitions: enough
        # to set off a full collection (up to 123 ms measured in the failover benchmark) right
        # before the snapshot is handed over. The loop's own pause takes over from this one
        # when the snapshot is queued (adapters/controller/loop.py). Held at most until the reads finish
        # or the session expires (then the election is lost and this is cancelled).
        with gc_paused():
            for _ in range(10):  # until the topic listing is stable and every topic has delivered
                t1 = time.perf_counter()
                await topic_starter.first
                pending = [f for t, f in self.topic_delivered.items() if t in self.topic_names]
                await asyncio.gather(*pending)
                t2 = time.perf_counter()
                states = await self._read_states(columns=True)
                timing["topics_s"] += t2 - t1
                timing["states_s"] += time.perf_counter() - t2
                if not topic_starter.dirty and all(t in self.topics for t in self.topic_names):
                    break
            snapshot = self._snapshot(states)
            self.live = True
            on_snapshot(snapshot)  # same turn of the event loop: nothing can slip in between
        log.info("read the cluster in %.2f s: the watches and %d brokers (%.2f s), %d topics (%.2f s more), "
                 "%d partition states (%.2f s, read and parsed)", time.perf_counter() - t0, len(snapshot.brokers), timing["brokers_s"],
                 len(snapshot.topics), timing["topics_s"], len(snapshot.partition_states), timing["states_s"])

    def stop(self) -> None:
        self.live = False
        for w in self.watches:
            w.cancel()
        for ws in self.topic_watches.values():
            for w in ws:
                w.cancel()
        for w in self.broker_watches.values():
            if w is not None:
                w.cancel()
        self.broker_watches, self.broker_mzxid = {}, {}
        self.unwatch_all()
        for s in self.serials:
            s.cancel()
        self.watches, self.serials, self.topic_watches = [], [], {}
        # the serials run bound methods of this object: kept here, each is a reference cycle
        # that held the topics read (an assignment per partition) for the cyclic collector
        # once the node was dropped (issue 16)
        self._broker_serial = self._isr_serial = None
        for future in self.topic_delivered.values():
            if not future.done():
                future.cancel()
        self.topic_delivered = {}

    # -- reassignment ISR watches (commands from the core) ----------------------------------------

    def watch_partitions(self, tps) -> None:
        for tp in tps:
            if tp not in self.partition_watches:
                self.partition_watches[tp] = asyncio.create_task(self._watch_partition(tp))

    async def _watch_partition(self, tp: TopicPartition):
        def deliver(value) -> None:
            li = None
            if value is not None:
                try:
                    li = zkdata.decode_partition_state(value[0], value[1].version, tp=tp)
                except zkdata.ZnodeFormatError as exc:
                    log.error("unreadable state of %s: %s", tp, exc)
                    return
            if self.live:
                self.put_event(E.PartitionStatesObserved(at=self.clock(), states=((tp, li),), source="reassignment"))
        watch = await self.zk.watch_data(zkpaths.partition_state(tp.topic, tp.partition), deliver)
        if self.partition_watches.get(tp) is None:
            watch.cancel()
        else:
            self.partition_watches[tp] = watch

    def unwatch_partitions(self, tps) -> None:
        for tp in tps:
            w = self.partition_watches.pop(tp, None)
            if w is not None:
                w.cancel()

    def unwatch_all(self) -> None:
        self.unwatch_partitions(list(self.partition_watches))
        for task in list(self.rereads):
            task.cancel()

    # -- re-reads before a refused election (commands from the core) ------------------------------

    def read_partition_states(self, read_id: int, tps) -> None:
        """Execute `ReadPartitionStates`: read the states now, answer with
        `PartitionStatesRechecked`. The core waits for it, so a failed read is retried until
        it succeeds or the controller stops being one."""
        task = asyncio.create_task(self._reread(read_id, tuple(tps)), name=f"reread-{read_id}")
        self.rereads.add(task)
        task.add_done_callback(self.rereads.discard)

    async def _reread(self, read_id: int, tps: tuple) -> None:
        while self.live:
            try:
                states = await self._read_states(list(tps))
            except ZkError as exc:
                log.warning("re-reading %d partition state(s) failed (%s); retrying", len(tps), exc)
                await asyncio.sleep(0.2)
                continue
            if self.live:
                self.put_event(E.PartitionStatesRechecked(at=self.clock(), read_id=read_id, states=states))
            return

    # -- deliveries -----------------------------------------------------------------------------

    def _on_broker_ids(self, names, serial: Serial) -> None:
        self.broker_names = names or []
        serial.poke()

    def _report_once(self, path: str, mzxid: int, message: str, *args) -> None:
        """Log one ERROR for a bad znode, again only once it has been changed."""
        if self._reported.get(path) != mzxid:
            self._reported[path] = mzxid
            log.error(message, *args)

    def _forget_reports(self, parent: str, names) -> None:
        prefix = parent + "/"
        present = {prefix + n for n in names}
        for path in [p for p in self._reported if p.startswith(prefix) and p not in present]:
            del self._reported[path]

    async def _read_brokers(self) -> None:
        names = list(self.broker_names)
        self._forget_reports(zkpaths.BROKERS_IDS, names)
        paths = [zkpaths.BROKERS_IDS + "/" + n for n in names]
        values = await self.zk.get_many(paths)
        previous = {b.broker_id: b for b in self.brokers}
        listing = []
        for name, path in zip(names, paths):
            value = values.get(path)
            if value is None:
                continue  # gone since the listing: the next delivery says so
            broker_id = broker_id_of(name)
            if broker_id is None:
                self._report_once(path, value[1].mzxid,
                                  "ignoring %s/%r: not a broker registration (a broker id is a "
                                  "non-negative 32-bit decimal without leading zeros)", zkpaths.BROKERS_IDS, name)
                continue
            try:
                listing.append(zkdata.decode_broker(broker_id, value[0], value[1].czxid))
            except zkdata.ZnodeFormatError as exc:
                kept = previous.get(broker_id)
                if kept is not None and kept.epoch == value[1].czxid:
                    # rewritten in place into garbage: the broker is still alive (its session
                    # holds the znode), so keep what it registered rather than call it dead
                    self._report_once(path, value[1].mzxid, "unreadable broker registration %s: %s; keeping the "
                                      "registration read before", path, exc)
                    listing.append(kept)
                else:
                    self._report_once(path, value[1].mzxid, "ignoring unreadable broker registration %s: %s",
                                      path, exc)
        self.brokers = tuple(sorted(listing, key=lambda b: b.broker_id))
        if self.live:
            self.put_event(E.BrokersChanged(at=self.clock(), brokers=self.brokers))
        await self._sync_broker_watches(names, values)

    async def _sync_broker_watches(self, names: list[str], values: dict) -> None:
        for name in [n for n in self.broker_watches if n not in names]:
            watch = self.broker_watches.pop(name)
            self.broker_mzxid.pop(name, None)
            if watch is not None:
                watch.cancel()
        for name in names:
            value = values.get(zkpaths.BROKERS_IDS + "/" + name)
            if value is not None:
                self.broker_mzxid[name] = value[1].mzxid
        serial = self._broker_serial
        for name in [n for n in names if n not in self.broker_watches]:
            self.broker_watches[name] = None  # claimed: a concurrent run does not arm it twice

            def changed(value, name=name) -> None:
                if value is not None and value[1].mzxid != self.broker_mzxid.get(name):
                    serial.poke()  # deletion is the children watch's to report

            try:
                watch = await self.zk.watch_data(zkpaths.BROKERS_IDS + "/" + name, changed)
            except BaseException:
                self.broker_watches.pop(name, None)  # the retry arms it
                raise
            if name in self.broker_watches:
                self.broker_watches[name] = watch
            else:
                watch.cancel()  # gone while arming

    def _on_topic_names(self, names, serial: Serial) -> None:
        self.topic_names = frozenset(names or ())
        serial.poke()
        if self.live:
            self.put_event(E.TopicsChanged(at=self.clock(), topics=self.topic_names))

    async def _sync_topic_watches(self) -> None:
        for topic in sorted(set(self.topic_watches) - self.topic_names):
            for w in self.topic_watches.pop(topic):
                w.cancel()
            self.topics.pop(topic, None)
            self.configs.pop(topic, None)
            self.topic_delivered.pop(topic, None)
        new = sorted(self.topic_names - set(self.topic_watches))
        for topic in new:
            self.topic_watches[topic] = []
            self.topic_delivered[topic] = asyncio.get_running_loop().create_future()
        await asyncio.gather(*(self._watch_topic(t) for t in new))

    async def _watch_topic(self, topic: str) -> None:
        def on_assignment(value) -> None:
            if value is None:
                return  # deleted: the children watch reports it
            try:
                parts = zkdata.decode_topic_assignment(value[0], topic=topic)
                self.topics[topic] = parts
                if self.live:
                    self.put_event(E.TopicsChanged(at=self.clock(), topics=self.topic_names,
                                                   assignments=((topic, tuple(sorted(parts.items()))),)))
            except zkdata.ZnodeFormatError as exc:
                self.topics[topic] = str(exc)
                if self.live:
                    self.put_event(E.TopicsChanged(at=self.clock(), topics=self.topic_names, malformed=((topic, str(exc)),)))
            future = self.topic_delivered.get(topic)
            if future is not None and not future.done():
                future.set_result(None)

        def on_config(value) -> None:
            config: tuple = ()
            if value is not None:
                path = zkpaths.config_topic(topic)
                try:
                    overrides = zkdata.decode_topic_config(value[0])
                except zkdata.ZnodeFormatError as exc:
                    log.error("ignoring unreadable config %s of topic %s: %s", path, topic, exc)
                    return
                unclean = overrides.get(UNCLEAN_KEY)
                if unclean is not None and unclean.strip().lower() not in ("true", "false"):
                    # Kafka's LogConfig would refuse the whole config; the rest is still good
                    log.error("ignoring %s=%r in %s: expected true or false", UNCLEAN_KEY, unclean, path)
                    del overrides[UNCLEAN_KEY]
                config = tuple(sorted(overrides.items()))
            self.configs[topic] = config
            if self.live:
                self.put_event(E.TopicConfigsChanged(at=self.clock(), configs=((topic, config),)))

        watches = self.topic_watches.get(topic)
        if watches is None:
            return
        watches.append(await self.zk.watch_data(zkpaths.topic(topic), on_assignment))
        watches.append(await self.zk.watch_data(zkpaths.config_topic(topic), on_config))

    def _on_deletions(self, names) -> None:
        self.deletions = frozenset(names or ())
        if self.live:
            self.put_event(E.TopicDeletionsRequested(at=self.clock(), topics=self.deletions))

    def _on_reassignment(self, value) -> None:
        self.reassignment = self._admin_request(zkpaths.REASSIGN_PARTITIONS, value, E.ReassignmentRequested,
                                                _decode_reassignment_request)

    def _on_preferred(self, value) -> None:
        self.preferred = self._admin_request(zkpaths.PREFERRED_REPLICA_ELECTION, value, E.PreferredElectionRequested,
                                             zkdata.decode_preferred_replica_election)

    def _admin_request(self, path: str, value, event_type, decode):
        """An admin znode's content as its event (absent, parsed, or with the parse problem),
        with the znode version it was read at."""
        if value is None:
            event = event_type(at=self.clock(), exists=False)
        else:
            version = value[1].version
            try:
                event = event_type(at=self.clock(), exists=True, partitions=decode(value[0]), zk_version=version)
            except zkdata.ZnodeFormatError as exc:
                event = event_type(at=self.clock(), exists=True, problem=str(exc), zk_version=version)
        mine = self.own_writes.get(path)
        echo = mine is not None and (mine == (-1, None) if value is None else mine == (value[1].version, value[0]))
        if self.live and not echo:
            self.put_event(event)
        return event

    def _on_isr(self, names, serial: Serial) -> None:
        names = names or []
        self._forget_reports(zkpaths.ISR_CHANGE_NOTIFICATION, names)
        for n in names:
            if not n.startswith(zkpaths.ISR_CHANGE_PREFIX):
                self._report_once(f"{zkpaths.ISR_CHANGE_NOTIFICATION}/{n}", -1,
                                  "ignoring %s/%s: not an ISR change notification (%s<sequence>); "
                                  "leaving it in place", zkpaths.ISR_CHANGE_NOTIFICATION, n, zkpaths.ISR_CHANGE_PREFIX)
        self.isr_names = [n for n in names if n.startswith(zkpaths.ISR_CHANGE_PREFIX)]
        serial.poke()

    async def _read_isr_notifications(self) -> None:
        """Read the notifications, then the states they name, then delete them (Kafka's order:
        a notification is deleted only after the states it points at were read)."""
        names = list(getattr(self, "isr_names", []))
        if not names:
            return
        paths = [zkpaths.ISR_CHANGE_NOTIFICATION + "/" + n for n in names]
        tps: dict[TopicPartition, None] = {}
        if self.live:
            values = await self.zk.get_many(paths)
            for path in paths:
                value = values.get(path)
                if value is None:
                    continue
                try:
                    named = zkdata.decode_isr_change_notification(value[0])
                except zkdata.ZnodeFormatError as exc:
                    log.error("ignoring unreadable ISR change notification %s: %s", path, exc)
                    continue
                bad = [tp for tp in named if not _addressable(tp)]
                if bad:
                    log.error("ignoring %d entr%s of ISR change notification %s that name no possible partition: %s",
                              len(bad), "y" if len(bad) == 1 else "ies", path, ", ".join(map(repr, bad[:5])))
                tps.update(dict.fromkeys(tp for tp in named if _addressable(tp)))
        missing: list[TopicPartition] = []
        states = await self._read_states(list(tps), missing) if tps else ()
        if missing:
            # can be a race with a deletion, so not an error
            log.warning("ISR change notifications name %d partition(s) without a state znode, ignored: %s",
                        len(missing), ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else ""))
        for path in paths:
            await delete_consumed(self.zk, path, self.epoch_zk_version())
        if states and self.live:
            self.put_event(E.PartitionStatesObserved(at=self.clock(), states=states, source="isr_change"))

    async def _read_states(self, tps=None, missing: list | None = None, columns: bool = False):
        """(tp, LeaderIsr or None) for `tps` (default: every partition of the known topics);
        partitions without a state znode are also appended to `missing`. `columns`: the
        readable states as a new controller's snapshot holds them (`_decode_state_columns`)."""
        if tps is None:
            tps = [TopicPartition(t, p) for t, parts in sorted(self.topics.items()) if isinstance(parts, dict)
                   for p in sorted(parts)]
        paths = [zkpaths.partition_state(tp.topic, tp.partition) for tp in tps]
        values = await self.read_many(paths)
        decode = _decode_state_columns if columns else _decode_states
        if len(paths) >= DECODE_OFF_LOOP:
            # 100,000 state znodes take seconds to parse: in a worker thread, so that the loop
            # keeps the session's heartbeats going meanwhile (the watches wait for the result)
            return await asyncio.to_thread(decode, tps, paths, values, missing)
        return decode(tps, paths, values, missing)

    def _snapshot(self, states) -> E.ClusterSnapshot:
        topics, malformed = [], []
        for topic in sorted(self.topic_names):
            parts = self.topics.get(topic)
            if isinstance(parts, dict):
                topics.append((topic, tuple(sorted(parts.items()))))
            elif isinstance(parts, str):
                malformed.append((topic, parts))
        return E.ClusterSnapshot(
            brokers=self.brokers,
            topics=tuple(topics),
            malformed_topics=tuple(malformed),
            topic_configs=tuple((t, c) for t, c in sorted(self.configs.items()) if t in self.topic_names and c),
            partition_states=states if type(states) is SnapshotStates else tuple((tp, li) for tp, li in states if li is not None),
            topics_to_delete=self.deletions,
            reassignment=self.reassignment,
            preferred_election=self.preferred,
        )


async def delete_consumed(zk, path: str, epoch_zk_version: int) -> None:
    """Delete a notification the controller has read: epoch-checked as Kafka does once the
    controller knows its epoch's version; a missing znode is fine (someone was first)."""
    try:
        if epoch_zk_version >= 0:
            await zk.delete_as_controller(path, epoch_zk_version)
        else:
            await zk.delete(path)
    except NoNode:
        pass
    except Fenced:
        log.warning("not deleting %s: /controller_epoch moved, another controller is in charge", path)


def _addressable(tp: TopicPartition) -> bool:
    """Whether a partition named in admin data can have a state znode at all."""
    try:
        zkpaths.partition_state(tp.topic, tp.partition)
    except ValueError:
        return False
    return True


def _decode_reassignment_request(data: bytes):
    """A reassignment request that names no partition would never finish, so it would never be
    deleted and every later `kctl reassign-partitions --execute` would find "an existing
    assignment running" (Kafka 2.4 leaves it in place): it is malformed, and removed."""
    plan = zkdata.decode_reassignment(data)
    if not plan:
        raise zkdata.ZnodeFormatError("reassignment request", "partitions is empty: there is nothing to reassign")
    return plan
