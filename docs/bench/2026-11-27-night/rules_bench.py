import sys, time
sys.path.insert(0, '.')
from pyspark.sql import SparkSession
from replay import job, rules
spark = job.session("local[2]", conf={"spark.driver.memory": "6g"})
spark.sparkContext.setLogLevel("ERROR")
out = sys.argv[1]
tl = spark.read.schema(f"{job.SCHEMAS['timeline']}, date STRING, unit STRING").parquet(f"{out}/partition_timeline").drop("date", "unit")
for i in range(2):
    t = time.perf_counter()
    n = rules.timeline_rules(tl).count()
    print(f"rules: {n} findings, {time.perf_counter() - t:.1f} s", flush=True)
