"""Which records each fold re-executes, and what the segment layout itself says is wrong.

Works on one small summary per segment file (a few numbers, whoever computed them: Spark SQL on
the executors, or `replay.local` reading files directly), so the driver-side work stays tiny.

Fold units
----------
Every segment that starts with a "snapshot" record starts a *unit*: the records re-executed from
that snapshot until the next one. Where exactly a unit begins is subtle, because the controller
loop (adapters/controller/loop.py) appends a whole batch of events before it steps any of them, and the
writer takes the head snapshot of a new segment at the first append after the roll, which may
fall in the middle of a batch. The snapshot is the loop's state at that moment: every event whose
"effects" record was already appended has been applied, and if the record that triggered the
roll is itself an "effects" record, its event has been applied too. So the *cut* of snapshot S is

    c(S) = the largest event_seq among "effects" records before S, or of the record at S+1
           when that record is an "effects" record (0 when there is none),

and the unit that starts at S re-executes the events with c(S) < seq <= c(next snapshot). Events
journaled before S but stepped after it (the tail of a batch) are carried into this unit; events
journaled before S that never got an "effects" record were never stepped by the live loop and are
skipped. Each "effects" record goes to the unit of the event it describes.

Not always: a process killed after stepping an event and before writing its effects record (they
are written a little after the decision) leaves events that were stepped and have no effects
record, and the next snapshot is the restarted process's empty state. So the unit before S also
takes the records up to S (its `tail`): the events of (c(S), S) that no effects record confirms
anywhere are re-executed there, on the state they followed, and reported unchecked
("no-effects"), as the events at the very end of a journal are; those confirmed after S are the
next unit's. (Found in a soak: a topic's deletion decided by such events was missing from the
history, and its partitions counted offline until the end.) An event that a journal failure
kept from being stepped is re-executed the same way: the journal cannot tell the two apart.
"""
from __future__ import annotations

import bisect
from operator import attrgetter
from typing import Iterable, NamedTuple

INF = 1 << 62


class SegmentSummary(NamedTuple):
    journal: str  # the journal directory (a path or URI)
    path: str  # the segment file
    name_seq: int  # the first seq, from the file name
    lines: int  # lines in the file, bad ones included
    torn: bool  # the last line has no trailing newline
    head_type: str | None  # type of the record on line 1 (None if line 1 is bad)
    head_seq: int | None
    second_type: str | None  # type of the record on line 2
    second_event_seq: int | None  # its body.event_seq when it is an "effects" record
    max_effects_event_seq: int | None  # over the "effects" records of the file


class Unit(NamedTuple):
    unit: int  # global id, 0..n-1
    journal: str
    head_path: str
    snapshot_seq: int
    lo: int  # re-executes events with lo < seq <= hi
    hi: int
    index: int  # position of the unit within its journal
    tail: int = INF  # and, up to the next snapshot (tail), the events no effects record confirms


def finding(rule: str, severity: str, detail: str, *, journal=None, file=None, line=None, seq=None, time=None,
            topic=None, partition=None) -> dict:
    """One row of the findings table."""
    return {"rule": rule, "severity": severity, "journal": journal, "file": file, "line": line, "seq": seq,
            "time": time, "topic": topic, "partition": partition, "detail": detail}


def by_journal(summaries: Iterable[SegmentSummary]) -> dict[str, list[SegmentSummary]]:
    out: dict[str, list[SegmentSummary]] = {}
    for s in summaries:
        out.setdefault(s.journal, []).append(s)
    for segs in out.values():
        segs.sort(key=lambda s: s.name_seq)
    return dict(sorted(out.items()))


