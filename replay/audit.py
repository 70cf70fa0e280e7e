"""The audit rules over the whole cluster's history rows (plain Python, no pyspark).

Rows come from `replay.fold` (possibly from many journals); findings are rows with `rule`,
`severity`, `journal`, `seq`, `detail` (and file, line, time, topic, partition where known).
The Spark job runs `audit_partition` per partition on the executors and the small cluster-wide
parts (terms, brokers, reassignments, statistics) on the driver; `replay.local` runs all of it.

Rules (severity "violation" fails the audit):

- duplicate-epoch: one controller per epoch;
- epoch-order: a term that starts later has a larger epoch;
- leader-epoch: per partition, in ZooKeeper order (the znode version, across controllers), every
  controller write raises the leader epoch and nothing lowers it;
- leader-not-in-isr / isr-outside-assignment / isr-empty: at every recorded point (a leader of -1
  is allowed, with a non-empty ISR). A leaderless partition whose ISR is the one replica a
  reassignment has just dropped is not a violation: Kafka never empties an ISR, so removing its
  last member keeps it there with no leader (ReplicaStateMachine.doRemoveReplicasFromIsr);
- stale-controller-write: no write accepted from a controller after a newer epoch had written;
- version-conflict: two different values recorded for the same znode version;
- unclean-not-allowed: unclean elections only where the topic allowed them (or an admin asked).

Measurements: offline time per partition (no leader, or its leader's broker down) and the time
to recover after each broker failure (until every partition it led has a live leader again),
with median, p99 and max.
"""
from __future__ import annotations

import bisect
from typing import Iterable

from .plan import finding

_KIND_ORDER = {"elected": 0, "observed": 1, "conflict": 2, "write": 3, "deleted": 4}


