"""The per-partition walk stopped at a cut and resumed from its state (what an incremental
`kctl replay` does, replay/job.py) gives what one walk of the whole timeline gives: the same
findings after the cut, and the outputs marked final before it plus those of the resumed walk
are the whole walk's offline intervals, leader changes and recoveries. Or it says that it
cannot: a row after the cut older in ZooKeeper order than the walked ones. And the walk finds
the same on the columns the Spark job ships it as on whole rows (plain Python)."""
from __future__ import annotations

import json
import random

import pytest

from replay import audit

KINDS = ("write", "write", "write", "observed", "observed", "conflict", "elected", "deleted")


def timeline(rng: random.Random, n: int) -> list[dict]:
    rows, version, assignment = [], 0, [1, 2, 3]
    for k in range(n):
        if rng.random() < 0.15:
            assignment = rng.sample([1, 2, 3, 4, 5], 3)
        kind = rng.choice(KINDS)
        # versions mostly grow with time; now and then a stale read of an older one, or a repeat
        version = max(0, version + rng.choice([1, 1, 1, 1, 1, 1, 0, 0, -2]))
        isr = rng.sample(assignment + [rng.randint(1, 6)], rng.randint(0, 3))
        rows.append({"time": 1000 + 10 * k + rng.choice([0, 0, 5]), "journal": rng.choice(["node-1", "node-2"]),
                     "topic": "t", "partition": 0, "kind": kind, "seq": k,
                     "leader": rng.choice([-1, -1] + isr + [rng.randint(1, 5)]), "leader_epoch": rng.randint(0, 8),
                     "isr": isr, "controller_epoch": rng.randint(1, 4), "zk_version": version,
                     "epoch": rng.randint(1, 4),  # (the recording controller's: a fenced one's row after a deletion)
                     "replicas": rng.choice([assignment, assignment, []]), "file": "f", "line": k + 1})
    return rows


def setting(rng: random.Random):
    intervals, failures = [], []
    for broker in (1, 2, 3, 4, 5):
        t = 900
        for _ in range(rng.randint(0, 3)):
            start = t + rng.randint(0, 300)
            end = start + rng.randint(5, 200) if rng.random() < 0.8 else None
            intervals.append({"broker": broker, "start": start, "end": end, "state": "down",
                              "reason": "deregistered"})
            if end is None:
                break
            t = end
    downs = sorted(intervals, key=lambda iv: (iv["start"], iv["broker"]))
    failures = [{"failure": k, "broker": iv["broker"], "time": iv["start"]} for k, iv in enumerate(downs)]
    return audit.DownIndex(intervals), audit.FailureIndex(failures)


def loads_of(rng: random.Random, rows: list[dict], end: int) -> audit.LoadIndex:
    """Term starts: some at a row's time (a load that saw the partition), some between rows (one
    that found it gone), none at all in a third of the cases."""
    times = {r["time"] for r in rows}
    starts = set()
    for _ in range(rng.choice([0, 0, 1, 2, 3])):
        starts.add(rng.choice(sorted(times)) if rng.random() < 0.5 else rng.randint(990, end))
    return audit.LoadIndex((t, rng.randint(1, 5)) for t in starts)


def whole(rows, down, failures, end, loads=None):
    w = audit.PartitionWalk(down, failures, rules=True, loads=loads).walk(rows).finish(end)
    return [_finding(f) for f in w.findings], w


def _finding(f):
    return (f["seq"], f["rule"], f["detail"])


def resumed(rows, down, failures, end, cuts, loads=None):
    """A walk from scratch stopped at cuts[0] (its later outputs dropped, as a full run's rows
    after the cut are walked again next time), then one walk per later cut from the state of
    the one before, the state passed through JSON as the checkpoint keeps it."""
    finals = {"intervals": [], "deltas": [], "recoveries": []}
    found = []  # the first walk is a full run's: its findings come from the window rules
    state = None
    bounds = list(cuts) + [None]
    for k, cut in enumerate(bounds):
        lo = cuts[k - 1] if k > 0 else None
        part = [r for r in rows if lo is None or r["time"] >= lo]
        w = audit.PartitionWalk(down, failures, state=state, rules=k > 0, loads=loads).walk(part, cut)
        # kept: the findings before the cut (those after it are found again by the next walk)
        found += [_finding(f) for f in w.findings if cut is None or f["time"] < cut]
        if cut is None:
            w.finish(end)
        for name in finals:
            finals[name] += [x[:-1] for x in getattr(w, name) if cut is None or x[-1]]
        if cut is not None:
            assert all(x[-1] is False for name in finals for x in getattr(w, name)
                       if x[0] >= cut and name != "recoveries")
            state = json.loads(json.dumps(w.state))
    return found, finals, w


