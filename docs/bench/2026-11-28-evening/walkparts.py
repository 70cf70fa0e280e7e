import time, glob, sys, gc
import pyarrow as pa, pyarrow.parquet as pq, pyarrow.compute as pc
from replay import job, tasks
from replay.collector import gc_paused
files = sorted(glob.glob(sys.argv[1] + "/partition_timeline/*/*/unit=*/*.parquet"))
cols = [c for c in job.WALKED if c != "journal"]
t = pa.concat_tables([pq.read_table(f, columns=cols) for f in files])
t = t.append_column("journal", pa.array(["n"] * t.num_rows))
t = t.filter(pc.less(t.column("partition"), int(sys.argv[2])))
t = t.sort_by([("topic", "ascending"), ("partition", "ascending")])
batches = t.to_batches(max_chunksize=10000)
print("rows", t.num_rows)
with gc_paused():
    t0 = time.process_time(); n = sum(len(b.to_pylist()) for b in batches); t1 = time.process_time()
    print("to_pylist all %.2f s" % (t1 - t0))
    narrow = [c for c in job.WALKED if c not in ("file", "line", "journal", "seq")]
    t0 = time.process_time(); n = sum(len(b.select(narrow).to_pylist()) for b in batches); t1 = time.process_time()
    print("to_pylist without file/line/journal/seq %.2f s" % (t1 - t0))
    t0 = time.process_time(); x = [list(zip(*[c.to_pylist() for c in b.columns])) for b in batches]; t1 = time.process_time()
    print("tuples %.2f s" % (t1 - t0))
t0 = time.process_time(); n = sum(1 for _ in tasks.walk_arrow(iter(batches), [], [], 2**62, None)); t1 = time.process_time()
print("walk_arrow total %.2f s" % (t1 - t0))
import cProfile, pstats
p = cProfile.Profile(); p.enable()
with gc_paused():
    n = sum(1 for _ in tasks.walk_arrow(iter(batches), [], [], 2**62, 10**18))
p.disable()
pstats.Stats(p).sort_stats("tottime").print_stats(22)
