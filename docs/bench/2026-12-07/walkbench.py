"""The walk tasks' Python side on a journal's timeline: Arrow batches sorted by partition in,
walk_arrow out; to_pylist apart."""
import sys, time, cProfile, pstats
import pyarrow as pa
from replay import local, history, tasks
from replay.job import WALKED
cap = {}
real = history.assemble
def assemble(*a, **k):
    cap["cluster"] = r = real(*a, **k); return r
history.assemble = assemble
local.history.assemble = assemble
res = local.replay(sys.argv[1])
c = cap["cluster"]
tl = res.tables["partition_timeline"]
rows = sorted(({k: r[k] for k in WALKED} for r in tl), key=lambda r: (r["topic"], r["partition"]))
T = {"time": pa.int64(), "seq": pa.int64(), "zk_version": pa.int32(), "leader": pa.int32(), "leader_epoch": pa.int32(),
     "controller_epoch": pa.int32(), "epoch": pa.int32(), "partition": pa.int32(), "line": pa.int32(),
     "isr": pa.list_(pa.int32()), "replicas": pa.list_(pa.int32())}
schema = pa.schema([pa.field(k, T.get(k, pa.string())) for k in WALKED])
batches = [pa.RecordBatch.from_pylist(rows[i:i + 10000], schema=schema) for i in range(0, len(rows), 10000)]
print(len(rows), "rows")
t = time.process_time(); n = sum(len(b.to_pylist()) for b in batches); t1 = time.process_time() - t
print(f"to_pylist {1e6*t1/n:.2f} us/row")
args = (c["broker_intervals"], c["failures"], c["end"], None, c["loads"])
t = time.process_time(); out = list(tasks.walk_arrow(iter(batches), *args)); t2 = time.process_time() - t
print(f"walk_arrow {1e6*t2/n:.2f} us/row, {t2:.2f} s, out rows {sum(len(b) for b in out)}")
if len(sys.argv) > 2:
    pr = cProfile.Profile(); pr.enable(); list(tasks.walk_arrow(iter(batches), *args)); pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)
import gc
gc.disable()
for _ in range(2):
    t = time.process_time(); n = sum(len(b.to_pylist()) for b in batches); t1 = time.process_time() - t
    t = time.process_time()
    n2 = 0
    for b in batches:
        names = b.schema.names
        cols = [b.column(i).to_pylist() for i in range(len(names))]
        rows2 = [dict(zip(names, vals)) for vals in zip(*cols)]
        n2 += len(rows2)
    t2 = time.process_time() - t
    print(f"to_pylist {1e6*t1/n:.2f} us/row; by column + dict(zip) {1e6*t2/n2:.2f} us/row")
b = batches[0]; names = b.schema.names
cols = [b.column(i).to_pylist() for i in range(len(names))]
assert [dict(zip(names, v)) for v in zip(*cols)] == b.to_pylist()
