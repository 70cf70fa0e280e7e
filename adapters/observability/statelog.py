"""Kafka's state-change log: every partition and replica transition, with the decision that made it.

Where it goes: `<journal-dir>/state-change.log` of each node, rotated at 64 MB with four old
files kept (`state-change.log.1` ...), in the process's log format (text, or one JSON object a
line with `--log-format json`). A node without a journal directory writes none; its decision
log on stderr (adapters/observability/decisionlog.py) still counts every transition. The logger is
`kctl.state.change`, at INFO whatever `--log-level` says, and it does not propagate to stderr,
for the reason Kafka's log4j sends `state.change.logger` to an appender of its own: one
failover lists every partition.

One line per group of identical transitions of one decision (same event, from/to state,
replica, outcome), listing *every* partition of the group:

    [Controller id=5 epoch=3] BrokersChanged (seq 412): partition OnlinePartition -> OfflinePartition for 2 partition(s): t-0, t-1
    [Controller id=5 epoch=3] BrokersChanged (seq 412): partition OfflinePartition -> OnlinePartition for 2 partition(s): t-0 (leader 2, epoch 5, isr 2,3), t-1 (leader 3, epoch 5, isr 3,4)
    [Controller id=5 epoch=3] BrokersChanged (seq 412): replica 1 OnlineReplica -> OfflineReplica for 2 partition(s): t-0, t-1

Failed transitions are ERROR lines that give the reason. `seq N` is the journal seq of the
event that caused the decision (absent when the node keeps no journal), so a line leads straight
to the journal record that `kctl replay` re-executes. In JSON, `event` is the event type, `cause`
the core's description of the decision (`ControllerElected(epoch 3)`, `retry of write 7 ...`),
`partitions` the full list and, for moves to OnlinePartition, `leader_isr` the parallel list of
[leader, leader_epoch, isr] written.

Off the event loop: the executor (which executes the core's `LogStateChanges` command) makes one
log record per group whose message is a `StateChangeLine` holding the immutable entry and state;
nothing is formatted then. A queue handler that does not format (the standard `QueueHandler`
would) hands the record to a `QueueListener` thread, which renders and writes it. Several nodes
may run in one process (tests, benchmarks): each node's handler takes only its own records.
"""
from __future__ import annotations

import logging
import logging.handlers
import queue
import time
from itertools import starmap
from pathlib import Path

from controller_core import commands as C
from controller_core.columns import PartitionImage, _cut
from controller_core.machines import PartitionState
from controller_core.partition_views import ImageRows, distinct_rows

from adapters.observability import logformat

LOGGER_NAME = "kctl.state.change"
FILE_NAME = "state-change.log"
MAX_BYTES = 64 * 1024 * 1024
BACKUPS = 4
MAX_HOLD_S = 2.0
"""A line waits at most this long for the controller to be quiet before it is written anyway."""

logger = logging.getLogger(LOGGER_NAME)
logger.propagate = False  # its own file only (see the module docstring)
logger.setLevel(logging.INFO)  # whatever --log-level says about stderr, the file gets every transition
logger.addHandler(logging.NullHandler())  # and never logging's last-resort stderr handler

_ONLINE = str(PartitionState.ONLINE)


