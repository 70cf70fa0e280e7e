"""The partitions' walk with the state at a cut, without and with the rules' findings, over every
timeline row of a replay's output (plain Python, one process; the twelve rule columns plus file
and line as Python values first).
    python walk_rules_cost.py OUT     # OUT: a `kctl replay --out` directory
"""
import time, glob, sys, pyarrow.parquet as pq, pyarrow as pa
from replay import audit, job  # job.WALKED: the columns the job ships
files = sorted(glob.glob(sys.argv[1] + "/partition_timeline/*/*/unit=*/*.parquet"))
cols=[c for c in job.WALKED if c != "journal"]
t = pa.concat_tables([pq.read_table(f, columns=cols) for f in files])
t = t.append_column("journal", pa.array(["n"] * t.num_rows))
t0 = time.process_time(); rows = t.to_pylist(); print("to_pylist FOUND %.2f s" % (time.process_time() - t0))
by = {}
for r in rows:
    by.setdefault((r["topic"], r["partition"]), []).append(r)
times = sorted(r["time"] for r in rows); cut = times[int(len(times) * 0.97)]
down, fi = audit.DownIndex([]), audit.FailureIndex([])
found = []
def bad(rule, r, detail):
    found.append((rule, r["seq"], detail))
for label, kw, b in (("measure + state", {"cut": cut}, None), ("measure + state + rule findings", {"cut": cut}, bad)):
    t0 = time.process_time()
    for rows_ in by.values():
        audit.PartitionWalk(down, fi, rules=b is not None).walk(rows_, **kw).finish(times[-1])
    print(label, "%.2f s" % (time.process_time() - t0), len(found))
