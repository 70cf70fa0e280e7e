"""What the Spark executors run (imported there from the shipped zip; no pyspark import at the
top, and the core is imported only after `package.ensure_deps()`).

The fold (`fold_arrow`, under `mapInArrow`) returns Arrow record batches: the big row sets
(timeline, elections, events, findings) as typed struct columns that the job writes as they
are, the few cross-unit rows as JSON texts. The audit tasks return `(table, payload)` pairs, the
payload a JSON text that the driver's DataFrames parse with the table's schema (replay/job.py).
"""
from __future__ import annotations

import json

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


BIG = ("timeline", "election", "event", "finding")  # struct columns of the fold's batches


def fold_arrow(batches, unit_of_head: dict, units: dict, display: dict, boundary: dict, schema):
    """`fold_files` over Arrow batches of (path, value), yielding one record batch per unit and
    kind with the job's fold schema (kind, unit, date, small, and one struct column per kind of
    `BIG`): rows are built into columns here, not passed as JSON texts or Row objects."""
    import pyarrow as pa

    def files():
        for b in batches:
            yield from zip(b.column("path").to_pylist(), b.column("value").to_pylist())

    def batch(kind, rows, uid, day):
        n = len(rows)
        cols = {"kind": pa.array([kind] * n, pa.string()), "unit": pa.array([uid] * n, pa.string()),
                "date": pa.array([day] * n, pa.string())}
        cols["small"] = pa.nulls(n, pa.string()) if kind in BIG else pa.array([_dumps(r) for r in rows], pa.string())
        for k in BIG:
            t = schema.field(k).type
            cols[k] = pa.array(rows, type=t) if k == kind else pa.nulls(n, t)
        return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)

    current, rows = None, []
    for kind, row, uid, day in fold_files(files(), unit_of_head, units, display, boundary):
        if (kind, uid, day) != current:
            if rows:
                yield batch(*current[:1], rows, *current[1:])
            current, rows = (kind, uid, day), []
        rows.append(row)
    if rows:
        yield batch(*current[:1], rows, *current[1:])


def fold_files(files, unit_of_head: dict, units: dict, display: dict, boundary: dict):
    """One task: whole segment files (path, text), each the head segment of a fold unit. The
    unit's records are the file's records within the unit's range plus its `boundary` records
    found in other segments: (seq, type, path, line, text, event_seq). Yields
    (kind, row, unit id, UTC day of the unit's head): the last two place the unit's rows in the
    tables (replay/checkpoint.py)."""
    from . import package

    package.ensure_deps()
    from .checkpoint import utc_day
    from .fold import UnitFold
    from adapters.journal.format import InvalidRecord
    from .records import verify_line

    for path, text in files:
        unit_id = unit_of_head.get(path)
        if unit_id is None:
            continue
        u = units[unit_id]
        lo, hi = u["lo"], u["hi"]
        raw_lines = text.split("\n")
        if raw_lines and raw_lines[-1] == "":
            raw_lines.pop()
        else:
            raw_lines = raw_lines[:-1]  # a torn last line: reported by the segment checks
        head = None
        records = []
        for n, line in enumerate(raw_lines, 1):
            try:
                rec = verify_line(line)
            except InvalidRecord:
                continue  # reported with file and line by the SQL checks
            kind = rec["type"]
            if n == 1:
                if kind == "snapshot":
                    head = rec
                continue
            if kind == "snapshot":
                continue
            event_seq = rec["body"].get("event_seq") if kind == "effects" else None
            key = event_seq if kind == "effects" else rec["seq"]
            if type(key) is int and lo < key <= hi:
                records.append((rec["seq"], kind, path, n, rec, event_seq))
        for seq, kind, p, n, line_text, event_seq in boundary.get(unit_id, ()):
            records.append((seq, kind, p, n, line_text, event_seq))
        records.sort(key=lambda r: r[0])
        name = display[u["journal"]]
        uid = u["uid"]
        if head is None:
            yield "finding", {"rule": "undecodable-record", "severity": "violation", "journal": name,
                              "file": path, "line": 1, "seq": u["snapshot_seq"], "time": None,
                              "topic": None, "partition": None,
                              "detail": "the head snapshot of this unit cannot be read"}, uid, None
            continue
        fold = UnitFold(u, name).run(head, records)
        day = utc_day(fold.summary.get("first_at"))
        for kind, rows in (("timeline", fold.timeline), ("election", fold.elections), ("event", fold.events),
                           ("finding", fold.findings), ("term", fold.terms), ("broker", fold.brokers),
                           ("reassign", fold.reassignments)):
            for r in rows:
                yield kind, r, uid, day
        decisions, outcomes = fold.leftovers()
        for d in decisions:
            yield "decision", d, uid, day
        for o in outcomes:
            yield "outcome", o, uid, day
        yield "unit", fold.summary, uid, day


