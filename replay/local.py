"""The whole replay and audit in one Python process, without Spark.

The reference the Spark job is tested against, and what the unit tests use: it reads segment
files itself (plain and .gz), checks every line, and then runs exactly the same planning, fold,
stitching and audit functions as `replay.job`.

    python -m replay.local --journal DIR [--out DIR]   # prints the summary; --out writes the report
"""
from __future__ import annotations

import argparse
import os
import sys
import zlib
from pathlib import Path

from . import audit, history
from .fold import UnitFold
from adapters.journal.format import InvalidRecord, find_journals, list_segments
from .collector import gc_paused
from .records import verify_line
from .tasks import read_segment, split_lines
from .plan import SegmentSummary, check_segments, finding, mixed_clusters, plan_units, trailing_unit, unit_of


def segment_lines(path: Path) -> tuple[list[bytes], bool, str | None]:
    """The lines of a segment (without "\\n"), whether the last one is torn, and a read error
    (the Spark job asks it for the error of a segment Spark could not read)."""
    try:
        data = read_segment(str(path))
    except (OSError, EOFError, zlib.error) as exc:
        return [], False, str(exc)
    return (*split_lines(data), None)


class Replay:
    """Everything the replay found: `tables` (name -> list of row dicts), `findings`, `passed`."""

    def __init__(self):
        self.tables: dict[str, list[dict]] = {}
        self.findings: list[dict] = []
        self.units: list[dict] = []
        self.series: dict = {}
        self.stats: dict = {}
        self.states: dict[str, object] = {}  # journal -> replayed state at its end

    @property
    def passed(self) -> bool:
        return history.verdict(self.findings)[0]


class MixedClusters(ValueError):
    """The journals belong to more than one cluster (the message says which)."""


def scan(roots):
    """Read and check every segment line under one root or several. Returns summaries,
    per-file records ((seq, type, file, line, checked record, event_seq)), findings, and
    (journal, file, cluster id) of every snapshot head."""
    roots = [Path(roots)] if isinstance(roots, (str, os.PathLike)) else [Path(r) for r in roots]
    summaries, records, findings, clusters = [], {}, [], []
    for jdir in sorted({j for root in roots for j in find_journals(root)}):
        journal = str(jdir)
        segments = list_segments(jdir)
        for k, seg in enumerate(segments):
            last_segment = k == len(segments) - 1
            path = str(seg.path)
            lines, torn, error = segment_lines(seg.path)
            if error is not None:
                findings.append(finding("corrupt-record", "violation", f"cannot read the segment: {error}",
                                        journal=journal, file=path, line=1))
            recs = []
            head_type = head_seq = second_type = second_event = max_effects = None
            for n, raw in enumerate(lines, 1):
                if torn and n == len(lines):
                    break  # reported by check_segments
                try:
                    rec = verify_line(raw)
                except InvalidRecord as exc:
                    if last_segment and n == len(lines) and b"\0" in raw:
                        findings.append(finding("torn-tail", "warning", f"the last line is bad ({exc.reason}) and holds "
                                                "NUL bytes (an unfinished write); the writer truncates it when the "
                                                "journal is reopened", journal=journal, file=path, line=n))
                    else:
                        findings.append(finding("corrupt-record", "violation", exc.reason, journal=journal, file=path,
                                                line=n))
                    continue
                expected = seg.first_seq + n - 1
                if rec["seq"] != expected:
                    findings.append(finding("seq-mismatch", "violation", f"seq {rec['seq']} on line {n}, expected "
                                            f"{expected}", journal=journal, file=path, line=n, seq=rec["seq"]))
                event_seq = rec["body"].get("event_seq") if rec["type"] == "effects" else None
                if n == 1:
                    head_type, head_seq = rec["type"], rec["seq"]
                    if rec["type"] == "snapshot":
                        clusters.append((journal, path, rec["body"].get("cluster_id")))
                elif n == 2:
                    second_type, second_event = rec["type"], event_seq
                if event_seq is not None and type(event_seq) is int:
                    max_effects = event_seq if max_effects is None else max(max_effects, event_seq)
                # the checked record itself, not its text: the fold takes either, and would
                # otherwise check and parse every line a second time
                recs.append((rec["seq"], rec["type"], path, n, rec, event_seq))
            records[path] = recs
            summaries.append(SegmentSummary(journal, path, seg.first_seq, len(lines), torn, head_type, head_seq,
                                            second_type, second_event, max_effects))
    return summaries, records, findings, clusters


