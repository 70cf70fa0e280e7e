"""Time the job's line scan (_lines + _scan) on a journal, and variants of its expressions."""
import sys, time
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel
from replay import job
J = sys.argv[1]
spark = job.session("local[2]", conf={"spark.driver.memory": "6g"})
spark.sparkContext.setLogLevel("ERROR")
root, files, on_disk = job._list_segments(spark, J)
def t(label, df_fn):
    t0 = time.perf_counter(); df_fn(); print(label, round(time.perf_counter() - t0, 1), flush=True)
files_df = lambda: job._whole_files(spark, [job._uri(f) for f in files])
for rnd in range(2):
    t("read whole files, count chars", lambda: files_df().select(F.sum(F.length("value"))).collect())
    t("split+posexplode, count", lambda: files_df().select(F.posexplode(F.split("value", "\n", -1))).count())
    t("split+posexplode+crc", lambda: files_df().select(F.posexplode(F.split("value", "\n", -1)).alias("pos", "text")).select(F.sum(F.expr(job.CRC_OK).cast("int"))).collect())
    t("_lines all columns agg", lambda: job._lines(spark, files).select(*[F.count(c) for c in ("seq", "type", "event_seq", "cluster_id", "ok", "has_nul")]).collect())
spark.stop()
