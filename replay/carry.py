"""What an incremental `kctl replay` carries over from the last run's per-partition audit (plain
Python; the Spark job reads and writes the parts, replay/job.py).

Theory of operation
-------------------
The per-partition audit (the rules and the measurements, `audit.PartitionWalk`) is a walk over
each partition's timeline. A run stops each partition's walk at a *cut* time C and keeps its
state there, plus everything the walks produced before C that later rows cannot change: the
rule findings of rows before C, the offline intervals and leader changes that ended before C,
the recoveries found before C (`_checkpoint/audit/<run>/`). The next run walks only the rows at
or after C, from those states, and adds what it finds to what was kept. C is the earliest time
of any fold unit that a later run may re-execute: each journal's last unit (its range ends "at
the end of the journal"), so that no row before C is ever replaced by a re-execution.

The next run uses the carry only when the history before C is the one the carry saw:

- every fold unit re-executed now, and every unit superseded since, starts at or after C;
- the broker intervals and failures before C, the writes stitched across units before C and
  the term starts before C hash to what they hashed to then (`guard`).

Otherwise (or when any partition's rows after C include a znode version older than the walked
ones: `audit.NeedsWholeWalk`) it audits every partition's whole timeline, as a first run does,
and keeps a new carry. A carry's parts are written under a new directory each run, and the
manifest names the current one only after the run's tables are written, so a run that stops
half way leaves the previous carry in force.
"""
from __future__ import annotations

import hashlib
import json

DIR = "_checkpoint/audit"


def _sha(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def guard(cut: int, intervals: list[dict], failures: list[dict], stitched: list[dict], loads=()) -> dict:
    """Hashes of the cluster-wide history before `cut` that the partitions' walks read: broker
    intervals (an interval still open at the cut is recorded as open), broker failures, the
    timeline rows of writes stitched across units, and the term starts (`audit.LoadIndex`)."""
    ivs = sorted([iv["broker"], iv["start"], iv["state"], iv.get("reason"),
                  iv["end"] if iv["end"] is not None and iv["end"] < cut else None]
                 for iv in intervals if iv["start"] < cut)
    fs = sorted([f["failure"], f["broker"], f["time"]] for f in failures if f["time"] < cut)
    rows = sorted((json.dumps(r, sort_keys=True, default=str) for r in stitched
                   if r.get("time") is not None and r["time"] < cut))
    starts = sorted([t, e] for t, e in loads if t < cut)
    return {"intervals": _sha(ivs), "failures": _sha(fs), "stitched": _sha(rows), "loads": _sha(starts)}


def cut_of(last_units_min_time: list[int | None]) -> int | None:
    """The cut of this run: the earliest start of each journal's last unit (None: a start unknown,
    from a checkpoint written before units recorded theirs; then nothing is carried)."""
    if not last_units_min_time or any(t is None for t in last_units_min_time):
        return None
    return min(last_units_min_time)


def unusable(carry: dict | None, now_guard: dict | None, changed_units_min_time: list[int | None]) -> str | None:
    """Why the previous run's carry cannot be used now (None: it can). `changed_units_min_time`:
    the starts of the units re-executed now and of those superseded since."""
    if carry is None:
        return "no carry from an earlier run"
    cut = carry["cut"]
    if any(t is None or t < cut for t in changed_units_min_time):
        return "a unit re-executed or superseded now starts before the last run's cut"
    if now_guard != carry["guard"]:
        parts = [k for k in carry["guard"] if now_guard is None or now_guard.get(k) != carry["guard"][k]]
        return f"the history before the last run's cut changed ({', '.join(parts)})"
    return None
