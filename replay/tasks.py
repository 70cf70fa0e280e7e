"""What the Spark executors run (imported there from the shipped zip; no pyspark import at the
top, and the core is imported only after `package.ensure_deps()`).

The fold (`fold_arrow`, under `mapInArrow`) returns Arrow record batches: the big row sets
(timeline, elections, events, findings) as typed struct columns that the job writes as they
are, the few cross-unit rows as JSON texts. The walk tasks (`walk_arrow`) return `WALK_SCHEMA`
batches: JSON payloads that the driver's DataFrames parse with the table's schema, and the
charts' deltas and the recoveries as typed columns (replay/job.py).
"""
from __future__ import annotations

import json

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


BIG = ("timeline", "election", "event", "finding")  # struct columns of the fold's batches


def fold_arrow(batches, unit_of_head: dict, units: dict, display: dict, boundary: dict, schema,
               direct: dict | None = None):
    """`fold_files` over Arrow batches of (path, value), or of paths alone on the local file
    system (each read here: `read_segment`), yielding one record batch per unit and
    kind with the job's fold schema (kind, unit, date, small, and one struct column per kind of
    `BIG`): rows are built into columns here, not passed as JSON texts or Row objects.

    With `direct` (the tables are on a file system this task can write: `stage_files`), the big
    rows are not returned: each unit's rows of each kind are written here as one Parquet file
    into the staging directory, laid out as Spark lays out the partitioned tables, and the job
    moves them into the tables. Each unit's summary gets `write_seconds`: the time spent here
    making its rows Arrow columns (and Parquet files)."""
    import time

    import pyarrow as pa

    def files():
        for b in batches:
            paths = b.column("path").to_pylist()
            if "value" in b.schema.names:  # read by Spark (a file system other than the local one)
                yield from zip(paths, b.column("value").to_pylist())
            else:
                for path in paths:
                    yield path, read_segment(path)

    def batch(kind, rows, uid, day):
        n = len(rows)
        cols = {"kind": pa.array([kind] * n, pa.string()), "unit": pa.array([uid] * n, pa.string()),
                "date": pa.array([day] * n, pa.string())}
        cols["small"] = pa.nulls(n, pa.string()) if kind in BIG else pa.array([_dumps(r) for r in rows], pa.string())
        for k in BIG:
            t = schema.field(k).type
            cols[k] = pa.array(rows, type=t) if k == kind else pa.nulls(n, t)
        return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)

    def flush(kind, rows, uid, day):
        if direct is not None and kind in BIG:
            stage_files(direct, kind, pa.array(rows, type=schema.field(kind).type), uid, day)
            return ()
        return (batch(kind, rows, uid, day),)

    spent: dict[str, float] = {}
    for kind, rows, uid, day in fold_files(files(), unit_of_head, units, display, boundary):
        if kind == "unit":  # its unit's last rows: every big row set of the unit is written by now
            rows[0]["write_seconds"] = spent.get(uid, 0.0)
        started = time.perf_counter()
        done = flush(kind, rows, uid, day)
        spent[uid] = spent.get(uid, 0.0) + time.perf_counter() - started
        yield from done


def read_segment(path: str) -> bytes:
    """A segment file's bytes, decompressed if it is a closed (.gz) one. `fold_files` takes them
    as they are: the records are checked as bytes (adapters/journal/format.py), as
    `replay.local` checks them."""
    import gzip

    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if path.endswith(".gz") else data


def split_lines(data):
    """A segment's lines without their "\\n" (of its bytes, or of the str Spark read), and whether
    the last one is torn: written without its "\\n" (it stays in the list)."""
    newline = b"\n" if data.__class__ is bytes else "\n"
    lines = data.split(newline)
    torn = lines[-1] != newline[:0]
    if not torn:
        lines.pop()
    return lines, torn


