# Run the replay job with the Spark UI on and print every stage: tasks, run time, JVM CPU, GC and shuffle
# (per-stage accounting from the REST API). Usage: PYTHONPATH=. python docs/bench/2026-12-06f/spark_stages.py JOURNAL OUT
import json, sys, time, urllib.request
from replay import job
spark = job.session("local[2]", conf={"spark.ui.enabled": "true", "spark.ui.port": "4057", "spark.driver.memory": "6g"})
out = sys.argv[2]
t = time.perf_counter()
rc = job.run(spark, sys.argv[1], out, quiet=True)
print("rc", rc, "wall", time.perf_counter() - t)
app = spark.sparkContext.applicationId
base = f"http://127.0.0.1:4057/api/v1/applications/{app}"
stages = json.load(urllib.request.urlopen(base + "/stages?status=complete"))
from datetime import datetime
def ts(s): return datetime.strptime(s.replace("GMT", ""), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
rows = []
for s in stages:
    d = ts(s["completionTime"]) - ts(s["submissionTime"]) if s.get("completionTime") else 0
    rows.append((ts(s["submissionTime"]), s["stageId"], d, s["numTasks"], s["executorRunTime"] / 1000, s["executorCpuTime"] / 1e9,
                 s["jvmGcTime"] / 1000, s["shuffleWriteBytes"] >> 20, s["shuffleReadBytes"] >> 20, s["name"][:60]))
rows.sort()
t0 = rows[0][0]
for r in rows:
    print(f"{r[0]-t0:7.1f} st{r[1]:<4} dur {r[2]:6.1f}s tasks {r[3]:4} run {r[4]:7.1f} cpu {r[5]:7.1f} gc {r[6]:5.1f} shW {r[7]:5}M shR {r[8]:5}M {r[9]}")
spark.stop()