def percentile(values: list, q: float):
    """Nearest-rank percentile of a list (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def summary(values: list) -> dict:
    return {"count": len(values), "median": percentile(values, 50), "p99": percentile(values, 99),
            "max": max(values) if values else None}


def live_times(events: Iterable[dict]) -> dict:
    """The live controller's times per event as its effects records journaled them (none in
    journals written before 2026-12-06): `process_ms_per_event` (the event record's write, the
    step and the execution) and `queue_ms_per_event`, each a `summary`."""
    process, queue = [], []
    for e in events:
        if e.get("live_process_us") is not None:
            process.append(e["live_process_us"] / 1000)
        if e.get("queue_ms") is not None:
            queue.append(e["queue_ms"])
    return {"process_ms_per_event": summary(process), "queue_ms_per_event": summary(queue)}


# -- controller terms ------------------------------------------------------------------------------


def controller_terms(term_events: Iterable[dict], restarts: Iterable[dict] = (), end_time: int | None = None):
    """Stitch term starts and ends (per journal, in seq order) into terms; check one controller
    per epoch and epochs increasing over time. Returns (terms, findings)."""
    by_journal: dict[str, list] = {}
    for e in term_events:
        by_journal.setdefault(e["journal"], []).append(e)
    for r in restarts:
        by_journal.setdefault(r["journal"], []).append({**r, "kind": "restart", "epoch": None,
                                                       "reason": "process restart"})
    terms = []
    for journal, events in sorted(by_journal.items()):
        events.sort(key=lambda e: (e["seq"], 0 if e["kind"] != "start" else 1))
        open_term = None
        for e in events:
            if e["kind"] == "start":
                if open_term is not None:
                    open_term.update(end=e["time"], end_seq=e["seq"], reason="elected again without resigning")
                    terms.append(open_term)
                open_term = {"journal": journal, "controller_id": e.get("controller_id"), "epoch": e["epoch"],
                             "start": e["time"], "end": None, "reason": None, "start_seq": e["seq"], "end_seq": None,
                             "file": e.get("file"), "line": e.get("line")}
            elif open_term is not None and (e["epoch"] is None or e["epoch"] == open_term["epoch"]):
                open_term.update(end=e["time"], end_seq=e["seq"], reason=e.get("reason"))
                terms.append(open_term)
                open_term = None
        if open_term is not None:
            open_term["reason"] = None  # the journal ends inside the term: see below
            terms.append(open_term)
    # A term open when its journal ends: the process was killed (a clean stop journals its
    # resignation, since 2026-12-06; older journals end without it) or the journal was cut. Only the cluster's latest term is still held at the end.
    by_start = sorted(terms, key=lambda t: (t["start"], t["epoch"] if t["epoch"] is not None else -1))
    for k, t in enumerate(by_start):
        if t["end"] is not None or t["reason"] is not None:
            continue
        later = [u for u in by_start[k + 1:] if u["epoch"] is not None and t["epoch"] is not None
                 and u["epoch"] > t["epoch"]]
        if later:
            nxt = later[0]
            t["end"] = nxt["start"]
            t["reason"] = (f"its journal ends inside the term (the process stopped); controller "
                           f"{nxt['controller_id']} took over with epoch {nxt['epoch']}")
        else:
            t["reason"] = "the latest term: held when the journals end"
    for t in terms:
        t["duration_ms"] = None if t["end"] is None else t["end"] - t["start"]
    findings = []
    holders: dict[int, list] = {}
    for t in terms:
        holders.setdefault(t["epoch"], []).append(t)
    for epoch, ts in sorted(holders.items()):
        if len(ts) > 1:
            who = ", ".join(f"controller {t['controller_id']} ({t['journal']}, seq {t['start_seq']})" for t in ts)
            findings.append(finding("duplicate-epoch", "violation", f"epoch {epoch} was held {len(ts)} times: {who}",
                                    journal=ts[1]["journal"], file=ts[1].get("file"), line=ts[1].get("line"),
                                    seq=ts[1]["start_seq"], time=ts[1]["start"]))
    ordered = sorted(terms, key=lambda t: (t["start"], t["epoch"]))
    highest = None
    for t in ordered:
        if highest is not None and t["epoch"] < highest["epoch"]:
            findings.append(finding("epoch-order", "violation",
                                    f"controller {t['controller_id']} started epoch {t['epoch']} at {t['start']}, after "
                                    f"controller {highest['controller_id']} had started epoch {highest['epoch']} at "
                                    f"{highest['start']}", journal=t["journal"], file=t.get("file"),
                                    line=t.get("line"), seq=t["start_seq"], time=t["start"]))
        if highest is None or t["epoch"] > highest["epoch"]:
            highest = t
    return sorted(terms, key=lambda t: (t["start"], t["epoch"])), findings


# -- brokers ----------------------------------------------------------------------------------------


def broker_intervals(broker_events: Iterable[dict], end_time: int | None = None) -> list[dict]:
    """Up/down intervals per broker from what the controllers saw (listings at election, and
    BrokersChanged diffs), merged over all journals in time order."""
    events = sorted(broker_events, key=lambda e: (e["time"], e["journal"], e["seq"]))
    state: dict[int, dict] = {}  # broker -> open interval
    out = []
    present_batches: dict[tuple, set] = {}
    for e in events:
        if e["change"] == "present":
            present_batches.setdefault((e["journal"], e["seq"]), set()).add(e["broker"])

    def close(b, t):
        iv = state.pop(b, None)
        if iv is not None:
            iv["end"] = t
            out.append(iv)

    def open_(b, st, t, e, why):
        state[b] = {"broker": b, "state": st, "start": t, "end": None, "epoch": e["epoch"], "journal": e["journal"],
                    "seq": e["seq"], "reason": why, "broker_epoch": e.get("broker_epoch")}

    done_batches = set()
    for e in events:
        b, t, change = e["broker"], e["time"], e["change"]
        current = state.get(b)
        if change == "present":
            key = (e["journal"], e["seq"])
            if key not in done_batches:  # brokers missing from an election's listing are down
                done_batches.add(key)
                for other, iv in list(state.items()):
                    if iv["state"] == "up" and other not in present_batches[key]:
                        close(other, t)
                        open_(other, "down", t, e, "absent at election")
            if current is None or current["state"] != "up":
                close(b, t)
                open_(b, "up", t, e, "present at election")
        elif change == "up":
            if current is None or current["state"] != "up":
                close(b, t)
                open_(b, "up", t, e, "registered")
        elif change == "down":
            if current is None or current["state"] != "down":
                close(b, t)
                open_(b, "down", t, e, "controlled shutdown" if e.get("controlled") else "deregistered")
        elif change == "bounce":
            close(b, t)
            out.append({"broker": b, "state": "down", "start": t, "end": t, "epoch": e["epoch"],
                        "journal": e["journal"], "seq": e["seq"], "reason": "bounce (new session)",
                        "broker_epoch": e.get("broker_epoch")})
            open_(b, "up", t, e, "bounce (new session)")
    for b in sorted(state):
        iv = state[b]
        iv["end"] = None
        out.append(iv)
    for iv in out:
        iv["duration_ms"] = None if iv["end"] is None else iv["end"] - iv["start"]
    return sorted(out, key=lambda iv: (iv["broker"], iv["start"]))


def failures(intervals: list[dict]) -> list[dict]:
    """Broker failures: down intervals that were seen happen (not brokers already absent when a
    controller took over, nor controlled shutdowns, which move leadership away first), numbered
    in time order."""
    downs = sorted((iv for iv in intervals if iv["state"] == "down" and iv["reason"] == "deregistered"),
                   key=lambda iv: (iv["start"], iv["broker"]))
    return [{"failure": k, "broker": iv["broker"], "time": iv["start"], "journal": iv["journal"], "seq": iv["seq"]}
            for k, iv in enumerate(downs)]


class DownIndex:
    """Which brokers are down at a given time (from the intervals)."""

    def __init__(self, intervals: list[dict]):
        self.by_broker: dict[int, tuple[list, list]] = {}
        for iv in sorted(intervals, key=lambda iv: iv["start"]):
            if iv["state"] == "down":
                starts, ends = self.by_broker.setdefault(iv["broker"], ([], []))
                starts.append(iv["start"])
                ends.append(iv["end"] if iv["end"] is not None else 1 << 62)

    def down_spans(self, broker: int, start: int, end: int) -> list[tuple[int, int]]:
        """Parts of [start, end) during which `broker` was down."""
        got = self.by_broker.get(broker)
        if got is None:
            return []
        starts, ends = got
        spans = []
        k = max(0, bisect.bisect_right(starts, start) - 1)
        while k < len(starts) and starts[k] < end:
            a, b = max(starts[k], start), min(ends[k], end)
            if a < b:
                spans.append((a, b))
            k += 1
        return spans

    def is_down(self, broker: int, t: int) -> bool:
        got = self.by_broker.get(broker)
        if got is None:
            return False
        starts, ends = got
        k = bisect.bisect_right(starts, t) - 1
        return k >= 0 and t < ends[k]


# -- one partition: a walk that can stop at a time and resume ---------------------------------------
#
# The rules walk each incarnation of a partition (a topic deletion ends one) in the order
# ZooKeeper accepted its values (znode version); the measurements walk every row in time order.
# Both are folds, so an incremental audit (replay/job.py) keeps each partition's state at a *cut*
# time C (`PartitionWalk.state`) and later walks only the rows at or after C from it. That gives
# what a walk of the whole timeline gives when every later row also comes after the walked ones
# in version order; a row read at or after C with a version below the walked incarnation's
# newest (a stale read arriving late) does not, and raises `NeedsWholeWalk`.


class NeedsWholeWalk(Exception):
    """Rows after a cut that do not come after the walked ones in ZooKeeper order: the
    partition's whole timeline has to be walked again."""


