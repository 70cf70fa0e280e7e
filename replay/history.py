"""Putting the folded units together: what both the Spark job and `replay.local` do after the
folds, on the small per-unit and per-cluster rows (plain Python).

The big row sets (timeline, elections, events) never pass through here; what does is one summary
per unit, the leftover write decisions and outcomes at unit boundaries, and the few term, broker
and reassignment changes.
"""
from __future__ import annotations

from . import audit
from .fold import compare_units, stitch_writes
from .plan import finding

SEVERITIES = ("violation", "warning", "info")
BUCKETS = 240  # points of the time-series charts


def assemble(units: list[dict], term_events: list[dict], broker_events: list[dict], reassign_events: list[dict],
             decisions: list[dict], outcomes: list[dict]) -> dict:
    """Cross-unit results: unit-boundary checks, stitched writes, controller terms (and their
    starts as the partitions' walks read them, `loads`), broker intervals and failures,
    reassignments, the time grid of the charts."""
    findings, restarts = compare_units(units)
    timeline, elections, lost = stitch_writes(decisions, outcomes)
    if lost:
        findings.append(finding("unmatched-outcome", "info", f"{lost} write outcome(s) confirm writes decided before "
                                "the first replayed snapshot; their values are unknown"))
    times = [u["first_at"] for u in units if u["first_at"] is not None] + \
            [u["last_at"] for u in units if u["last_at"] is not None]
    t0, t1 = (min(times), max(times)) if times else (0, 1)
    terms, term_findings = audit.controller_terms(term_events, restarts, t1)
    findings += term_findings
    intervals = audit.broker_intervals(broker_events, t1)
    failures = audit.failures(intervals)
    reassignments = audit.reassignments(reassign_events, t1)
    width = max(1, -(-(t1 - t0) // BUCKETS))
    return {"findings": findings, "timeline": timeline, "elections": elections, "terms": terms,
            "broker_intervals": intervals, "failures": failures, "reassignments": reassignments,
            "loads": audit.loads(term_events),
            "start": t0, "end": t1, "bucket_ms": width,
            "buckets": [t0 + (k + 1) * width for k in range(BUCKETS)]}


def bucket_index(t: int, t0: int, width: int) -> int:
    """The first bucket whose end time is at or after `t` (what `ceil` does in the SQL twin)."""
    return min(BUCKETS - 1, max(0, -(-(t - t0) // width) - 1))


def cumulative(per_bucket: dict[int, int]) -> list[int]:
    out, total = [], 0
    for k in range(BUCKETS):
        total += per_bucket.get(k, 0)
        out.append(total)
    return out


def verdict(findings: list[dict]) -> tuple[bool, dict[str, int]]:
    counts = {s: 0 for s in SEVERITIES}
    for f in findings:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    return counts["violation"] == 0, counts


def by_rule(findings: list[dict]) -> list[tuple[str, str, int]]:
    counts: dict[tuple[str, str], int] = {}
    for f in findings:
        key = (f["severity"], f["rule"])
        counts[key] = counts.get(key, 0) + 1
    order = {s: k for k, s in enumerate(SEVERITIES)}
    return sorted(((s, r, n) for (s, r), n in counts.items()), key=lambda x: (order.get(x[0], 9), x[1]))