def stage_files(direct: dict, kind: str, rows, uid: str, day: str | None) -> None:
    """Write one unit's rows of one kind (an Arrow struct array) as a Parquet file under
    `direct["root"]`/<table>/journal=<j>/date=<day>/unit=<uid>/, one file per journal value:
    the directory names are Spark's (escaped on the driver: `direct["journals"]`, and
    `direct["null"]` for a missing value), the partition columns are left out of the file as
    Spark leaves them out, and the file is renamed into place once complete (a retried task
    writes the same name again)."""
    import os
    import uuid

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pa.Table.from_struct_array(rows)
    journals = table.column("journal")
    for value in journals.unique().to_pylist():
        part = table.filter(pc.is_null(journals) if value is None else pc.equal(journals, value))
        where = os.path.join(direct["root"], direct["tables"][kind],
                             direct["journals"][value] if value is not None else "journal=" + direct["null"],
                             "date=" + (day if day is not None else direct["null"]), "unit=" + uid)
        os.makedirs(where, exist_ok=True)
        tmp = os.path.join(where, f".{uuid.uuid4().hex}.tmp")
        pq.write_table(part.drop_columns(["journal"]), tmp, compression="snappy")
        os.replace(tmp, os.path.join(where, "part-00000-fold.snappy.parquet"))


def fold_files(files, unit_of_head: dict, units: dict, display: dict, boundary: dict):
    """One task: whole segment files (path, text: a str read by Spark, or the bytes
    `read_segment` read), each the head segment of a fold unit. The
    unit's records are the file's records within the unit's range plus its `boundary` records
    found in other segments: (seq, type, path, line, text, event_seq). Yields
    (kind, rows, unit id, UTC day of the unit's head), a unit's rows of one kind as one list
    (never empty; its "unit" summary last, alone): the last two place the rows in the tables
    (replay/checkpoint.py)."""
    import time

    from . import package

    package.ensure_deps()
    from .checkpoint import utc_day
    from .collector import gc_paused
    from .fold import UnitFold
    from adapters.journal.format import InvalidRecord
    from .records import verify_line

    # the collector is off for the task (see UnitFold.run): checking and parsing the lines
    # allocates a value per field, and the collections that triggers walk every record kept
    # so far (measured: 50 us per event of the fold's time outside step())
    with gc_paused():
        for path, text in files:
            unit_id = unit_of_head.get(path)
            if unit_id is None:
                continue
            started = time.perf_counter()
            u = units[unit_id]
            lo, tail = u["lo"], u.get("tail", u["hi"])
            raw_lines, torn = split_lines(text)
            if torn:
                raw_lines.pop()  # reported by the segment checks
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
                if type(key) is int and lo < key <= tail:
                    records.append((rec["seq"], kind, path, n, rec, event_seq))
            for seq, kind, p, n, line_text, event_seq in boundary.get(unit_id, ()):
                records.append((seq, kind, p, n, line_text, event_seq))
            records.sort(key=lambda r: r[0])
            name = display[u["journal"]]
            uid = u["uid"]
            if head is None:
                yield "finding", [{"rule": "undecodable-record", "severity": "violation", "journal": name,
                                   "file": path, "line": 1, "seq": u["snapshot_seq"], "time": None,
                                   "topic": None, "partition": None,
                                   "detail": "the head snapshot of this unit cannot be read"}], uid, None
                continue
            parsed = time.perf_counter() - started
            fold = UnitFold(u, name).run(head, records)
            fold.summary["parse_seconds"] = parsed  # checking and parsing its lines, before the fold
            day = utc_day(fold.summary.get("first_at"))
            for kind, rows in (("timeline", fold.timeline), ("election", fold.elections), ("event", fold.events),
                               ("finding", fold.findings), ("term", fold.terms), ("broker", fold.brokers),
                               ("reassign", fold.reassignments)):
                if rows:
                    yield kind, rows, uid, day
            decisions, outcomes = fold.leftovers()
            if decisions:
                yield "decision", decisions, uid, day
            if outcomes:
                yield "outcome", outcomes, uid, day
            yield "unit", [fold.summary], uid, day