def _time_key(r: dict):
    return (r["time"], _KIND_ORDER.get(r["kind"], 9), r["seq"])


def _zk_order(rows: list[dict]) -> list[list[dict]]:
    """Rows of one partition split into incarnations (a topic deletion ends one) and sorted in
    the order ZooKeeper accepted them (znode version), ties by time."""
    rows = sorted(rows, key=_time_key)
    incarnations, current = [], []
    for r in rows:
        current.append(r)
        if r["kind"] == "deleted":
            incarnations.append(current)
            current = []
    if current:
        incarnations.append(current)
    return [sorted(inc, key=lambda r: (r["kind"] == "deleted", r["zk_version"], r["time"],
                                       _KIND_ORDER.get(r["kind"], 9))) for inc in incarnations]


_PREV = ("zk_version", "leader", "leader_epoch", "isr", "controller_epoch", "kind", "seq", "journal")


def _walk_incarnation(inc: list[dict], state: dict | None, bad) -> dict | None:
    """The rules over one incarnation's rows in ZooKeeper order, from `state` (the walk of its
    earlier rows: the first row of the newest version, the newest writer, the current and the
    previous assignment); `bad(rule, row, detail)` receives the findings (None: none wanted).
    Returns the state after these rows."""
    if state is None:
        prev, max_writer, assignments = None, None, [[], []]
    else:
        prev, max_writer, assignments = state["prev"], state["writer"], state["assignments"]
    by_version: dict[int, dict] = {} if prev is None else {prev["zk_version"]: prev}
    for r in inc:
        if r["kind"] == "deleted":
            continue
        isr, leader = r["isr"], r["leader"]
        seen = by_version.get(r["zk_version"])
        if seen is not None:  # the same znode version read again (possibly later, under a newer assignment)
            if bad is not None and (seen["leader"], seen["leader_epoch"], list(seen["isr"]), seen["controller_epoch"]) \
                    != (leader, r["leader_epoch"], list(isr), r["controller_epoch"]):
                bad("version-conflict", r, f"{_what(r)}: leader {leader} epoch {r['leader_epoch']} ISR {isr}, but "
                    f"{seen['kind']} at seq {seen['seq']} ({seen['journal']}) recorded leader {seen['leader']} "
                    f"epoch {seen['leader_epoch']} ISR {seen['isr']} for the same version")
            continue
        by_version[r["zk_version"]] = r
        replicas = r["replicas"]
        if replicas and replicas != assignments[-1]:
            assignments = [assignments[-1], replicas]
        if bad is not None:
            what = _what(r)
            if not isr:
                bad("isr-empty", r, f"{what}: the ISR is empty")
            elif leader != -1 and leader not in isr:
                bad("leader-not-in-isr", r, f"{what}: leader {leader} is not in the ISR {isr}")
            # a partition leader may still write an ISR with a replica that a reassignment has
            # just removed (it learns of the new assignment later): its values are checked
            # against the current and the previous assignment, the controller's own against the
            # current one
            allowed = replicas if r["kind"] in ("write", "elected") else set(assignments[0]) | set(replicas)
            last_member_kept = leader == -1 and len(isr) == 1
            if replicas and not last_member_kept and any(x not in allowed for x in isr):
                bad("isr-outside-assignment", r, f"{what}: ISR {isr} is not within the assignment {replicas}")
            if prev is not None:
                if r["kind"] == "write" and r["leader_epoch"] <= prev["leader_epoch"]:
                    bad("leader-epoch", r, f"{what}: leader epoch {r['leader_epoch']} does not exceed "
                        f"{prev['leader_epoch']} of version {prev['zk_version']} ({prev['kind']}, seq {prev['seq']})")
                elif r["leader_epoch"] < prev["leader_epoch"]:
                    bad("leader-epoch", r, f"{what}: leader epoch {r['leader_epoch']} went back from "
                        f"{prev['leader_epoch']} of version {prev['zk_version']} ({prev['kind']}, seq {prev['seq']})")
            if r["kind"] == "write" and max_writer is not None and r["controller_epoch"] < max_writer[0]:
                bad("stale-controller-write", r, f"{what}: accepted from controller epoch {r['controller_epoch']} "
                    f"after epoch {max_writer[0]} had written (version {max_writer[1]})")
        if r["kind"] == "write" and (max_writer is None or r["controller_epoch"] > max_writer[0]):
            max_writer = [r["controller_epoch"], r["zk_version"]]
        prev = r
    if prev is None:
        return None
    return {"prev": {k: (list(prev[k]) if k == "isr" else prev[k]) for k in _PREV}, "writer": max_writer,
            "assignments": [list(a) for a in assignments]}