def check_segments(summaries: Iterable[SegmentSummary], display=lambda j: j) -> list[dict]:
    """Gaps and overlaps between consecutive segments (a missing segment shows as a gap), and
    torn last lines (tolerated only at the very end of a journal)."""
    findings = []
    for journal, segs in by_journal(summaries).items():
        name = display(journal)
        for k, seg in enumerate(segs):
            last = k == len(segs) - 1
            if seg.torn:
                if last:
                    findings.append(finding(
                        "torn-tail", "warning", "the last line has no trailing newline (an interrupted write; "
                        "the writer truncates it when the journal is reopened)",
                        journal=name, file=seg.path, line=seg.lines))
                else:
                    findings.append(finding(
                        "corrupt-record", "violation", "a line without its trailing newline in a segment that is not "
                        "the journal's last", journal=name, file=seg.path, line=seg.lines))
            if k == 0:
                continue
            prev = segs[k - 1]
            expected = prev.name_seq + prev.lines
            if seg.name_seq > expected:
                findings.append(finding(
                    "missing-records", "violation",
                    f"records {expected}..{seg.name_seq - 1} are missing between {_base(prev.path)} and "
                    f"{_base(seg.path)} (a missing segment?)", journal=name, file=seg.path, line=1, seq=expected))
            elif seg.name_seq < expected:
                findings.append(finding(
                    "overlapping-segments", "violation",
                    f"{_base(seg.path)} starts at seq {seg.name_seq} but {_base(prev.path)} already reached "
                    f"seq {expected - 1}", journal=name, file=seg.path, line=1, seq=seg.name_seq))
    return findings


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def plan_units(summaries: Iterable[SegmentSummary], display=lambda j: j) -> tuple[list[Unit], list[dict]]:
    """The fold units of every journal (see the module docstring) and the findings about records
    that no unit can re-execute (before a journal's first snapshot)."""
    units: list[Unit] = []
    findings: list[dict] = []
    for journal, segs in by_journal(summaries).items():
        heads = []  # (segment, cut)
        running = 0
        for seg in segs:
            if seg.head_type == "snapshot" and seg.head_seq is not None:
                cut = running
                if seg.second_type == "effects" and seg.second_event_seq is not None:
                    cut = max(cut, seg.second_event_seq)
                if heads:
                    cut = max(cut, heads[-1][1])
                heads.append((seg, cut))
            if seg.max_effects_event_seq is not None:
                running = max(running, seg.max_effects_event_seq)
        if not heads:
            findings.append(finding("no-snapshot", "warning", "no segment starts with a snapshot: nothing of this "
                                    "journal can be re-executed", journal=display(journal), file=segs[0].path))
            continue
        if segs[0].head_type != "snapshot":
            findings.append(finding(
                "no-snapshot", "warning", f"records before seq {heads[0][0].name_seq} precede the journal's first "
                "snapshot and are not re-executed", journal=display(journal), file=segs[0].path, line=1))
        for k, (seg, cut) in enumerate(heads):
            hi = heads[k + 1][1] if k + 1 < len(heads) else INF
            tail = max(hi, heads[k + 1][0].head_seq - 1) if k + 1 < len(heads) else INF
            units.append(Unit(len(units), journal, seg.path, seg.head_seq, cut, hi, k, tail))
    return units, findings


def mixed_clusters(cluster_ids: Iterable[tuple[str, str, str | None]], display=lambda j: j) -> str | None:
    """Why these journals cannot be audited as one cluster, or None. `cluster_ids`: (journal,
    segment file, cluster id recorded in its snapshot head, None when it records none, as
    journals written before the id was recorded). Journals of one cluster share its
    `/cluster/id`; a journal that records none is taken to belong with the others."""
    per_journal: dict[str, dict[str, str]] = {}
    for journal, path, cid in cluster_ids:
        if cid:
            per_journal.setdefault(journal, {}).setdefault(cid, path)
    for journal, ids in sorted(per_journal.items()):
        if len(ids) > 1:
            where = ", ".join(f"{cid} from {_base(path)}" for cid, path in sorted(ids.items(), key=lambda kv: kv[1]))
            return f"journal {display(journal)} holds segments of {len(ids)} clusters ({where}); replay each on its own"
    clusters: dict[str, list[str]] = {}
    for journal, ids in per_journal.items():
        clusters.setdefault(next(iter(ids)), []).append(display(journal))
    if len(clusters) > 1:
        parts = "; ".join(f"{cid} ({', '.join(sorted(js))})" for cid, js in sorted(clusters.items()))
        return (f"the journals belong to {len(clusters)} clusters: {parts}; replay each cluster on its own "
                "(one --journal per cluster, or --journal with several directories of one cluster)")
    return None


def _last_before(units_of_journal: list[Unit], key: int, field) -> Unit | None:
    """The last unit whose `field` is below `key` (units of one journal, in order; the field
    never decreases along them)."""
    k = bisect.bisect_left(units_of_journal, key, key=field)
    return units_of_journal[k - 1] if k else None


def unit_of(units_of_journal: list[Unit], key: int) -> Unit | None:
    """The unit whose range holds `key` (units of one journal, in order)."""
    u = _last_before(units_of_journal, key, attrgetter("lo"))
    return u if u is not None and key <= u.hi else None


def trailing_unit(units_of_journal: list[Unit], key: int) -> Unit | None:
    """The unit whose tail holds `key` (after its snapshot and its cut, before the next snapshot;
    see the module docstring), or None: the record goes there too, besides the unit `unit_of`
    gives. Tails do not overlap: each lies between its unit's snapshot and the next."""
    u = _last_before(units_of_journal, key, attrgetter("snapshot_seq"))
    return u if u is not None and u.hi < key <= u.tail else None
