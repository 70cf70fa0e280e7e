"""cProfile of fold tasks (direct writes) over sampled units of a journal, without Spark."""
import sys, time, random, gzip, cProfile, pstats, tempfile
from pathlib import Path
import pyarrow as pa
from replay import local, job
from replay.plan import plan_units
from replay.tasks import fold_arrow

T = {"BIGINT": pa.int64(), "INT": pa.int32(), "STRING": pa.string(), "ARRAY<INT>": pa.list_(pa.int32()),
     "BOOLEAN": pa.bool_(), "DOUBLE": pa.float64()}
def struct(ddl):
    fs = []
    for f in ddl.split(", "):
        n, t = f.split(" ", 1)
        fs.append(pa.field(n.strip("`"), T[t]))
    return pa.struct(fs)
schema = pa.schema([pa.field("kind", pa.string()), pa.field("unit", pa.string()), pa.field("date", pa.string()),
                    pa.field("small", pa.string())] + [pa.field(k, struct(job.SCHEMAS[k])) for k in ("timeline", "election", "event", "finding")])
J = Path(sys.argv[1]); N = int(sys.argv[2]); prof = len(sys.argv) > 3
jdir = sorted(p for p in J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(1)
pick = random.sample(units, N)
stage = tempfile.mkdtemp()
direct = {"root": stage, "tables": dict(zip(("timeline", "election", "event", "finding"), job.PARTITIONED)),
          "journals": {"j": "journal=j"}, "null": "__HIVE_DEFAULT_PARTITION__"}
inputs = []
for u in pick:
    b = Path(u.head_path).read_bytes(); text = (gzip.decompress(b) if u.head_path.endswith(".gz") else b).decode()
    meta = {u.unit: {"unit": u.unit, "journal": u.journal, "head_path": u.head_path, "uid": f"u{u.unit}", "snapshot_seq": u.snapshot_seq, "lo": u.lo, "hi": u.hi, "index": u.index}}
    inputs.append((u, text, meta))
def go():
    ev = st = 0
    for u, text, meta in inputs:
        batch = pa.RecordBatch.from_pydict({"path": [u.head_path], "value": [text]})
        for b in fold_arrow([batch], {u.head_path: u.unit}, meta, {u.journal: "j"}, {}, schema, direct):
            if b.column("kind")[0].as_py() == "unit":
                import json; s = json.loads(b.column("small")[0].as_py()); ev += s["events"]; st += s["step_seconds"]
    return ev, st
import replay.fold as F, replay.tasks as TK, replay.records as R
parts = {}
def wrap(owner, name, part):
    real = getattr(owner, name)
    def w(*a, **k):
        t = time.process_time()
        try: return real(*a, **k)
        finally: parts[part] = parts.get(part, 0.0) + time.process_time() - t
    setattr(owner, name, w)
wrap(F, "step", "step"); wrap(F.fast_digest, "digest", "digest"); wrap(F.UnitFold, "_history", "history")
wrap(F.UnitFold, "_effects", "effects"); wrap(F.UnitFold, "_elected_rows", "history: elected rows"); wrap(F, "confirm", "history: confirm"); wrap(F.UnitFold, "_decide", "history: decide"); wrap(F.codec, "decode_event", "decode event"); wrap(F.codec, "decode_state", "decode head")
wrap(F.UnitFold, "_finish", "finish (state hash)"); wrap(F.UnitFold, "run", "UnitFold.run (all of the fold)"); wrap(R, "verify_line", "verify_line (outside run: parse)"); wrap(TK, "stage_files", "arrow+parquet (stage_files)")
import pyarrow as pa0
real_array = pa0.array
def arr(*a, **k):
    t = time.process_time()
    try: return real_array(*a, **k)
    finally: parts["pa.array (in flush)"] = parts.get("pa.array (in flush)", 0.0) + time.process_time() - t
pa0.array = arr
t = time.process_time()
if prof:
    p = cProfile.Profile(); p.enable(); ev, st = go(); p.disable()
    pstats.Stats(p).sort_stats("tottime").print_stats(35)
else:
    ev, st = go()
dt = time.process_time() - t
print(f"events {ev} cpu {dt:.2f} s step {st:.2f} s -> per event {1e6*dt/ev:.1f} us, step {1e6*st/ev:.1f} us, rest {1e6*(dt-st)/ev:.1f} us")
for k, v in sorted(parts.items(), key=lambda x: -x[1]): print(f"  {k:32s} {v:7.2f} s {1e6*v/ev:7.1f} us/event")
