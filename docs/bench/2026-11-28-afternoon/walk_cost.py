"""What the per-partition walk costs a task, per part, over every timeline row of a replay's
output (plain Python, one process): Arrow rows to Python with the measurements' six columns and
with the rules' twelve, the walk without and with the state at a cut (3 % of the rows after it),
the rules' state walk alone, and the twelve columns with the ISR and assignment lists as text.
    python walk_cost.py OUT     # OUT: a `kctl replay --out` directory
"""
import sys
import time, glob, pyarrow.parquet as pq, pyarrow as pa
from replay import audit
MEASURED = ("topic", "partition", "time", "kind", "zk_version", "leader")  # the walk's columns until 57c724b
RULED = MEASURED + ("seq", "journal", "leader_epoch", "isr", "controller_epoch", "replicas")
FOUND = RULED + ("file", "line")  # job.WALKED since 2e0d1c9
files = sorted(glob.glob(sys.argv[1] + "/partition_timeline/*/*/unit=*/*.parquet"))
cols=[c for c in FOUND if c != "journal"]
t = pa.concat_tables([pq.read_table(f, columns=cols) for f in files])
t = t.append_column("journal", pa.array(["n"] * t.num_rows))
print(t.num_rows, "rows")
t0 = time.process_time(); rows6 = t.select(list(MEASURED)).to_pylist(); a = time.process_time() - t0
t0 = time.process_time(); rows12 = t.select(list(RULED)).to_pylist(); b = time.process_time() - t0
print("to_pylist 6 cols %.2f s, 12 cols %.2f s" % (a, b))
by = {}
for r in rows12:
    by.setdefault((r["topic"], r["partition"]), []).append(r)
times = sorted(r["time"] for r in rows12); cut = times[int(len(times) * 0.97)]
down, fi = audit.DownIndex([]), audit.FailureIndex([])
for label, kw in (("measure only", {}), ("with state at cut", {"cut": cut})):
    t0 = time.process_time()
    for rows in by.values():
        audit.PartitionWalk(down, fi).walk(rows, **kw).finish(times[-1])
    print(label, "%.2f s" % (time.process_time() - t0))
t0 = time.process_time()
for rows in by.values():
    audit.walk_rules([r for r in rows if r["time"] < cut], None, None)
print("walk_rules alone %.2f s" % (time.process_time() - t0))
import pyarrow.compute as pc
def joined(col):
    return pc.binary_join(pc.cast(t.column(col), pa.list_(pa.string())), ",")
t2 = t.select([c for c in RULED if c not in ("isr", "replicas")]).append_column("isr", joined("isr")).append_column("replicas", joined("replicas"))
t0 = time.process_time(); rows_s = t2.to_pylist(); print("to_pylist 12 cols, lists as text %.2f s" % (time.process_time() - t0))