class StateChangeLine(logformat.Structured):
    """One group of transitions of one decision. Rendered by whichever thread writes it."""

    __slots__ = ("controller_id", "epoch", "cause", "event_seq", "entry", "state")

    def __init__(self, controller_id: int, epoch: int, cause: str, event_seq: int | None, entry: C.StateChange, state):
        self.controller_id = controller_id
        self.epoch = epoch
        self.cause = cause
        self.event_seq = event_seq
        self.entry = entry
        self.state = state  # the state after the decision: leaders and ISRs of partitions moved Online

    def _head(self) -> str:
        seq = f" (seq {self.event_seq})" if self.event_seq is not None else ""
        return f"[Controller id={self.controller_id} epoch={self.epoch}] {self.cause}{seq}"

    def _what(self) -> str:
        e = self.entry
        what = "partition" if e.replica < 0 else f"replica {e.replica}"
        return f"{what} {e.from_state} -> {e.to_state}"

    def _with_leaders(self) -> bool:
        e = self.entry
        return e.ok and e.replica < 0 and e.to_state == _ONLINE

    def _tail(self) -> str:
        e = self.entry
        n = len(e.partitions)
        if e.ok:
            detail = f" [{e.detail}]" if e.detail else ""
            return f"{detail} for {n} partition(s)"
        return f" failed for {n} partition(s): {e.detail}"

    def summary(self) -> str:
        return f"{self._head()}: {self._what()}{self._tail()}"

    def __str__(self) -> str:
        tps = self.entry.partitions
        if not self._with_leaders():
            return f"{self.summary()}: {', '.join(starmap(_TP.format, tps))}"
        leaders = self._leader_isrs()
        if leaders is not None:
            leader, epoch, isr = leaders
            isr_text = [",".join(map(str, members)) for members in isr[0]]
            listing = ", ".join(map(_TP_LEADER.format, *zip(*tps), leader, epoch, map(isr_text.__getitem__, isr[1])))
        else:
            items = []
            for tp, li in zip(tps, self._leader_isrs_one_by_one()):
                items.append(_TP.format(*tp) if li is None else _TP_LEADER.format(*tp, li.leader, li.leader_epoch,
                                                                                    ",".join(map(str, li.isr))))
            listing = ", ".join(items)
        return f"{self.summary()}: {listing}"

    def _leader_isrs(self):
        """`(leaders, leader epochs, (distinct ISRs, each partition's index among them))` of the
        entry's partitions from the state's image columns (a failover's line lists 100,000
        partitions: one object per partition would take the controller's GIL for a second), or
        None where the columns do not say it all (a partition without a state, or kept whole in
        the image's `odd` map)."""
        image = self.state.partitions
        tps = self.entry.partitions
        if not isinstance(image, PartitionImage) or image.odd or len(tps) < _COLUMNAR_LINE:
            return None
        views = ImageRows(image).views(tps)
        if len(views) != len(tps):
            return None
        distinct, inverse = distinct_rows(views.isr)
        return (views.leader.tolist(), views.leader_epoch.tolist(),
                ([_cut(row) for row in distinct.tolist()], inverse.tolist()))

    def _leader_isrs_one_by_one(self):
        parts = self.state.partitions
        for tp in self.entry.partitions:
            info = parts.get(tp)
            yield info.leader_isr if info is not None else None

    def fields(self) -> dict:
        e = self.entry
        out = {
            "controller_id": self.controller_id, "controller_epoch": self.epoch,
            "event": self.cause.split("(", 1)[0].split(" ", 1)[0], "cause": self.cause, "event_seq": self.event_seq, "kind": "partition" if e.replica < 0 else "replica",
            "replica": e.replica if e.replica >= 0 else None,
            "transition": f"{e.from_state}->{e.to_state}", "from_state": e.from_state, "to_state": e.to_state,
            "ok": e.ok, "detail": e.detail, "count": len(e.partitions),
            "partitions": list(starmap(_TP.format, e.partitions)),
        }
        if self._with_leaders():
            leaders = self._leader_isrs()
            if leaders is not None:
                leader, epoch, (isrs, which) = leaders
                isr_lists = [list(members) for members in isrs]
                leader_isr = [[lead, le, isr_lists[k]] for lead, le, k in zip(leader, epoch, which)]
            else:
                leader_isr = [None if li is None else [li.leader, li.leader_epoch, list(li.isr)]
                              for li in self._leader_isrs_one_by_one()]
            out["leader_isr"] = leader_isr  # parallel to `partitions`: [leader, leader_epoch, isr]
        return out


_TP = "{}-{}"
"""A partition as Kafka prints it (`str(TopicPartition)`), formatted in C from the tuple."""
_TP_LEADER = "{}-{} (leader {}, epoch {}, isr {})"
_COLUMNAR_LINE = 64
"""Lines of at least this many partitions read leaders and ISRs from the image's columns."""