def _string_batches(pairs, size: int = 8192):
    """(kind, payload) pairs as Arrow record batches of two string columns."""
    import pyarrow as pa

    kinds, payloads = [], []
    for kind, payload in pairs:
        kinds.append(kind)
        payloads.append(payload)
        if len(kinds) >= size:
            yield pa.RecordBatch.from_arrays([pa.array(kinds, pa.string()), pa.array(payloads, pa.string())],
                                             names=["kind", "payload"])
            kinds, payloads = [], []
    if kinds:
        yield pa.RecordBatch.from_arrays([pa.array(kinds, pa.string()), pa.array(payloads, pa.string())],
                                         names=["kind", "payload"])


def audit_arrow(batches, intervals: list, failures: list, end_time: int, t0: int, width: int, rules: bool = True):
    """`audit_partitions` under `mapInArrow`: timeline record batches sorted by (topic,
    partition) in, (kind, payload) batches out."""
    def rows():
        for b in batches:
            for r in b.to_pylist():
                yield r["topic"], r["partition"], r

    return _string_batches(audit_partitions(rows(), intervals, failures, end_time, t0, width, rules))


def audit_partitions(rows, intervals: list, failures: list, end_time: int, t0: int, width: int, rules: bool = True):
    """One task: timeline rows (dicts, or JSON payloads) sorted by (topic, partition). Emits findings, one offline row
    per partition, (failure, recovery ms) pairs, and this task's offline and leader deltas summed
    per chart bucket."""
    from . import package

    package.ensure_deps()
    from . import audit, history

    down = audit.DownIndex(intervals)
    offline_deltas: dict[int, int] = {}
    leader_deltas: dict[tuple, int] = {}
    current, batch = None, []

    def flush():
        findings, offline, recoveries, deltas = audit.audit_partition(batch, down, failures, end_time, rules)
        for f in findings:
            yield "finding", _dumps(f)
        yield "offline", _dumps({"topic": current[0], "partition": current[1],
                                  "offline_ms": sum(b - a for a, b in offline), "offline_intervals": len(offline)})
        for failure, ms in recoveries:
            yield "recovery", _dumps({"failure": failure, "ms": ms})
        for a, b in offline:
            ka, kb = history.bucket_index(a, t0, width), history.bucket_index(b, t0, width)
            offline_deltas[ka] = offline_deltas.get(ka, 0) + 1
            offline_deltas[kb] = offline_deltas.get(kb, 0) - 1
        for t, broker, d in deltas:
            key = (history.bucket_index(t, t0, width), broker)
            leader_deltas[key] = leader_deltas.get(key, 0) + d

    for topic, partition, payload in rows:
        key = (topic, partition)
        if key != current:
            if current is not None:
                yield from flush()
            current, batch = key, []
        batch.append(payload if isinstance(payload, dict) else json.loads(payload))
    if current is not None:
        yield from flush()
    yield "offline_deltas", _dumps(sorted(offline_deltas.items()))
    yield "leader_deltas", _dumps([[k, b, d] for (k, b), d in sorted(leader_deltas.items())])


