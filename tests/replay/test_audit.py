"""The audit rules on hand-made history rows."""
from __future__ import annotations

from replay import audit
from replay.plan import SegmentSummary, check_segments, plan_units, unit_of

T = 1_700_000_000_000


def row(t, leader, epoch, isr, version, kind="write", cepoch=1, replicas=(1, 2, 3), journal="node-1", seq=None):
    return {"time": T + t, "journal": journal, "controller_id": 1, "epoch": cepoch, "topic": "t", "partition": 0,
            "leader": leader, "leader_epoch": epoch, "isr": list(isr), "controller_epoch": cepoch,
            "zk_version": version, "replicas": list(replicas), "adding": [], "removing": [], "kind": kind,
            "change": None, "cause_type": "X", "cause_seq": seq or t, "seq": seq or t}


def rules(rows, intervals=(), failures=(), end=10_000):
    findings, offline, recoveries, deltas = audit.audit_partition(rows, audit.DownIndex(list(intervals)),
                                                                  list(failures), T + end)
    return [f["rule"] for f in findings], offline, recoveries, deltas


def test_a_clean_history_has_no_findings():
    got, offline, _, deltas = rules([row(0, 1, 0, (1, 2, 3), 0), row(10, 2, 1, (2, 3), 1),
                                     row(20, 2, 1, (2, 3, 1), 2, kind="observed"), row(30, -1, 2, (2,), 3),
                                     row(40, 2, 3, (2,), 4)])
    assert got == []
    assert offline == [(T + 30, T + 40)]
    assert (T + 10, 1, -1) in deltas and (T + 10, 2, 1) in deltas


def test_invariants_at_every_point():
    got, *_ = rules([row(0, 1, 0, (1, 2, 3), 0), row(10, 4, 1, (2, 3), 1), row(20, 2, 2, (2, 9), 2),
                     row(30, 2, 3, (), 3)])
    assert got == ["leader-not-in-isr", "isr-outside-assignment", "isr-empty"]


def test_the_last_isr_member_kept_without_a_leader_is_not_outside_the_assignment():
    # a re-reassignment drops replica 2, the only ISR member: Kafka keeps it as the ISR with no
    # leader rather than empty the ISR (found on a generated journal of 625,000 events)
    got, *_ = rules([row(0, 2, 0, (2,), 0, replicas=(4, 3, 2, 5, 1)), row(10, -1, 1, (2,), 1, replicas=(4, 3, 1, 5))])
    assert got == []
    # with a leader, or with more members, it is still a violation
    got, *_ = rules([row(0, 2, 0, (2,), 0, replicas=(4, 3, 2)), row(10, 3, 1, (3, 2), 1, replicas=(4, 3, 1)),
                     row(20, -1, 2, (2, 9), 2, replicas=(4, 3, 1))])
    assert got == ["isr-outside-assignment", "isr-outside-assignment"]


def test_leader_epochs_strictly_increase_in_znode_order_across_controllers():
    # a controller write that does not raise the epoch, and an observed value that lowers it
    got, *_ = rules([row(0, 1, 3, (1, 2), 0, cepoch=1), row(10, 2, 3, (2, 1), 1, cepoch=2, journal="node-2"),
                     row(20, 2, 1, (2, 1), 2, kind="observed")])
    assert got == ["leader-epoch", "leader-epoch"]


def test_order_is_the_znode_version_not_the_confirmation_time():
    # the old controller's confirmation arrives late, but ZooKeeper accepted it first: fine
    got, *_ = rules([row(50, 1, 1, (1, 2), 1, cepoch=1), row(10, 2, 2, (2, 1), 2, cepoch=2, journal="node-2")])
    assert got == []


def test_no_write_accepted_from_an_older_controller_after_a_newer_one():
    got, *_ = rules([row(0, 1, 1, (1, 2), 1, cepoch=2), row(10, 2, 2, (2, 1), 2, cepoch=1, journal="node-2")])
    assert got == ["stale-controller-write"]


def test_two_values_for_one_version_conflict():
    got, *_ = rules([row(0, 1, 1, (1, 2), 1), row(5, 2, 1, (1, 2), 1, kind="observed")])
    assert got == ["version-conflict"]


def test_topic_recreation_restarts_the_epochs():
    deleted = dict(row(20, -1, 0, (), 2, kind="deleted"), replicas=[])
    got, *_ = rules([row(0, 1, 0, (1,), 0), row(10, 1, 1, (1,), 1), deleted, row(30, 2, 0, (2,), 0)])
    assert got == []