def log_state_changes(command: C.LogStateChanges, state, controller_id: int, event_seq: int | None) -> None:
    """Log one decision's transitions: one record per group, INFO (ERROR for refusals). Costs
    one record per group on the caller's thread, whatever the number of partitions."""
    for entry in command.entries:
        level = logging.INFO if entry.ok else logging.ERROR
        if logger.isEnabledFor(level):
            logger.log(level, StateChangeLine(controller_id, state.epoch, command.cause, event_seq, entry, state))


class _PassThroughQueueHandler(logging.handlers.QueueHandler):
    """`QueueHandler.prepare()` formats the record on the caller's thread, which is the very
    cost this handler exists to move off the event loop; our records hold immutable values
    only, so they are enqueued as they are."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


class _FormatOnce(logging.Formatter):
    """`RotatingFileHandler` formats each record twice (once to decide whether to roll over);
    a 10,000-partition line is worth rendering once, so the text is kept on the record."""

    def __init__(self, inner: logging.Formatter):
        super().__init__()
        self.inner = inner
        self._key = f"_kctl_formatted_{id(self)}"

    def format(self, record: logging.LogRecord) -> str:
        text = record.__dict__.get(self._key)
        if text is None:
            text = record.__dict__[self._key] = self.inner.format(record)
        return text


class _HoldingListener(logging.handlers.QueueListener):
    """Writes each record once `hold()` is false, or `MAX_HOLD_S` after it was logged.

    Rendering a 10,000-partition failover's lines takes the writing thread 60-80 ms of CPU, and
    it takes that from the controller's own thread (one GIL) while the controller encodes the
    failover's ZooKeeper write: measured in the failover benchmark's critical path. Holding the
    lines until the controller's burst is over costs the log nothing but a little lateness."""

    hold = None  # callable() -> bool, set by the node: True while the controller is in a burst

    def handle(self, record: logging.LogRecord) -> None:
        hold = self.hold
        if hold is not None:
            deadline = record.created + MAX_HOLD_S
            while hold() and time.time() < deadline:
                time.sleep(0.01)
        super().handle(record)


def _mine(controller_id: int):
    """The handler's filter: the records of this node's controller only."""

    def mine(record: logging.LogRecord) -> bool:
        return getattr(record.msg, "controller_id", None) == controller_id
    return mine


class StateChangeFile:
    """One node's state-change log file, written by a thread of its own (held while the
    controller is busy, see `_HoldingListener`)."""

    def __init__(self, path: Path, controller_id: int, fmt: str | None = None,
                 max_bytes: int = MAX_BYTES, backups: int = BACKUPS):
        self.path = Path(path)
        self.controller_id = controller_id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = logging.handlers.RotatingFileHandler(self.path, maxBytes=max_bytes, backupCount=backups,
                                                          encoding="utf-8")
        self._file.setFormatter(_FormatOnce(logformat.formatter(fmt)))
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._handler = _PassThroughQueueHandler(self._queue)
        # a function of the id, not the bound method `self._mine`: the handler's filter list
        # would hold this object in a cycle (issue 16)
        self._handler.addFilter(_mine(controller_id))
        self._listener = _HoldingListener(self._queue, self._file)
        self._listener.start()
        logger.addHandler(self._handler)
        self._closed = False

    @classmethod
    def in_directory(cls, directory: str | Path, controller_id: int, fmt: str | None = None) -> "StateChangeFile":
        return cls(Path(directory) / FILE_NAME, controller_id, fmt)

    def hold_while(self, busy) -> None:
        """Write lines only when `busy()` is false (or once they are `MAX_HOLD_S` old)."""
        self._listener.hold = busy

    def flush(self) -> None:
        """Wait until every line logged so far is written (tests). Blocks: not on the loop."""
        self._listener.stop()  # drains the queue, then joins the thread
        self._file.flush()
        if not self._closed:
            self._listener.start()

    def close(self) -> None:
        """Write what is queued and close the file. Blocks until written: call it off the loop
        (`asyncio.to_thread`) when much may be queued."""
        if self._closed:
            return
        self._closed = True
        logger.removeHandler(self._handler)
        self._listener.stop()
        self._file.close()