def _what(r: dict) -> str:
    return f"{r['kind']} (version {r['zk_version']}, controller epoch {r['controller_epoch']})"


def walk_rules(rows: list[dict], state: dict | None, bad) -> dict | None:
    """The rules over a partition's rows (any order) that follow a walk whose state is `state`
    (None: nothing walked, or its last row was a deletion). Returns the state after them: that
    of the open incarnation, None when the last row (in time order) is a deletion."""
    incarnations = _zk_order(rows)
    for k, inc in enumerate(incarnations):
        start = state if k == 0 else None
        if start is not None:
            floor = start["prev"]["zk_version"]
            if any(r["zk_version"] < floor for r in inc if r["kind"] != "deleted"):
                raise NeedsWholeWalk(f"a version below {floor} after the cut")
        if bad is None and k + 1 < len(incarnations):
            state = None  # an incarnation that a deletion ended leaves nothing for the next one
            continue
        state = _walk_incarnation(inc, start, bad)
        if inc[-1]["kind"] == "deleted":
            state = None
    return state


class FailureIndex:
    """The broker failures (`failures`, numbered in time order) as every partition's walk reads them."""

    def __init__(self, broker_failures: list[dict]):
        self.failures = broker_failures
        self.times = [f["time"] for f in broker_failures]
        self.failed_at = {f["failure"]: f["time"] for f in broker_failures}