def test_a_walk_resumed_at_cuts_gives_the_whole_walk():
    rng = random.Random(37)
    resumed_ok = needs_whole = ended_by_a_load = 0
    for case in range(3000):
        rows = timeline(rng, rng.randint(1, 25))
        down, failures = setting(rng)
        end = 1000 + 10 * len(rows) + rng.randint(0, 100)
        times = sorted({r["time"] for r in rows} | {rng.randint(990, end)})
        cuts = sorted(rng.sample(times, min(len(times), rng.randint(1, 3))))
        loads = loads_of(rng, rows, end)
        ended_by_a_load += any(t not in times and t > rows[0]["time"] for t in loads.times)
        want_found, w = whole(rows, down, failures, end, loads)
        # a run from scratch walks every row once, stopping at its cut: the same findings, also
        # when a stale read after the cut makes it walk them all again
        cut_walk = audit.PartitionWalk(down, failures, rules=True, loads=loads).walk(rows, cuts[0]).finish(end)
        assert sorted(map(_finding, cut_walk.findings)) == sorted(want_found), case
        try:
            got_found, finals, last = resumed(rows, down, failures, end, cuts, loads)
        except audit.NeedsWholeWalk:
            needs_whole += 1
            continue
        resumed_ok += 1
        assert sorted(got_found) == sorted(f for f in want_found if rows[f[0]]["time"] >= cuts[0]), case
        assert finals["intervals"] == [x[:-1] for x in w.intervals], case
        assert finals["deltas"] == [x[:-1] for x in w.deltas], case
        assert sorted(finals["recoveries"]) == sorted(x[:-1] for x in w.recoveries), case
        assert (last.offline_ms, last.offline_count) == (w.offline_ms, w.offline_count), case
    # both paths ran, and the resumed one most of the time
    assert resumed_ok > 1800 and needs_whole > 100, (resumed_ok, needs_whole)
    assert ended_by_a_load > 500, ended_by_a_load  # (term starts that found the partition gone)


def test_a_stale_version_after_the_cut_needs_the_whole_walk_and_a_deletion_starts_afresh():
    down, failures = audit.DownIndex([]), audit.FailureIndex([])
    base = {"journal": "n", "topic": "t", "partition": 0, "leader_epoch": 1, "isr": [1], "leader": 1,
            "controller_epoch": 1, "replicas": [1, 2], "file": "f", "line": 1}
    rows = [dict(base, time=100, kind="write", seq=1, zk_version=3), dict(base, time=200, kind="observed", seq=2,
                                                                           zk_version=2)]
    w = audit.PartitionWalk(down, failures).walk(rows, cut=150)
    with pytest.raises(audit.NeedsWholeWalk):
        audit.PartitionWalk(down, failures, state=w.state, rules=True).walk(rows[1:])
    rows = [dict(base, time=100, kind="write", seq=1, zk_version=3), dict(base, time=120, kind="deleted", seq=2,
                                                                           zk_version=3),
            dict(base, time=200, kind="write", seq=3, zk_version=0)]
    w = audit.PartitionWalk(down, failures).walk(rows, cut=150)
    assert w.state["rules"] is None  # the incarnation the cut saw had ended
    audit.PartitionWalk(down, failures, state=w.state, rules=True).walk(rows[2:]).finish(300)


RULE_KINDS = ("write", "write", "write", "observed", "conflict", "elected", "deleted")


