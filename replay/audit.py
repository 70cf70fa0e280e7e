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
    # A term open when its journal ends: the process stopped (a clean stop journals nothing
    # more) or the journal was cut. Only the cluster's latest term is still held at the end.
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


# -- one partition ----------------------------------------------------------------------------------


def _zk_order(rows: list[dict]) -> list[list[dict]]:
    """Rows of one partition split into incarnations (a topic deletion ends one) and sorted in
    the order ZooKeeper accepted them (znode version), ties by time."""
    rows = sorted(rows, key=lambda r: (r["time"], _KIND_ORDER.get(r["kind"], 9), r["seq"]))
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


def audit_partition(rows: list[dict], down: DownIndex, broker_failures: list[dict], end_time: int,
                    rules: bool = True):
    """The per-partition rules and measurements. Returns (findings, offline intervals,
    recoveries [(failure, ms or None)], leader deltas [(time, broker, +1/-1)]). `rules=False`:
    the measurements only (the Spark job checks the rules as window functions, replay/rules.py)."""
    findings = []
    if not rows:
        return findings, [], [], []
    topic, partition = rows[0]["topic"], rows[0]["partition"]

    def bad(rule, r, detail):
        findings.append(finding(rule, "violation", detail, journal=r["journal"], file=r.get("file"),
                                line=r.get("line"), seq=r["seq"], time=r["time"], topic=topic, partition=partition))

    for inc in _zk_order(rows) if rules else ():
        prev = None
        max_writer = None
        by_version: dict[int, dict] = {}
        assignments: list = [[], []]
        for r in inc:
            if r["kind"] == "deleted":
                continue
            what = f"{r['kind']} (version {r['zk_version']}, controller epoch {r['controller_epoch']})"
            isr, leader = r["isr"], r["leader"]
            seen = by_version.get(r["zk_version"])
            if seen is not None:  # the same znode version read again (possibly later, under a newer assignment)
                if (seen["leader"], seen["leader_epoch"], list(seen["isr"]), seen["controller_epoch"]) != \
                        (leader, r["leader_epoch"], list(isr), r["controller_epoch"]):
                    bad("version-conflict", r, f"{what}: leader {leader} epoch {r['leader_epoch']} ISR {isr}, but "
                        f"{seen['kind']} at seq {seen['seq']} ({seen['journal']}) recorded leader {seen['leader']} "
                        f"epoch {seen['leader_epoch']} ISR {seen['isr']} for the same version")
                continue
            by_version[r["zk_version"]] = r
            if not isr:
                bad("isr-empty", r, f"{what}: the ISR is empty")
            elif leader != -1 and leader not in isr:
                bad("leader-not-in-isr", r, f"{what}: leader {leader} is not in the ISR {isr}")
            replicas = r["replicas"]
            if replicas and replicas != assignments[-1]:
                assignments = [assignments[-1], replicas]
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
            if r["kind"] == "write":
                if max_writer is not None and r["controller_epoch"] < max_writer["controller_epoch"]:
                    bad("stale-controller-write", r, f"{what}: accepted from controller epoch {r['controller_epoch']} "
                        f"after epoch {max_writer['controller_epoch']} had written (version {max_writer['zk_version']})")
                if max_writer is None or r["controller_epoch"] > max_writer["controller_epoch"]:
                    max_writer = r
            prev = r

    # measurements, in time order
    timed = sorted(rows, key=lambda r: (r["time"], _KIND_ORDER.get(r["kind"], 9), r["zk_version"]))
    changes = []  # (time, leader) whenever the leader value changes; -2 once deleted
    for r in timed:
        leader = -2 if r["kind"] == "deleted" else r["leader"]
        if not changes or changes[-1][1] != leader:
            changes.append((r["time"], leader))
    offline = []
    deltas = []
    for k, (t, leader) in enumerate(changes):
        t_next = changes[k + 1][0] if k + 1 < len(changes) else end_time
        if k > 0 and changes[k - 1][1] >= 0:
            deltas.append((t, changes[k - 1][1], -1))
        if leader >= 0:
            deltas.append((t, leader, 1))
        if leader == -2 or t_next <= t:
            continue
        spans = [(t, t_next)] if leader == -1 else down.down_spans(leader, t, t_next)
        for a, b in spans:
            if offline and offline[-1][1] == a:
                offline[-1] = (offline[-1][0], b)
            else:
                offline.append((a, b))
    recoveries = []
    times = [c[0] for c in changes]
    for f in broker_failures:
        k = bisect.bisect_right(times, f["time"]) - 1
        if k < 0 or changes[k][1] != f["broker"]:
            continue
        recovered = None
        for t, leader in changes[k + 1:]:
            if leader == -2:
                break
            if leader >= 0 and not down.is_down(leader, t):  # a new leader, or the broker back
                recovered = t - f["time"]
                break
        recoveries.append((f["failure"], recovered))
    return findings, offline, recoveries, deltas


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