def loads(term_events: Iterable[dict]) -> list[tuple[int, int]]:
    """(time, epoch) of every term start, in time order: each is a controller's read of the
    whole cluster (its ControllerElected), whose `elected` rows name every partition that had a
    state and a topic then (`LoadIndex`)."""
    return sorted({(e["time"], e["epoch"]) for e in term_events if e["kind"] == "start" and e["time"] is not None})


class LoadIndex:
    """The term starts (`loads`) as every partition's walk reads them. A partition alive before a
    load that has no row at that load's time was gone from ZooKeeper when the new controller
    read it (an operator removed its topic's znodes while no controller held office): its life
    ends there. No controller deleted it or saw it go, so no journal records its end, and
    without this its last leader (or its being offline) lasted to the end of the history."""

    def __init__(self, term_loads: Iterable = ()):
        pairs = sorted((int(t), int(e) if e is not None else None) for t, e in term_loads)
        self.times = [t for t, _ in pairs]
        self.epochs = [e for _, e in pairs]


_NO_LOADS = LoadIndex()


def _finding(rule: str, r: dict, detail: str) -> dict:
    return finding(rule, "violation", detail, journal=r["journal"], file=r.get("file"), line=r.get("line"),
                   seq=r["seq"], time=r["time"], topic=r["topic"], partition=r["partition"])


