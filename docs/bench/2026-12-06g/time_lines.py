import sys, time, glob
sys.path.insert(0, "/work/main")
from replay import job
from pyspark.sql import functions as F
spark = job.session("local[2]", conf={"spark.driver.memory": "6g"})
paths = sorted(glob.glob(sys.argv[1] + "/**/segment-*", recursive=True))
def agg(df):
    return df.groupBy("path").agg(F.max("line"), F.sum(F.col("ok").cast("int")), F.max("cluster_id"),
                                  F.max("event_seq"), F.sum(F.col("has_nul").cast("int")), F.max("seq"), F.max("type")).collect()
for order in sys.argv[2].split(","):
    t = time.time()
    rows = agg(job._lines(spark, paths) if order == "sql" else job._own_lines(spark, paths))
    print(order, "%.1f s" % (time.time() - t), len(rows), sum(r[1] for r in rows), sum(r[2] for r in rows), flush=True)
