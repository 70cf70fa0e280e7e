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
t = time.process_time()
if prof:
    p = cProfile.Profile(); p.enable(); ev, st = go(); p.disable()
    pstats.Stats(p).sort_stats("tottime").print_stats(35)
else:
    ev, st = go()
dt = time.process_time() - t
print(f"events {ev} cpu {dt:.2f} s step {st:.2f} s -> per event {1e6*dt/ev:.1f} us, step {1e6*st/ev:.1f} us, rest {1e6*(dt-st)/ev:.1f} us")
from replay.collector import gc_paused
import gc
t = time.process_time()
with gc_paused():
    ev, st = go()
dt = time.process_time() - t
print(f"GC PAUSED: events {ev} cpu {dt:.2f} s step {st:.2f} s -> per event {1e6*dt/ev:.1f} us, step {1e6*st/ev:.1f} us, rest {1e6*(dt-st)/ev:.1f} us")
