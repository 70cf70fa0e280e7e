"""Run the replay job once on a journal and print Spark's stages: wall, executor run/CPU time."""
import json, sys, time, urllib.request
from replay import job
J, OUT, DUMP = sys.argv[1], sys.argv[2], sys.argv[3]
spark = job.session("local[2]", conf={"spark.driver.memory": "6g", "spark.ui.enabled": "true", "spark.ui.port": "4077"})
spark.sparkContext.setLogLevel("ERROR")
t = time.perf_counter()
code = job.run(spark, J, OUT, quiet=True, full=True)
print("code", code, "wall", time.perf_counter() - t)
ui = spark.sparkContext.uiWebUrl
app = spark.sparkContext.applicationId
stages = json.load(urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/stages?details=false"))
jobs = json.load(urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/jobs"))
json.dump({"stages": stages, "jobs": jobs}, open(DUMP, "w"))
spark.stop()