def replay(root, display=None) -> Replay:
    """Replay and audit the journals under `root` (one directory, or a list of several of one
    cluster). Raises `MixedClusters` when they belong to different clusters."""
    # the cyclic collector waits until the end: every row is kept until then and holds no
    # reference cycle, so its collections would only walk the growing tables again and again
    # (see UnitFold.run)
    with gc_paused():
        return _replay(root, display)


def _replay(root, display) -> Replay:
    roots = [Path(root)] if isinstance(root, (str, os.PathLike)) else [Path(r) for r in root]
    base = roots[0] if len(set(roots)) == 1 else Path(os.path.commonpath([r.resolve() for r in roots]))
    if display is None:
        def display(journal: str) -> str:
            j = Path(journal) if len(set(roots)) == 1 else Path(journal).resolve()
            return j.relative_to(base).as_posix() if j != base else "."
    out = Replay()
    summaries, records, findings, clusters = scan(roots)
    mixed = mixed_clusters(clusters, display)
    if mixed is not None:
        raise MixedClusters(mixed)
    for f in findings:
        f["journal"] = display(f["journal"])
    findings += check_segments(summaries, display)
    units, plan_findings = plan_units(summaries, display)
    findings += plan_findings

    # assign records to units
    per_unit: dict[int, list] = {u.unit: [] for u in units}
    heads: dict[int, str] = {}
    units_of: dict[str, list] = {}
    for u in units:
        units_of.setdefault(u.journal, []).append(u)
    head_of = {u.head_path: u for u in units}
    for s in summaries:
        for rec in records.get(s.path, ()):
            seq, kind, path, line, record, event_seq = rec
            if kind == "snapshot":
                u = head_of.get(path)
                if u is not None and line == 1:
                    heads[u.unit] = record
                continue
            key = event_seq if kind == "effects" else seq
            if key is None:
                continue
            journal_units = units_of.get(s.journal, [])
            u = unit_of(journal_units, key)
            if u is not None:
                per_unit[u.unit].append(rec)
            t = trailing_unit(journal_units, key)
            if t is not None:
                per_unit[t.unit].append(rec)

    timeline, elections, events = [], [], []
    terms, brokers, reassign, decisions, outcomes = [], [], [], [], []
    for u in units:
        fold = UnitFold(u._asdict(), display(u.journal)).run(heads[u.unit], sorted(per_unit[u.unit]))
        timeline += fold.timeline
        elections += fold.elections
        events += fold.events
        findings += fold.findings
        terms += fold.terms
        brokers += fold.brokers
        reassign += fold.reassignments
        d, o = fold.leftovers()
        decisions += d
        outcomes += o
        out.units.append(fold.summary)
        out.states[display(u.journal)] = fold.state

    cluster = history.assemble(out.units, terms, brokers, reassign, decisions, outcomes)
    findings += cluster["findings"]
    timeline += cluster["timeline"]
    elections += cluster["elections"]
    findings += audit.check_elections(elections)

    down = audit.DownIndex(cluster["broker_intervals"])
    loads = audit.LoadIndex(cluster["loads"])
    by_tp: dict[tuple, list] = {}
    for r in timeline:
        by_tp.setdefault((r["topic"], r["partition"]), []).append(r)
    offline_rows, recoveries, all_offline, all_deltas = [], [], [], []
    for (topic, p), rows in sorted(by_tp.items()):
        f, offline, rec, deltas = audit.audit_partition(rows, down, cluster["failures"], cluster["end"], loads=loads)
        findings += f
        recoveries += rec
        all_offline += offline
        all_deltas += deltas
        offline_rows.append({"topic": topic, "partition": p, "offline_ms": sum(b - a for a, b in offline),
                             "offline_intervals": len(offline)})
    failure_rows, recovery_summary = audit.recovery_stats(recoveries, cluster["failures"])

    buckets = cluster["buckets"]
    t0, width = cluster["start"], cluster["bucket_ms"]
    rate: dict[int, int] = {}
    replay_us: dict[int, list] = {}
    live_us: dict[int, list] = {}
    for e in events:
        k = history.bucket_index(e["time"], t0, width)
        rate[k] = rate.get(k, 0) + 1
        replay_us.setdefault(k, []).append(e["replay_us"])
        if e.get("live_process_us") is not None:
            live_us.setdefault(k, []).append(e["live_process_us"])
    out.series = {
        "buckets": buckets, "bucket_ms": width,
        "offline": audit.offline_series(all_offline, buckets),
        "leaders": audit.leader_series(all_deltas, buckets),
        "events": [rate.get(k, 0) for k in range(len(buckets))],
        "replay_us_p50": [audit.percentile(replay_us.get(k, []), 50) for k in range(len(buckets))],
        "replay_us_p99": [audit.percentile(replay_us.get(k, []), 99) for k in range(len(buckets))],
        "live_process_us_p50": [audit.percentile(live_us.get(k, []), 50) for k in range(len(buckets))],
        "live_process_us_p99": [audit.percentile(live_us.get(k, []), 99) for k in range(len(buckets))],
    }
    out.tables = {"partition_timeline": timeline, "broker_intervals": cluster["broker_intervals"],
                  "controller_terms": cluster["terms"], "reassignments": cluster["reassignments"],
                  "elections": elections, "events": events, "partition_offline": offline_rows,
                  "broker_failures": failure_rows}
    offline_ms = [r["offline_ms"] for r in offline_rows]
    out.stats = {"events": len(events), "units": len(units), "journals": len(units_of),
                 "segments": len(summaries), "step_seconds": sum(u["step_seconds"] for u in out.units),
                 "offline_ms_per_partition": audit.summary(offline_ms),
                 "recovery_ms_per_failure": recovery_summary, **audit.live_times(events)}
    out.units.sort(key=lambda u: u["unit"])
    out.findings = findings
    out.tables["findings"] = findings
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m replay.local", description="replay and audit without Spark")
    p.add_argument("--journal", required=True, nargs="+", action="extend",
                   help="directories holding the journals of one cluster")
    p.add_argument("--out", default=None)
    p.add_argument("--hash-seed", default="0", help="PYTHONHASHSEED to replay with (see replay/README.md)")
    args = p.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != args.hash_seed:
        env = {**os.environ, "PYTHONHASHSEED": args.hash_seed}
        os.execve(sys.executable, [sys.executable, "-m", "replay.local", *(sys.argv[1:] if argv is None else argv)], env)
    for journal in args.journal:
        if not Path(journal).is_dir():
            print(f"error: --journal {journal} is not a directory", file=sys.stderr)
            return 2
    try:
        result = replay(args.journal)
    except MixedClusters as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from . import report

    counts = history.by_rule(result.findings)
    print(report.summary_text(result.stats, counts, result.passed, result.findings))
    if args.out:
        report.write_report(Path(args.out), stats=result.stats, counts=counts, sample=result.findings,
                            series=result.series, terms=result.tables["controller_terms"],
                            failures=result.tables["broker_failures"], passed=result.passed,
                            shutdowns=[iv for iv in result.tables["broker_intervals"]
                                       if iv["reason"] == "controlled shutdown"])
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())


def run_local(journal, out=None) -> int:
    """Replay and audit `journal` in this process (no Spark); write the report under `out` if
    given. Returns the exit code (0 pass, 1 violation)."""
    from . import report

    result = replay(journal)
    if out is not None:
        counts = history.by_rule(result.findings)
        report.write_report(Path(out), stats=result.stats, counts=counts, sample=result.findings,
                            series=result.series, terms=result.tables["controller_terms"],
                            failures=result.tables["broker_failures"], passed=result.passed,
                            shutdowns=[iv for iv in result.tables["broker_intervals"]
                                       if iv["reason"] == "controlled shutdown"])
    return 0 if result.passed else 1