class PartitionWalk:
    """One partition's measurements (and, with `rules`, its rule findings, in `findings`) over its
    rows: the offline intervals (no leader, or its leader's broker down), the leader changes per
    broker, and the time each broker failure that took its leader took to give it a live leader
    again.

    `walk(rows, cut)` takes the partition's rows at or after the state's cut (all of them from
    scratch); when `cut` is given, `state` is the walk's state at that time, and every output
    before it is marked final (it cannot change when later rows arrive: the incremental audit
    stores it). `finish(end_time)` closes the last leader's span at the end of the history."""

    def __init__(self, down: DownIndex, failures: "FailureIndex", state: dict | None = None, rules: bool = False,
                 loads: LoadIndex | None = None):
        self.down, self.failures = down, failures
        self.loads = loads if loads is not None else _NO_LOADS
        self.findings: list[dict] = []
        # closed over the list, not `self`: a walk that refers to itself is a reference cycle,
        # freed only by the cyclic collector, and a task walks thousands of partitions
        found = self.findings.append
        self.bad = (lambda rule, r, detail: found(_finding(rule, r, detail))) if rules else None
        m = state["measure"] if state else {}
        self.rules = state["rules"] if state else None
        self.last = tuple(m["last"]) if m.get("last") else None  # (time, leader): -1 none, -2 deleted
        self.pending = tuple(m["pending"]) if m.get("pending") else None  # the offline interval still growing
        self.waiting: list[int] = list(m.get("waiting", ()))  # failures that took the leader, not recovered yet
        self.offline_ms, self.offline_count = m.get("ms", 0), m.get("count", 0)
        # the epoch of the controller that deleted the partition, while it stays deleted: a row
        # from an older (fenced) controller after that (a version conflict it read of a znode
        # about to go) does not bring the partition back; a row from a newer one is a new topic
        self.deleted_epoch = m.get("deleted_epoch")
        cut = state["cut"] if state else None
        self.next_failure = 0 if cut is None else bisect.bisect_left(failures.times, cut)
        # (the loads before the cut were all passed when the carried state was kept: `_snapshot`)
        self.next_load = 0 if cut is None else bisect.bisect_left(self.loads.times, cut)
        self.intervals: list[tuple[int, int, bool]] = []  # (start, end, final)
        self.deltas: list[tuple[int, int, int, bool]] = []  # (time, broker, +1/-1, final)
        self.recoveries: list[tuple[int, int | None, bool]] = []  # (failure, ms or None, final)
        self.state: dict | None = None
        self._final = False

    def walk(self, rows: list[dict], cut: int | None = None) -> "PartitionWalk":
        rules_state = None
        if cut is None:
            if self.bad is not None:
                walk_rules(rows, self.rules, self.bad)
        else:  # the rows before the cut give the state kept there; those after it resume from it
            rules_state = walk_rules([r for r in rows if r["time"] < cut], self.rules, self.bad)
            if self.bad is not None:
                try:
                    walk_rules([r for r in rows if r["time"] >= cut], rules_state, self.bad)
                except NeedsWholeWalk:  # a stale read after the cut: the findings of one walk of them all
                    self.findings.clear()
                    walk_rules(rows, self.rules, self.bad)
        self._final = cut is not None
        for r in sorted(rows, key=lambda r: (r["time"], _KIND_ORDER.get(r["kind"], 9), r["zk_version"])):
            if self._final and r["time"] >= cut:
                self._snapshot(cut, rules_state)
            if self.next_load < len(self.loads.times):
                self._pass_loads(r["time"])
            epoch = r.get("epoch")
            if r["kind"] == "deleted":
                leader = -2
                self.deleted_epoch = epoch
            else:
                if self.deleted_epoch is not None:
                    if epoch is not None and epoch < self.deleted_epoch:
                        continue  # a fenced controller's row about a partition already deleted
                    self.deleted_epoch = None
                leader = r["leader"]
            if self.last is not None and self.last[1] == leader:
                continue
            self._change(r["time"], leader)
        if self._final:
            self._snapshot(cut, rules_state)
        return self

    def _pass_loads(self, t: int) -> None:
        """The loads before `t` (a row's time) that found the partition gone end its life; one at
        `t` itself saw it (the row is that load's, or at the same instant)."""
        times = self.loads.times
        while self.next_load < len(times) and times[self.next_load] < t:
            at = times[self.next_load]
            if self.last is not None and self.last[1] != -2:
                self.deleted_epoch = self.loads.epochs[self.next_load]
                self._change(at, -2)
            self.next_load += 1
        if self.next_load < len(times) and times[self.next_load] == t:
            self.next_load += 1

    def _assign(self, before: int) -> None:
        """The failures before `before` find the leader they took (the last change at or before them)."""
        fs = self.failures.failures
        while self.next_failure < len(fs) and fs[self.next_failure]["time"] < before:
            f = fs[self.next_failure]
            if self.last is not None and self.last[1] == f["broker"]:
                self.waiting.append(f["failure"])
            self.next_failure += 1

    def _change(self, t: int, leader: int) -> None:
        self._assign(t)
        if self.waiting and (leader == -2 or (leader >= 0 and not self.down.is_down(leader, t))):
            for failure in self.waiting:  # a new leader, or the broker back; or the topic gone
                ms = None if leader == -2 else t - self.failures.failed_at[failure]
                self.recoveries.append((failure, ms, self._final))
            self.waiting = []
        if self.last is not None:
            if self.last[1] >= 0:
                self.deltas.append((t, self.last[1], -1, self._final))
            self._spans(self.last, t)
        if leader >= 0:
            self.deltas.append((t, leader, 1, self._final))
        self.last = (t, leader)

    def _spans(self, change: tuple[int, int], t_next: int) -> None:
        t, leader = change
        if leader == -2 or t_next <= t:
            return
        for a, b in [(t, t_next)] if leader == -1 else self.down.down_spans(leader, t, t_next):
            if self.pending is not None and self.pending[1] == a:
                self.pending = (self.pending[0], b)
            else:
                self._emit()
                self.pending = (a, b)

    def _emit(self) -> None:
        if self.pending is not None:
            a, b = self.pending
            self.intervals.append((a, b, self._final))
            self.offline_ms += b - a
            self.offline_count += 1
            self.pending = None

    def _snapshot(self, cut: int, rules_state: dict | None) -> None:
        self._pass_loads(cut)
        self._assign(cut)
        self.state = {"cut": cut, "rules": rules_state,
                      "measure": {"last": self.last, "pending": self.pending, "waiting": list(self.waiting),
                                  "ms": self.offline_ms, "count": self.offline_count,
                                  "deleted_epoch": self.deleted_epoch}}
        self._final = False

    def finish(self, end_time: int) -> "PartitionWalk":
        self._pass_loads(end_time + 1)
        self._assign(1 << 62)
        if self.last is not None:
            self._spans(self.last, end_time)
        for failure in self.waiting:
            self.recoveries.append((failure, None, False))
        self.waiting = []
        self._emit()
        self.recoveries.sort(key=lambda x: x[0])
        return self


