import sys, time
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel
from replay import job
J = sys.argv[1]
spark = job.session("local[2]", conf={"spark.driver.memory": "6g"})
spark.sparkContext.setLogLevel("ERROR")
root, files, on_disk = job._list_segments(spark, J)
listed = [(f, f.rsplit("/", 1)[0], job._name_seq(f)) for f in files]
last = {}
for f, j, n in listed:
    last[j] = max(last.get(j, -1), n)
display = {j: job._display(root, j) for _, j, _ in listed}
def t(label, fn):
    t0 = time.perf_counter(); fn(); print(label, round(time.perf_counter() - t0, 1), flush=True)
job._hash(spark, listed, {}, {})  # warm
for rnd in range(2):
    def v1():
        lines = job._lines(spark, files).persist(StorageLevel.MEMORY_AND_DISK)
        job._scan(spark, lines, last, display)
        lines.unpersist()
    t("current: persist + scan", v1)
    def v2():
        lines = job._lines(spark, files)
        job._scan(spark, lines, last, display)
    t("no persist + scan", v2)
    def v3():
        lines = job._lines(spark, files).persist(StorageLevel.MEMORY_AND_DISK)
        lines.count()
        lines.unpersist()
    t("persist + count only", v3)
spark.stop()
