"""The checkpoint of incremental audits: what an earlier `kctl replay` over the same `--out`
already audited, so that the next run re-executes only what it has not (plain Python; the job
reads and writes the manifest through Hadoop's file system, `replay/job.py`).

Theory of operation
-------------------
Segments are known by their *content*: the SHA-256 of the decompressed text (a closed segment
that the writer later gzips keeps its hash; a renamed or touched file is not "new"). A file whose
path, size and modification time are those recorded when it was hashed is not read again (the
quick check of `rsync` and `git status`), so a later run reads only new and grown segments. For
every audited segment the manifest keeps its hash, its length, its size and time on disk, its per-segment summary
(`plan.SegmentSummary`), its cluster id and its line findings, so a later run neither reads nor
checks it again.

Fold units (`replay.plan`) are known by a *unit key*: the hash of the unit's journal, its range
of seqs and the content hashes of every segment it can take records from (from the previous
unit's head segment through the next unit's head segment: the tail of a batch carried over a
roll, the effects records written after it). A unit whose key the manifest holds was re-executed
already; its rows are in the tables and its small results (the unit summary with the hashes of
its head and final states, term, broker and reassignment changes, the write decisions and
outcomes left open at its edges) are in the manifest. The cross-unit checks and the stitching of
writes across units run over everything on every run, from those small results, and the
per-partition audit resumes from the state it kept at the last run's cut (replay/carry.py), so
the verdict covers the whole history and a rule that spans a segment boundary still sees it. No replayed state has to be stored: every unit starts from the
snapshot at the head of its own segment, and the state at its end is kept as the hash the next
unit's snapshot is compared with.

A journal that grows gives its last unit a new range (its end was "the end of the journal"), so
that unit is re-executed with the new segments; nothing else is. A segment whose content differs
from what was audited is a `segment-changed` violation (a `segment-removed` one when it is gone),
kept in every later verdict until `--full` audits everything from scratch; a journal's last
segment that only grew (the audited text is a prefix of the new one) was still open, and is
simply audited again.

Table rows are appended under `<table>/journal=<journal>/date=<UTC day>/unit=<unit id>`, the unit
id being the first 16 hex digits of the unit key, so that the rows of a superseded unit are
removed by deleting its directories. Rows computed over the whole history on every run (the
audit's findings, writes stitched across units) are under `unit=cluster` and replaced each run.
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import Iterable, NamedTuple

from .plan import INF, SegmentSummary, Unit, by_journal, finding

VERSION = 1
PATH = "_checkpoint/manifest.json"
CLUSTER_UNIT = "cluster"


class Hashed(NamedTuple):
    path: str
    journal: str
    name_seq: int
    sha: str  # of the decompressed text
    chars: int
    prefix_sha: str | None  # of the first `chars` characters the manifest recorded (None: not asked)


def unit_id(key: str) -> str:
    return key[:16]


def utc_day(ms: int | None) -> str | None:
    if ms is None:
        return None
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000))


class Manifest:
    """What earlier runs audited. `segments`: "<journal>|<name_seq>" -> entry; `units`: unit key
    -> entry; `changes`: findings about audited segments that changed or vanished."""

    def __init__(self, data: dict | None = None):
        data = data or {}
        if data and data.get("version") != VERSION:
            raise ValueError(f"checkpoint manifest version {data.get('version')!r}, expected {VERSION}")
        self.segments: dict[str, dict] = data.get("segments", {})
        self.units: dict[str, dict] = data.get("units", {})
        self.changes: list[dict] = data.get("changes", [])
        self.runs: list[dict] = data.get("runs", [])
        self.audit: dict | None = data.get("audit")  # the per-partition audit's carry (replay/carry.py)

    @classmethod
    def parse(cls, text: str | None) -> "Manifest":
        return cls(json.loads(text) if text else None)

    def dumps(self) -> str:
        return json.dumps({"version": VERSION, "segments": self.segments, "units": self.units,
                           "changes": self.changes, "runs": self.runs[-100:], "audit": self.audit},
                          separators=(",", ":"))

    @property
    def empty(self) -> bool:
        return not self.segments and not self.units

    def prefix_lengths(self, listed: Iterable[tuple[str, str, int]]) -> dict[str, int]:
        """For the listed files (path, journal, name_seq) that the manifest knows: the length of
        the text it audited (the hash job also hashes that prefix of the current text)."""
        out = {}
        for path, journal, name_seq in listed:
            seen = self.segments.get(seg_key(journal, name_seq))
            if seen is not None:
                out[path] = seen["chars"]
        return out

    def unchanged_on_disk(self, listed: Iterable[tuple[str, str, int]],
                          on_disk: dict[str, list[int]]) -> dict[str, Hashed]:
        """The listed files (path, journal, name_seq) whose size and modification time are what
        they were when an earlier run hashed them under the same path: their recorded hash is
        taken without reading them again (as `git status` trusts its index and `rsync` its
        quick check). A file rewritten in place is still seen unless the writer restored both
        its size and its modification time to the millisecond; `--full` reads everything."""
        out = {}
        for path, journal, name_seq in listed:
            seen = self.segments.get(seg_key(journal, name_seq))
            if seen is not None and seen["file"] == path and seen.get("disk") == on_disk.get(path):
                out[path] = Hashed(path, journal, name_seq, seen["sha"], seen["chars"], None)
        return out

    def classify(self, hashed: list[Hashed], display) -> tuple[dict[str, str], list[dict]]:
        """Each current segment's status: "known" (audited, same content), "new", "grown" (the
        audited text is a prefix of it and it was its journal's last segment), "changed";
        plus new findings for changed and removed segments (also recorded in `changes`)."""
        status, found = {}, []
        current = {seg_key(h.journal, h.name_seq) for h in hashed}
        journals = {h.journal for h in hashed}
        for h in hashed:
            seen = self.segments.get(seg_key(h.journal, h.name_seq))
            if seen is None:
                status[h.path] = "new"
            elif seen["sha"] == h.sha:
                status[h.path] = "known"
            elif seen["last"] and h.prefix_sha == seen["sha"] and h.chars > seen["chars"]:
                status[h.path] = "grown"
            else:
                status[h.path] = "changed"
                found.append(finding(
                    "segment-changed", "violation",
                    f"the segment's content changed after it was audited (SHA-256 {seen['sha'][:12]}, "
                    f"{seen['chars']} characters, now {h.sha[:12]}, {h.chars}); audited again, and reported until "
                    "`kctl replay --full`", journal=display(h.journal), file=h.path, line=1, seq=h.name_seq))
        for key, seen in sorted(self.segments.items()):
            journal, name_seq = key.rsplit("|", 1)
            if journal in journals and key not in current:
                found.append(finding(
                    "segment-removed", "violation",
                    f"{seen['file'].rsplit('/', 1)[-1]} was audited (SHA-256 {seen['sha'][:12]}) but is no longer in "
                    "the journal; reported until `kctl replay --full`", journal=display(journal), file=seen["file"],
                    line=1, seq=int(name_seq)))
                del self.segments[key]
        self.changes.extend(found)
        return status, found

    def summary_of(self, h: Hashed) -> SegmentSummary:
        s = self.segments[seg_key(h.journal, h.name_seq)]["summary"]
        return SegmentSummary(h.journal, h.path, *s)

    def cached_line_findings(self, h: Hashed, display) -> list[dict]:
        out = []
        for f in self.segments[seg_key(h.journal, h.name_seq)]["line_findings"]:
            out.append({**f, "journal": display(h.journal), "file": h.path})
        return out

    def record_segment(self, h: Hashed, summary: SegmentSummary, cluster_id: str | None, last: bool,
                       line_findings: list[dict]) -> None:
        self.segments[seg_key(h.journal, h.name_seq)] = {
            "sha": h.sha, "chars": h.chars, "last": last, "file": h.path, "cluster_id": cluster_id,
            "summary": list(summary[2:]),
            "line_findings": [{k: v for k, v in f.items() if k not in ("journal", "file")} for f in line_findings]}

    def cluster_id(self, h: Hashed) -> str | None:
        return self.segments[seg_key(h.journal, h.name_seq)]["cluster_id"]


def seg_key(journal: str, name_seq: int) -> str:
    return f"{journal}|{name_seq}"


def _spans(units: list[Unit], summaries: list[SegmentSummary]):
    """(unit, the segments of its journal it can take records from), for every unit."""
    segs = by_journal(summaries)
    per_journal: dict[str, list[Unit]] = {}
    for u in units:
        per_journal.setdefault(u.journal, []).append(u)
    for journal, us in per_journal.items():
        us.sort(key=lambda u: u.index)
        name_of = {s.path: s.name_seq for s in segs[journal]}
        for k, u in enumerate(us):
            first = name_of[us[k - 1].head_path] if k > 0 else -1
            last = name_of[us[k + 1].head_path] if k + 1 < len(us) else INF
            yield u, [s for s in segs[journal] if first <= s.name_seq <= last]


def unit_keys(units: list[Unit], summaries: list[SegmentSummary], sha_of: dict[str, str]) -> dict[int, str]:
    """The key of every unit (see the module docstring)."""
    keys = {}
    for u, span in _spans(units, summaries):
        text = json.dumps([VERSION, u.journal, u.snapshot_seq, u.lo, min(u.hi, INF), min(u.tail, INF),
                           [(s.name_seq, sha_of[s.path]) for s in span]])
        keys[u.unit] = hashlib.sha256(text.encode()).hexdigest()
    return keys


def reads_of(units: list[Unit], all_units: list[Unit], summaries: list[SegmentSummary]) -> set[str]:
    """The segment files that the given units (among all the plan's units) can take records from."""
    wanted = {u.unit for u in units}
    return {s.path for u, span in _spans(all_units, summaries) if u.unit in wanted for s in span}


def closed(listed: list[tuple[str, str, int]]) -> set[str]:
    """The files that are not their journal's last segment: closed, the writer appends no more."""
    last: dict[str, tuple[int, str]] = {}
    for path, journal, name_seq in listed:
        if journal not in last or name_seq > last[journal][0]:
            last[journal] = (name_seq, path)
    ends = {p for _, p in last.values()}
    return {path for path, _, _ in listed if path not in ends}