def audit_partition(rows: list[dict], down: DownIndex, broker_failures: list[dict], end_time: int,
                    rules: bool = True, loads: LoadIndex | None = None):
    """The per-partition rules and measurements over a partition's whole timeline. Returns
    (findings, offline intervals, recoveries [(failure, ms or None)], leader deltas [(time,
    broker, +1/-1)]). `rules=False`: the measurements only. `loads`: the term starts
    (`LoadIndex`)."""
    if not rows:
        return [], [], [], []
    w = PartitionWalk(down, FailureIndex(broker_failures), rules=rules, loads=loads).walk(rows).finish(end_time)
    return (w.findings, [(a, b) for a, b, _ in w.intervals], [(f, ms) for f, ms, _ in w.recoveries],
            [(t, b, d) for t, b, d, _ in w.deltas])


# -- reassignments and elections ----------------------------------------------------------------------


def reassignments(events: Iterable[dict], end_time: int | None = None) -> list[dict]:
    """Stitch reassignment starts and ends of all controllers per partition."""
    by_tp: dict[tuple, list] = {}
    for e in events:
        by_tp.setdefault((e["topic"], e["partition"]), []).append(e)
    out = []
    for (topic, p), evs in sorted(by_tp.items()):
        evs.sort(key=lambda e: (e["time"], e["seq"]))
        current = None
        for e in evs:
            if e["change"] == "start":
                if current is not None and current["target"] == e["target"]:
                    current["terms"] += 1  # resumed by a new controller (or re-announced)
                    continue
                if current is not None:
                    current.update(end=e["time"], outcome="superseded", end_epoch=e["epoch"])
                    out.append(current)
                current = {"topic": topic, "partition": p, "start": e["time"], "end": None, "outcome": "in progress",
                           "origin": e["origin"], "target": e["target"], "start_epoch": e["epoch"],
                           "end_epoch": None, "terms": 1, "journal": e["journal"], "seq": e["seq"]}
            elif current is not None:
                current.update(end=e["time"], outcome=e["change"], end_epoch=e["epoch"])
                out.append(current)
                current = None
        if current is not None:
            out.append(current)
    for r in out:
        r["duration_ms"] = None if r["end"] is None else r["end"] - r["start"]
    return out


def check_elections(elections: Iterable[dict]) -> list[dict]:
    out = []
    for e in elections:
        if e["unclean"] and not e["unclean_allowed"] and not e["admin_requested"] and e["outcome"] != "conflict":
            out.append(finding("unclean-not-allowed", "violation",
                               f"unclean election of leader {e['leader']} (epoch {e['leader_epoch']}) while the topic "
                               "does not allow unclean leader election", journal=e["journal"], file=e.get("file"),
                               line=e.get("line"), seq=e["cause_seq"],
                               time=e["time"], topic=e["topic"], partition=e["partition"]))
    return out


def recovery_stats(recoveries: Iterable[tuple[int, int | None]], broker_failures: list[dict]) -> tuple[list[dict], dict]:
    """Per failure: partitions it took down, time until all had a live leader again."""
    per: dict[int, list] = {}
    for failure_id, ms in recoveries:
        per.setdefault(failure_id, []).append(ms)
    rows = []
    for f in broker_failures:
        got = per.get(f["failure"], [])
        done = [m for m in got if m is not None]
        rows.append({**f, "partitions": len(got), "unrecovered": len(got) - len(done),
                     "recovery_ms": max(done) if done else None,
                     "median_partition_ms": percentile(done, 50)})
    measured = [r["recovery_ms"] for r in rows if r["recovery_ms"] is not None and r["partitions"]]
    return rows, summary(measured)


def leader_series(deltas: Iterable[tuple[int, int, int]], buckets: list[int]) -> dict[int, list[int]]:
    """Partitions led by each broker at each bucket time, from leader deltas."""
    per: dict[int, list] = {}
    for t, b, d in deltas:
        per.setdefault(b, []).append((t, d))
    out = {}
    for b, ds in sorted(per.items()):
        ds.sort()
        series, total, k = [], 0, 0
        for t in buckets:
            while k < len(ds) and ds[k][0] <= t:
                total += ds[k][1]
                k += 1
            series.append(total)
        out[b] = series
    return out


def offline_series(intervals: Iterable[tuple[int, int]], buckets: list[int]) -> list[int]:
    """Partitions offline at each bucket time."""
    starts = sorted(a for a, _ in intervals)
    ends = sorted(b for _, b in intervals)
    return [bisect.bisect_right(starts, t) - bisect.bisect_right(ends, t) for t in buckets]