WALK_SCHEMA = "kind STRING, payload STRING, t BIGINT, b INT, d INT, final BOOLEAN"
"""What the walk tasks return: "finding", "offline", "state" and "whole" rows carry a JSON
payload; "recovery" rows the failure (b) and the milliseconds it took (t, null: never);
"delta" rows a time (t), a broker (b; -1 for the count of offline partitions) and a change of
count (d), summed per task. `final`: before the cut (replay/carry.py)."""


def walk_arrow(batches, intervals: list, failures: list, end_time: int, cut: int | None, loads: list = ()):
    """`walk_partitions` under `mapInArrow`: timeline record batches sorted by (topic, partition)
    in, `WALK_SCHEMA` batches out. A row with a `carry` value holds the partition's state at the
    last run's cut (the other rows are those at or after it)."""
    def rows():
        for b in batches:
            for r in b.to_pylist():
                yield r["topic"], r["partition"], r

    return _walk_batches(walk_partitions(rows(), intervals, failures, end_time, cut, loads))


def walk_partitions(rows, intervals: list, failures: list, end_time: int, cut: int | None, loads: list = ()):
    """One task: the walk of every partition whose rows (dicts sorted by topic and partition) it
    gets, from the carried state when one comes with them; stopped at `cut` to keep its state
    (None: no carry kept); `loads`: the term starts, (time, epoch) (`audit.LoadIndex`). Yields
    (kind, payload, t, b, d, final)."""
    from . import package

    package.ensure_deps()
    from . import audit
    from .collector import gc_paused

    down = audit.DownIndex(intervals)
    index = audit.FailureIndex(failures)
    term_loads = audit.LoadIndex(loads)
    deltas: dict[tuple, int] = {}
    current, batch, carried = None, [], None

    def flush():
        topic, partition = current
        try:
            w = audit.PartitionWalk(down, index, state=carried, rules=True, loads=term_loads).walk(batch, cut)
        except audit.NeedsWholeWalk as exc:
            yield "whole", _dumps({"topic": topic, "partition": partition, "why": str(exc)}), None, None, None, None
            return
        w.finish(end_time)
        for f in w.findings:
            yield "finding", _dumps(f), None, None, None, None
        yield "offline", _dumps({"topic": topic, "partition": partition, "offline_ms": w.offline_ms,
                                  "offline_intervals": w.offline_count}), None, None, None, None
        if cut is not None:
            yield "state", _dumps({"topic": topic, "partition": partition, "state": w.state}), None, None, None, None
        for failure, ms, final in w.recoveries:
            yield "recovery", None, ms, failure, None, final
        for a, b_, final in w.intervals:
            deltas[(a, -1, final)] = deltas.get((a, -1, final), 0) + 1
            deltas[(b_, -1, final)] = deltas.get((b_, -1, final), 0) - 1
        for t, broker, d, final in w.deltas:
            deltas[(t, broker, final)] = deltas.get((t, broker, final), 0) + d

    # the collector is off for the task: a walk holds no reference cycle (audit.PartitionWalk),
    # and each batch's rows made into Python values would trigger collections (a third of
    # the walk's time, measured)
    with gc_paused():
        for topic, partition, r in rows:
            key = (topic, partition)
            if key != current:
                if current is not None:
                    yield from flush()
                current, batch, carried = key, [], None
            if r.get("carry") is not None:
                carried = json.loads(r["carry"])
            else:
                batch.append(r)
        if current is not None:
            yield from flush()
        for (t, broker, final), d in sorted(deltas.items()):
            if d:
                yield "delta", None, t, broker, d, final


def _walk_batches(items, size: int = 8192):
    import pyarrow as pa

    names = ("kind", "payload", "t", "b", "d", "final")
    types = (pa.string(), pa.string(), pa.int64(), pa.int32(), pa.int32(), pa.bool_())
    cols: list[list] = [[] for _ in names]

    def batch():
        return pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(cols, types)], names=list(names))

    for item in items:
        for c, v in zip(cols, item):
            c.append(v)
        if len(cols[0]) >= size:
            yield batch()
            cols = [[] for _ in names]
    if cols[0]:
        yield batch()