def rule_breaking_timeline(rng: random.Random, topic: str, partition: int, seq0: int) -> list[dict]:
    rows = []
    assignment = [1, 2, 3]
    for k in range(rng.randint(1, 14)):
        kind = rng.choice(RULE_KINDS)
        if rng.random() < 0.2:
            assignment = rng.sample([1, 2, 3, 4, 5], 3)
        isr = rng.sample(assignment + [rng.randint(1, 6)], rng.randint(0, 3))
        rows.append({"time": 1000 + rng.randint(0, 40) * 10, "journal": rng.choice(["node-1", "node-2"]),
                     "controller_id": 1, "epoch": 1, "topic": topic, "partition": partition,
                     "leader": rng.choice([-1] + isr + [rng.randint(1, 6)]), "leader_epoch": rng.randint(0, 6),
                     "isr": isr, "controller_epoch": rng.randint(1, 4), "zk_version": rng.randint(0, 5),
                     "replicas": rng.choice([assignment, assignment, []]), "adding": [], "removing": [],
                     "kind": kind, "change": None, "cause_type": "X", "cause_seq": seq0 + k, "seq": seq0 + k,
                     "file": f"/j/{topic}/segment.jsonl", "line": k + 1})
    return rows

def test_the_walk_reads_only_the_columns_the_job_gives_it():
    """The Spark job ships the executors' walks only `job.WALKED` of each timeline row: the
    findings and measurements come out the same as from whole rows, on random timelines made to
    break every rule (versions read twice with other values, ISRs outside the assignment across
    reassignments, leader epochs going back, stale writers, deletions starting new incarnations)."""
    from replay import job

    rng = random.Random(7)
    down = audit.DownIndex([{"broker": 2, "start": 1000, "end": 1200, "state": "down"},
                            {"broker": 3, "start": 1100, "end": 1400, "state": "down"}])
    failures = [{"failure": 0, "broker": 2, "time": 1000}, {"failure": 1, "broker": 3, "time": 1100}]
    seen = {"offline": 0, "recoveries": 0, "deltas": 0}
    rules = set()
    for k in range(400):
        rows = rule_breaking_timeline(rng, f"t{k % 5}", k, 100 * k)
        whole = audit.audit_partition(rows, down, failures, 2000)
        narrow = audit.audit_partition([{c: r[c] for c in job.WALKED} for r in rows], down, failures, 2000)
        assert narrow == whole
        rules |= {f["rule"] for f in whole[0]}
        for kind, part in zip(("offline", "recoveries", "deltas"), whole[1:]):
            seen[kind] += bool(part)
    assert min(seen.values()) > 0, seen  # offline spans, recoveries and leader changes were measured
    assert rules == {"version-conflict", "isr-empty", "leader-not-in-isr", "isr-outside-assignment", "leader-epoch",
                     "stale-controller-write"}


def test_a_fenced_controllers_row_after_a_deletion_does_not_bring_the_partition_back():
    """The soak of 2026-11-28 (seed 5): the controller of epoch 10 deleted the topic; 54 ms later
    the fenced controller of epoch 9 recorded a version conflict it had read (leader -1), and the
    partition counted as offline from then to the end of the history. A row from an older
    controller after the deletion is ignored; one from a newer controller is a new topic."""
    down, failures = audit.DownIndex([]), audit.FailureIndex([])

    def row(t, kind, leader, epoch, seq):
        return {"time": t, "journal": "node-1", "topic": "t", "partition": 0, "kind": kind, "seq": seq,
                "leader": leader, "leader_epoch": 1, "isr": [1] if leader >= 0 else [1], "controller_epoch": epoch,
                "zk_version": seq, "replicas": [1], "file": "f", "line": seq + 1, "epoch": epoch}

    rows = [row(100, "write", 1, 10, 0), row(200, "deleted", -1, 10, 1), row(210, "conflict", -1, 9, 2)]
    w = audit.PartitionWalk(down, failures).walk(rows).finish(10_000)
    assert w.offline_ms == 0 and w.offline_count == 0
    # the same topic created again by a newer controller, leaderless for 50 ms: counted
    again = rows + [row(300, "write", -1, 11, 3), row(350, "write", 1, 11, 4)]
    w = audit.PartitionWalk(down, failures).walk(again).finish(10_000)
    assert (w.offline_ms, w.offline_count) == (50, 1)
    # resumed from a cut between the deletion and the fenced row: the same
    first = audit.PartitionWalk(down, failures).walk(rows[:2], cut=205)
    w = audit.PartitionWalk(down, failures, state=first.state).walk(rows[2:]).finish(10_000)
    assert w.offline_ms == 0 and w.offline_count == 0

