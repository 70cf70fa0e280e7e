"""the job's first two reads, cold, in a fresh Spark session: hash, then lines + _scan"""
# modes: sql (Spark hash, SQL line scan), ownlines (Spark hash, Python line scan), own (both in Python tasks)
import sys, time
sys.path.insert(0, "/work/main")
from pyspark import StorageLevel
from replay import job, package
own = sys.argv[2] in ("own", "ownlines")
own_hash = sys.argv[2] == "own"
t0 = time.time()
spark = job.session("local[2]", conf={"spark.driver.memory": "6g"})
spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(1 << 16))
t = time.time(); root, files, on_disk = job._list_segments(spark, sys.argv[1]); tl = time.time() - t
package.ship(spark.sparkContext)
listed = [(f, f.rsplit("/", 1)[0], job._name_seq(f)) for f in files]
t = time.time(); h, u = job._hash(spark, listed, {}, {}, own_reads=own_hash); th = time.time() - t
last = {}
for x in h:
    last[x.journal] = max(last.get(x.journal, -1), x.name_seq)
t = time.time()
lines = job._lines_of(spark, sorted(x.path for x in h), own).persist(StorageLevel.MEMORY_AND_DISK)
s, c, f = job._scan(spark, lines, last, {j: j for j in last})
ts = time.time() - t
print(sys.argv[2], "list %.1f hash %.1f lines+scan %.1f both %.1f" % (tl, th, ts, th + ts), len(s), sum(len(v) for v in f.values()), flush=True)
