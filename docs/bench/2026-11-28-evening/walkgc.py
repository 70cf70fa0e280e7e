import time, glob, sys, gc
import pyarrow as pa, pyarrow.parquet as pq, pyarrow.compute as pc
from replay import job, tasks
from replay.collector import gc_paused
files = sorted(glob.glob(sys.argv[1] + "/partition_timeline/*/*/unit=*/*.parquet"))
cols = [c for c in job.WALKED if c != "journal"]
t = pa.concat_tables([pq.read_table(f, columns=cols) for f in files])
t = t.append_column("journal", pa.array(["n"] * t.num_rows))
t = t.filter(pc.less(t.column("partition"), 2))  # a subset
t = t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("time", "ascending")])
print("rows", t.num_rows)
batches = t.to_batches(max_chunksize=10000)
def run():
    t0 = time.process_time()
    n = sum(1 for _ in tasks.walk_arrow(iter(batches), [], [], 2**62, None))
    return time.process_time() - t0
for label in ("gc on", "gc paused", "gc on", "gc paused"):
    if label == "gc paused":
        with gc_paused():
            dt = run()
    else:
        dt = run()
    print(label, round(dt, 2))
gc.collect()
with gc_paused():
    run()
    print("cyclic garbage after a paused walk of", t.num_rows, "rows:", gc.collect())
import collections
gc.collect()
gc.set_debug(gc.DEBUG_SAVEALL)
with gc_paused():
    run()
gc.collect()
print(collections.Counter(type(o).__name__ for o in gc.garbage).most_common(8))
