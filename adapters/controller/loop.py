"""The controller event loop: one FIFO queue, one task (Kafka 0.11's ControllerEventManager).

Every input of `step()` arrives here as an event: ZooKeeper watches, broker responses, write
outcomes, timers, elections. The loop takes one event at a time, appends it to the journal and
makes it durable (write-ahead), runs the pure `step()`, and hands the commands to the executor,
which starts their I/O without waiting for it: outcomes come back through the same queue.
Write-ahead constrains what is *done*, not what is computed: the first event of a batch is
decided while the batch's fsync runs (on the journal's thread), and its decision is adopted and
executed only once the record is durable. A whole-cluster decision (tens to hundreds of ms)
then hides the fsync instead of waiting behind it.
Each event's commands are also summarised in an "effects" record (a digest, linked to the event
by `event_seq`) so that the replay can check it recomputes the same decisions. Hashing the
commands of a 10,000-partition failover takes longer than deciding it, so effects are computed
once the controller is quiet (nothing queued, no write in flight, every broker request
acknowledged) and may land in the journal a few records after their event.

Nothing else changes controller state, so the state needs no lock. (One lock orders the
deferred effects records against segment rolls; see `_effects_lock`.)

On a large cluster the cyclic garbage collector is paused from the first event of a burst
until the controller is quiet again: a full collection walking the state cost 130-160 ms
inside a 10,000-partition failover (`_start_gc_burst`).

The ZooKeeper session's heartbeats run on this same asyncio loop, so the loop must never stop
for a large fraction of the session timeout: a controller that decides a 100,000-partition
failover in one synchronous call misses its heartbeats, loses its session, resigns, and its
successor does the same. So on a large cluster `step()`, the encoding of a large event for
the journal and the effects digests run in a worker thread (`asyncio.to_thread`): the state is
an immutable value, so nothing is shared but the result, and Python's GIL switching (every
5 ms) keeps the loop answering ZooKeeper meanwhile. The next event still waits for the
decision: the queue stays FIFO, one event at a time.

When the journal cannot be written (a full disk, a file size limit, an I/O error), the events
of the batch that could not be made durable are not acted on: the write-ahead rule. The loop
logs one ERROR line, resigns (a `ControllerResigned` run through `step()` without a journal
record: the core only forgets its state and answers waiting requests "not controller", no
decision is taken), and tells the node (`on_journal_failure`), which gives up `/controller` and
stops competing. Until `reopen_journal()` succeeds, requests that arrive are answered "not
controller" the same way and every other event is dropped. The broker side of the node is not
affected. A replay sees the journal end at its last durable record; the next term starts a new
segment with a snapshot head.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Protocol

from controller_core import codec
from controller_core import events as E
from controller_core.state import ControllerConfig, ControllerState, initial_state
from controller_core.step import step

from adapters.runtime import gcpause, heap
from adapters.journal.writer import JournalError, JournalWriteError, probe_writable
from adapters.journal.canonical import canonical

log = logging.getLogger("kctl.controller")

_effects_digest = codec.digester(canonical).digest
"""`codec.digest` of a decision's commands for its "effects" record, with orjson as the JSON
writer (the same text; about three times faster on a 10,000-partition release)."""

OFFLOAD_PARTITIONS = 2000
"""From this many partitions on, decisions and large encodings run in a worker thread (see the
module docstring). Below it a thread hand-off costs more than the work."""


GC_BURST_PARTITIONS = 1000
"""From this many partitions on, the cyclic garbage collector is paused while the controller
works through a burst of events (see `_start_gc_burst`)."""

GC_BURST_MAX_S = 30.0
"""A burst ends at the latest this long after it began, quiet or not: the process's other
cyclic garbage (the host service's, in an embedding) is never left uncollected for longer.
Longer than the longest failover measured (100,000 partitions, about 9 s): with a 5 s cap the
collector came back in the middle of it, and the benchmark's median was 9.6 s with 1.8 s of
queue time, against 8.6 s and 0.85 s with this cap."""


def _loaded_partitions(event) -> int:
    """How many partitions a failover's snapshot brings (0 for any other event): the state is
    empty until the snapshot is decided, so its size says nothing about the work yet."""
    return len(event.snapshot.partition_states) if event.__class__ is E.ControllerElected else 0


def _whole_cluster(event) -> bool:
    """A failover's snapshot of a large cluster: worth a worker thread to encode and decide."""
    return _loaded_partitions(event) >= OFFLOAD_PARTITIONS


class Executor(Protocol):
    """Carries out commands (adapters/controller/executor.py); must not block: it starts I/O and returns."""

    def execute(self, commands: tuple, state: ControllerState) -> None: ...


class EventStats:
    """Kafka's EventQueueSize / EventQueueTimeMs and the time spent in each phase, over a
    sliding window of recent events."""

    def __init__(self, window: int = 1024):
        self.recent = collections.deque(maxlen=window)
        self.processed = 0
        self.by_type: collections.Counter = collections.Counter()

    def add(self, name: str, queue_ms: float, journal_ms: float, step_ms: float, execute_ms: float) -> None:
        self.recent.append((name, queue_ms, journal_ms, step_ms, execute_ms))
        self.processed += 1
        self.by_type[name] += 1


class ControllerLoop:
    """Owns the controller state; `put()` is the only way in.

    `journal` is an `adapters.journal.writer.Journal` (or None for tests that do not need one);
    `clock` returns ms since the epoch and stamps nothing but the journal's records (events
    carry their own `at`)."""

    def __init__(self, config: ControllerConfig, executor: Executor | None = None, journal=None,
                 clock=lambda: int(time.time() * 1000)):
        self.state: ControllerState = initial_state(config)
        self.executor = executor
        self.journal = journal
        self.clock = clock
        self.queue: asyncio.Queue = asyncio.Queue()
        self.stats = EventStats()
        self.last_seq: int | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._gc_frozen_partitions = 0
        self._gc_burst_since: float | None = None  # monotonic time the current burst began
        self._gc_burst_started = asyncio.Event()
        self._gc_worker_running = False  # bursts only while run() has a worker to end them
        self._epoch_for_journal = 0
        self.observer = None  # callable(event, timing dict): benchmarks attribute time to phases
        # more callables(event, timing dict) run after each event: the metrics and the decision
        # log (adapters/observability/metrics.py, decisionlog.py); they must stay O(commands), not O(partitions)
        self.observers: list = []
        # the event being decided, None between events: the ControllerState gauge reads it from
        # the metrics server's thread (a plain reference, so reading it there is safe)
        self.processing = None
        # (event_seq, epoch, at, commands, (queue_us, step_us, process_us))
        self._effects: collections.deque = collections.deque()
        self._effects_ready = asyncio.Event()
        # held while an effects record is taken, digested and appended: a segment roll waits for
        # it, so no effects record of an event stepped before a snapshot lands after it
        self._effects_lock = asyncio.Lock()
        self.journal_failure: JournalError | None = None  # set while the journal is unusable
        self.on_journal_failure = None  # callable(error): the node resigns and stops competing
        self.dropped_events = 0  # events not acted on because the journal was unusable
        # set by the node's crash(): the loop's end then writes no pending effects records, as a
        # killed process would not (digesting a 100,000-partition decision's commands held the
        # loop, shared with the surviving nodes in the failover benchmark, for 3 s)
        self.killed = False
        if journal is not None:
            journal.snapshot_provider = self._snapshot
            journal.snapshot_floats = not codec.FLOAT_FREE

    def put(self, event) -> None:
        """Enqueue an event (watch callbacks, senders, timers, the election all call this)."""
        self._idle.clear()
        if self._gc_burst_since is None and max(len(self.state.partitions),
                                                _loaded_partitions(event)) >= GC_BURST_PARTITIONS:
            # from the moment the work arrives: its journal record (for a failover's load, the
            # whole cluster) is on the critical path too
            self._start_gc_burst()
        self.queue.put_nowait((event, time.perf_counter()))

    def statistics(self) -> dict:
        """Queue size and, over recent events, time in queue and in step (ms)."""
        recent = list(self.stats.recent)

        def summary(i: int) -> dict:
            values = sorted(r[i] for r in recent)
            if not values:
                return {"count": 0}
            return {"count": len(values), "mean": sum(values) / len(values), "p50": values[len(values) // 2],
                    "p99": values[min(len(values) - 1, int(len(values) * 0.99))], "max": values[-1]}

        return {
            "EventQueueSize": self.queue.qsize(),
            "EventQueueTimeMs": summary(1),
            "JournalTimeMs": summary(2),
            "StepTimeMs": summary(3),
            "ExecuteTimeMs": summary(4),
            "EventsProcessed": self.stats.processed,
            "EventsByType": dict(self.stats.by_type),
        }

    async def wait_idle(self) -> None:
        """Return once the queue is empty and the last event is fully processed (tests)."""
        await self._idle.wait()

    async def run(self, max_batch: int = 512) -> None:
        """Process events forever. Whatever is queued is taken as one batch: its events are
        appended, made durable together (group commit: one fsync for the batch under "batch",
        one per event under "always"), and decided and executed one by one, none executed
        before the batch is durable (the first is decided while the fsync runs)."""
        worker = asyncio.create_task(self._effects_worker(), name="journal-effects")
        gc_worker = asyncio.create_task(self._gc_worker(), name="gc-burst")
        self._gc_worker_running = True
        self.roll_journal()  # a process start begins a segment with a snapshot head (replay/README.md)
        try:
            await self._run(max_batch)
        finally:
            worker.cancel()
            gc_worker.cancel()
            self._gc_worker_running = False
            self._end_gc_burst(freeze=False)
            if not self.killed:
                if self._effects and len(self.state.partitions) >= OFFLOAD_PARTITIONS:
                    # a backlog of large decisions' digests (a benchmark's 100,000-partition
                    # runs left 105 s of them) is written from a worker thread, so that the
                    # loop, shared with other nodes' sessions in tests and benchmarks, turns
                    await asyncio.to_thread(self.flush_effects)
                else:
                    self.flush_effects()

    async def _run(self, max_batch: int) -> None:
        while True:
            batch = [await self.queue.get()]
            while len(batch) < max_batch and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            await self._process_batch(batch)
            if self.queue.empty():
                self._idle.set()

    async def _process_batch(self, batch: list) -> None:
        journal = self.journal
        if journal is None:
            for event, enqueued in batch:
                await self.process(event, enqueued)
            return
        if self.journal_failure is not None:
            self._without_journal(batch)
            return
        per_event = journal.policy == "always"
        appended = []
        sync = None
        try:
            for event, enqueued in batch:
                t0 = time.perf_counter()
                if journal.rolls_next() and self._effects:
                    # the snapshot head will hold every event stepped so far, so their effects
                    # records go first, in the old segment (the replay's cut, replay/plan.py)
                    await self._write_pending_effects()
                if journal.rolls_next() and journal.snapshot_provider is not None \
                        and len(self.state.partitions) >= OFFLOAD_PARTITIONS:
                    journal.prepare_snapshot(await asyncio.to_thread(self._snapshot))  # a whole cluster
                if _whole_cluster(event):
                    body = await asyncio.to_thread(codec.encode_event, event)
                else:
                    body = codec.encode_event(event)
                seq = journal.append("event", body, controller_epoch=self._journal_epoch(event), at=event.at,
                                     floats=not codec.FLOAT_FREE)
                if per_event:
                    await journal.sync()
                appended.append((event, enqueued, seq, time.perf_counter() - t0))
            if not per_event:  # the batch's group commit runs while its first event is decided
                sync = asyncio.ensure_future(journal.sync())
            for k, (event, enqueued, seq, journal_s) in enumerate(appended):
                self.last_seq = seq
                await self.process(event, enqueued, journaled_s=journal_s, durable=sync if k == 0 else None)
        except JournalWriteError as exc:
            # nothing of this batch was acted on (under "always" the events synced before the
            # failure were not either: acting on fewer events than are durable is safe)
            self.processing = None
            self._journal_failed(exc)
            self._without_journal(batch)
            return

    # -- an unusable journal ------------------------------------------------------------------

    def _journal_failed(self, exc: JournalError) -> None:
        if self.journal_failure is not None:
            return
        self.journal_failure = exc
        self._effects.clear()  # their events' records may not be durable; the digests can wait
        log.error("controller journal failed, resigning and not competing until it can be written again "
                  "(events not yet durable were not acted on): %s", exc)
        if self.state.active:
            self._apply_unjournaled(E.ControllerResigned(at=self.clock(), reason=f"journal unusable: {exc}"))
        if self.on_journal_failure is not None:
            self.on_journal_failure(exc)

    _ANSWERED_WITHOUT_JOURNAL = (E.ControlledShutdownRequested, E.LeaderElectionRequested)

    def _without_journal(self, batch: list) -> None:
        """Answer requests "not controller" (the core does that for an inactive state, without
        deciding anything); drop the rest."""
        for event, _ in batch:
            if isinstance(event, self._ANSWERED_WITHOUT_JOURNAL) and not self.state.active:
                self._apply_unjournaled(event)
            else:
                self.dropped_events += 1
                log.debug("journal unusable: dropping %s", type(event).__name__)

    def _apply_unjournaled(self, event) -> None:
        state, commands = step(self.state, event)
        self.state = state
        if commands and self.executor is not None:
            self.executor.execute(commands, state)

    def roll_journal(self) -> bool:
        """Start a new segment at the next append (a new term). False if the journal is unusable
        (then the failure has been handled as for a failed append)."""
        if self.journal is None:
            return True
        if self.journal_failure is not None:
            return False
        try:
            self.journal.roll()
        except JournalWriteError as exc:
            self._journal_failed(exc)
            return False
        return True

    def reopen_journal(self, probe_bytes: int | None = None) -> bool:
        """After a failure: if the journal's directory takes `probe_bytes` again, reopen the
        journal (a new segment follows) and accept events again. True on success."""
        if self.journal_failure is None:
            return True
        try:
            probe_writable(self.journal.directory, *(() if probe_bytes is None else (probe_bytes,)))
            journal = self.journal.reopen()
        except (OSError, JournalError) as exc:
            log.debug("journal still unusable: %s", exc)
            return False
        journal.snapshot_provider = self._snapshot
        journal.snapshot_floats = not codec.FLOAT_FREE
        self.journal = journal
        self.journal_failure = None
        log.info("controller journal %s is writable again (records up to seq %d)", journal.directory,
                 journal.last_seq)
        return True

    def close_journal(self, flush: bool = True) -> None:
        """Write the pending effects (`flush`) and close the journal; a failure of the journal
        is logged, not raised: closing must finish whatever the disk does."""
        if self.journal is None:
            return
        if flush:
            self.flush_effects()
        try:
            self.journal.close()
        except JournalError as exc:
            if self.journal_failure is None:
                log.error("closing the controller journal failed: %s", exc)

    def _journal_epoch(self, event) -> int:
        if isinstance(event, E.ControllerElected):
            self._epoch_for_journal = event.epoch
        return self._epoch_for_journal

    async def process(self, event, enqueued: float | None = None, journaled_s: float = 0.0,
                      durable: asyncio.Future | None = None) -> tuple:
        """Decide and execute one event whose journal record (if any) is durable, or will be
        when `durable` (the batch's sync, running meanwhile) completes: the decision is computed
        in the meantime but neither adopted nor executed before. A failed sync raises its
        `JournalWriteError` here, with `self.state` untouched."""
        t1 = time.perf_counter()
        self.processing = event
        before = self.state
        if self._gc_burst_since is None and len(before.partitions) >= GC_BURST_PARTITIONS:
            self._start_gc_burst()
        if len(before.partitions) >= OFFLOAD_PARTITIONS or _whole_cluster(event):
            state, commands = await asyncio.to_thread(step, before, event)
        else:
            state, commands = step(before, event)
        t2 = time.perf_counter()
        if durable is not None:
            await durable
            waited = time.perf_counter() - t2
            journaled_s += waited  # (only the part of the fsync the decision did not hide)
            t1 += waited  # (queue time ends where the decision started; step time excludes the wait)
            t2 += waited
        self.state = state
        self._epoch_for_journal = state.epoch
        if commands and self.executor is not None:
            self.executor.execute(commands, state)
        t3 = time.perf_counter()
        queue_ms = max(((t1 - journaled_s - enqueued) * 1000) if enqueued else 0.0, 0.0)
        if self.journal is not None:
            # the event's times on this loop go into its effects record (written later, when the
            # controller is quiet): the replay charts them as Kafka's EventQueueTimeMs and
            # EventProcessingRateAndTimeMs per event, beside its own re-execution time
            times_us = (round(queue_ms * 1000), round((t2 - t1) * 1e6), round((journaled_s + t3 - t1) * 1e6))
            self._effects.append((self.last_seq, state.epoch, event.at, commands, times_us))
            self._effects_ready.set()
        self.stats.add(type(event).__name__, queue_ms, journaled_s * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000)
        if self.observer is not None or self.observers:
            timing = {"enqueued": enqueued, "queue_ms": queue_ms, "journal_ms": journaled_s * 1000,
                      "step_ms": (t2 - t1) * 1000, "execute_ms": (t3 - t2) * 1000,
                      "done": time.perf_counter(), "commands": commands,
                      "before": before, "state": state, "seq": self.last_seq if self.journal is not None else None}
            if self.observer is not None:
                self.observer(event, timing)
            for observe in self.observers:
                observe(event, timing)
        self.processing = None
        if self._gc_burst_since is None and len(state.partitions) >= GC_BURST_PARTITIONS:
            self._start_gc_burst()  # the state just grew past the threshold
        if self._gc_burst_since is None:
            self._freeze_grown_state(state)  # else when the burst ends (`_end_gc_burst`)
        return commands

    @property
    def bursting(self) -> bool:
        """True from the first event of a burst on a large cluster until the controller is
        quiet again (read from other threads: the state-change log holds its lines meanwhile)."""
        return self._gc_burst_since is not None

    def _quiet(self) -> bool:
        """Nothing queued or being decided, no write in flight, every broker request answered."""
        busy = getattr(self.executor, "busy", None)
        return self.queue.empty() and self._idle.is_set() and self.processing is None \
            and not (busy is not None and busy())

    async def _effects_worker(self) -> None:
        while True:
            await self._effects_ready.wait()
            self._effects_ready.clear()
            while self._effects:
                if not self._quiet():
                    await asyncio.sleep(0.02)
                    continue
                async with self._effects_lock:
                    if self._effects:
                        await self._write_one_effects()
                await asyncio.sleep(0)

    async def _write_one_effects(self) -> None:
        seq, epoch, at, commands, times_us = self._effects.popleft()
        digest = None
        if len(self.state.partitions) >= OFFLOAD_PARTITIONS:
            digest = await asyncio.to_thread(_effects_digest, commands)
        self._append_effects(seq, epoch, at, commands, times_us, digest)

    async def _write_pending_effects(self) -> None:
        async with self._effects_lock:
            while self._effects:
                await self._write_one_effects()

    def flush_effects(self) -> None:
        """Write every pending effects record now (shutdown, tests, journal reads)."""
        while self._effects:
            self._append_effects(*self._effects.popleft())

    def _append_effects(self, seq, epoch, at, commands, times_us: tuple[int, int, int],
                        digest: str | None = None) -> None:
        """The effects record of event `seq`: its commands' count and digest (what the replay
        checks), and its times on the loop in microseconds (`queue_us` waiting in the queue,
        `step_us` in `step()`, `process_us` from the start of its journal record's write to the
        end of its commands' execution; what the replay charts)."""
        if self.journal_failure is not None:
            return
        queue_us, step_us, process_us = times_us
        try:
            self.journal.append("effects", {"event_seq": seq, "count": len(commands),
                                            "digest": digest if digest is not None else _effects_digest(commands),
                                            "queue_us": queue_us, "step_us": step_us, "process_us": process_us},
                                controller_epoch=epoch, at=at)
        except JournalWriteError as exc:
            self._journal_failed(exc)

    def _snapshot(self):
        with gcpause.gc_paused():  # a big state's encoding would trigger collections (see gcpause)
            return self.state.epoch, {"state": codec.encode_state(self.state)}

    # -- the cyclic garbage collector ---------------------------------------------------------------

    def _start_gc_burst(self) -> None:
        """Pause the cyclic collector until the controller is quiet (`_gc_worker`).

        The state is a large graph of long-lived immutable values with no reference cycles,
        freed by reference counts; the collector cannot free any of it but walks all of it. A
        full collection that lands inside a 10,000-partition failover took 130-160 ms of the
        critical path (measured). So: no collections while deciding, writing and releasing a
        burst; the collections its allocations call for run once it is over, when nothing
        waits for the controller.

        Why not also `gc.freeze()` the survivors at the end of each burst, so that later full
        collections skip them: a cycle frozen while alive is never collected once it dies. The
        simulated replica manager links each replica and its followers both ways, so benchmark
        failovers that discard a crashed in-process node each time leaked that node's objects
        on every failover; without the freeze the process stays flat. Only a state that doubled is frozen (`_freeze_grown_state`),
        a bounded number of times."""
        if not self._gc_worker_running:
            return
        gcpause.pause()
        self._gc_burst_since = time.monotonic()
        self._gc_burst_started.set()

    def _end_gc_burst(self, freeze: bool = True) -> None:
        if self._gc_burst_since is None:
            return
        self._gc_burst_since = None
        self._gc_burst_started.clear()
        gcpause.resume()
        if freeze:
            self._freeze_grown_state(self.state)

    def _freeze_grown_state(self, state: ControllerState) -> None:
        # A state that grew (a failover's load, many topics created) is moved out of the
        # collector's generations (`gc.freeze()`), so that collections between bursts do not
        # rescan it. Done when a burst ends, not after the event that grew the state: everything
        # the burst allocated is still in the youngest generation then, and collecting it takes
        # tens of ms that would delay the event's requests (a controller failover's UpdateMetadata).
        # Unfrozen and fully collected first: a cycle frozen while alive is never collected once
        # it dies, and without this every freeze kept the dead of the previous one for good (a
        # benchmark that loads the cluster into a new node's loop on each failover grew by a
        # whole load per failover). The full collection
        # runs once per doubling of the state, with the controller quiet; after a load, the
        # collector would have run one soon anyway.
        size = len(state.partitions)
        if size > GC_BURST_PARTITIONS and size > 2 * self._gc_frozen_partitions:
            t0 = time.perf_counter()
            # the load's requests are freed by now: their pages go back too (adapters/runtime/heap.py)
            frozen, collected, trimmed = heap.freeze_survivors()
            self._gc_frozen_partitions = size
            log.info("state of %d partitions frozen out of the garbage collector's scans (%d objects, "
                     "%d collected first; heap %s; %.0f ms)", size, frozen, collected,
                     {True: "trimmed", False: "had nothing to trim", None: "not trimmable here"}[trimmed],
                     (time.perf_counter() - t0) * 1000)

    async def _gc_worker(self) -> None:
        while True:
            await self._gc_burst_started.wait()
            await asyncio.sleep(0.02)
            since = self._gc_burst_since
            if since is not None and (self._quiet() or time.monotonic() - since > GC_BURST_MAX_S):
                self._end_gc_burst()