def test_offline_when_the_leaders_broker_is_down_and_recovery_after_failures():
    intervals = [{"broker": 1, "state": "down", "start": T + 100, "end": T + 300}]
    failures = [{"failure": 0, "broker": 1, "time": T + 100}]
    got, offline, recoveries, _ = rules([row(0, 1, 0, (1, 2), 0), row(150, 2, 1, (2,), 1)], intervals, failures)
    assert got == [] and offline == [(T + 100, T + 150)] and recoveries == [(0, 50)]
    # never re-elected: unrecovered
    _, offline, recoveries, _ = rules([row(0, 1, 0, (1, 2), 0)], intervals, failures, end=200)
    assert offline == [(T + 100, T + 200)] and recoveries == [(0, None)]
    rows_, summary = audit.recovery_stats([(0, 50), (0, 70), (0, None)], failures)
    assert rows_[0]["recovery_ms"] == 70 and rows_[0]["unrecovered"] == 1 and summary["max"] == 70


def test_terms_one_controller_per_epoch_and_epochs_increasing():
    def ev(journal, kind, epoch, t, seq):
        return {"journal": journal, "controller_id": int(journal[-1]), "kind": kind, "epoch": epoch, "time": T + t,
                "seq": seq, "reason": None if kind == "start" else "resigned"}
    ok = [ev("node-1", "start", 1, 0, 1), ev("node-1", "end", 1, 50, 9), ev("node-2", "start", 2, 60, 3)]
    terms, findings = audit.controller_terms(ok)
    assert findings == [] and [t["epoch"] for t in terms] == [1, 2] and terms[1]["end"] is None
    dup = ok + [ev("node-3", "start", 2, 70, 5)]
    assert [f["rule"] for f in audit.controller_terms(dup)[1]] == ["duplicate-epoch", "epoch-order"][:1]
    back = ok + [ev("node-3", "start", 1, 80, 5)]
    assert {f["rule"] for f in audit.controller_terms(back)[1]} == {"duplicate-epoch", "epoch-order"}


def test_unclean_elections_only_where_allowed():
    base = {"journal": "node-1", "cause_seq": 3, "time": T, "topic": "t", "partition": 0, "leader": 2,
            "leader_epoch": 4, "outcome": "landed"}
    assert audit.check_elections([dict(base, unclean=True, unclean_allowed=True, admin_requested=False),
                                  dict(base, unclean=True, unclean_allowed=False, admin_requested=True),
                                  dict(base, unclean=False, unclean_allowed=False, admin_requested=False)]) == []
    found = audit.check_elections([dict(base, unclean=True, unclean_allowed=False, admin_requested=False)])
    assert [f["rule"] for f in found] == ["unclean-not-allowed"]


def test_broker_intervals_from_listings_and_changes():
    def ev(change, broker, t, seq, journal="node-1"):
        return {"journal": journal, "epoch": 1, "time": T + t, "seq": seq, "broker": broker, "broker_epoch": 1,
                "change": change}
    intervals = audit.broker_intervals([ev("present", 1, 0, 1), ev("present", 2, 0, 1), ev("down", 2, 10, 5),
                                        ev("up", 2, 30, 8), ev("bounce", 1, 40, 9), ev("present", 1, 50, 1, "node-2")])
    downs = [(iv["broker"], iv["start"] - T, iv["end"] - T if iv["end"] else None, iv["reason"])
             for iv in intervals if iv["state"] == "down"]
    assert downs == [(1, 40, 40, "bounce (new session)"), (2, 10, 30, "deregistered"), (2, 50, None, "absent at election")]
    assert [f["broker"] for f in audit.failures(intervals)] == [2]


def test_percentiles_are_nearest_rank():
    assert audit.percentile(list(range(1, 101)), 50) == 50 and audit.percentile(list(range(1, 101)), 99) == 99
    assert audit.summary([]) == {"count": 0, "median": None, "p99": None, "max": None}


def seg(journal, seq, lines, head="snapshot", second=None, second_event=None, max_eff=None, torn=False):
    return SegmentSummary(journal, f"{journal}/segment-{seq:020d}.jsonl.gz", seq, lines, torn, head, seq, second,
                          second_event, max_eff)


def test_gaps_overlaps_and_torn_tails_between_segments():
    segs = [seg("a", 1, 10), seg("a", 11, 5), seg("a", 20, 3, torn=True), seg("b", 1, 4, torn=True), seg("b", 3, 2)]
    found = sorted((f["rule"], f["severity"], f["journal"], f["seq"] or 0) for f in check_segments(segs))
    assert found == [("corrupt-record", "violation", "b", 0), ("missing-records", "violation", "a", 16),
                     ("overlapping-segments", "violation", "b", 3), ("torn-tail", "warning", "a", 0)]


def test_units_cut_where_the_loop_had_applied_the_events():
    # a: the roll came from an effects append (its event applied), b: from an event append
    segs = [seg("a", 1, 10, max_eff=8), seg("a", 11, 6, second="effects", second_event=9, max_eff=12),
            seg("a", 17, 4, max_eff=16)]
    units, findings = plan_units(segs)
    assert findings == []
    assert [(u.snapshot_seq, u.lo, u.hi) for u in units] == [(1, 0, 9), (11, 9, 12), (17, 12, 1 << 62)]
    assert unit_of(units, 9).snapshot_seq == 1 and unit_of(units, 10).snapshot_seq == 11
    assert unit_of(units, 13).snapshot_seq == 17
