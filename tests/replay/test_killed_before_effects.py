"""Events a controller stepped but whose "effects" records it never wrote (killed right after
the decision) are re-executed in its own fold unit, unchecked, so their decisions reach the
history.

`golden/killed-before-effects/node-3/` holds two segments of node 3's journal from
`python -m adapters.cli chaos --duration 600 --seed 6 --partitions 1000 --nodes 5` (2026-12-06,
commit 2fef350): the controller of epoch 39 decides the deletion of `chaos-29`; the StopReplica
answer of seq 1530 completes it (seq 1532 sees `/admin/delete_topics` empty), and the process is
SIGKILLed 290 ms later, before the effects records of seq 1524-1532; its restart begins the
segment of seq 1533 with an empty state's snapshot. Before the fix the replay took those events
for events never stepped, the deletion never reached the history, and the topic's partitions
counted offline until the journal's end (114,926 ms in the whole soak's report).
"""
from __future__ import annotations

from pathlib import Path

from replay import local
from replay.plan import INF, SegmentSummary, plan_units, trailing_unit, unit_of

GOLDEN = Path(__file__).parent / "golden" / "killed-before-effects"


def test_a_deletion_decided_just_before_a_kill_reaches_the_history():
    r = local.replay(GOLDEN)
    assert r.passed
    deleted = [x for x in r.tables["partition_timeline"] if x["topic"] == "chaos-29" and x["kind"] == "deleted"]
    assert sorted(x["partition"] for x in deleted) == list(range(10))
    assert {x["seq"] for x in deleted} == {1530} and {x["epoch"] for x in deleted} == {39}
    offline = [x["offline_ms"] for x in r.tables["partition_offline"] if x["topic"] == "chaos-29"]
    assert len(offline) == 10 and max(offline) < 1_000  # 44,707 ms each when the deletion was lost
    unchecked = [f for f in r.findings if f["rule"] == "no-effects"]
    assert any("9 event(s) before the next snapshot" in f["detail"] for f in unchecked), unchecked
    events = {x["seq"]: x for x in r.tables["events"]}
    assert all(events[s]["digest_ok"] is None for s in range(1524, 1533))  # re-executed, unchecked
    assert events[1530]["type"] == "StopReplicaResponded"


def _segment(path: str, first: int, lines: int, second_effects: int | None, max_effects: int | None) -> SegmentSummary:
    return SegmentSummary("j", path, first, lines, False, "snapshot", first,
                          "effects" if second_effects is not None else "event", second_effects, max_effects)


def test_each_unit_takes_the_unconfirmed_events_before_the_next_snapshot_and_no_other_unit_does():
    """Units whose cut does not move (a segment without effects records) share their `lo`; their
    tails still lie each between its own snapshot and the next one (node 2 of the same soak)."""
    segments = [_segment("a", 304, 102, None, 399), _segment("b", 406, 2, None, None),
                _segment("c", 408, 3, None, 409), _segment("d", 411, 20, None, None)]
    units, _ = plan_units(segments)
    assert [(u.snapshot_seq, u.lo, u.hi, u.tail) for u in units] == [
        (304, 0, 399, 405), (406, 399, 399, 407), (408, 399, 409, 410), (411, 409, INF, INF)]
    owner = {key: (getattr(unit_of(units, key), "snapshot_seq", None),
                   getattr(trailing_unit(units, key), "snapshot_seq", None)) for key in (399, 401, 405, 407, 409, 410, 412)}
    assert owner == {399: (304, None), 401: (408, 304), 405: (408, 304), 407: (408, 406), 409: (408, None),
                     410: (411, 408), 412: (411, None)}
