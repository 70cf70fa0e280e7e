import sys, time
from replay import job, package, checkpoint
J = sys.argv[1]
t = time.perf_counter()
spark = job.session("local[2]", conf={"spark.driver.memory": "6g"})
spark.sparkContext.setLogLevel("ERROR")
print("session", round(time.perf_counter() - t, 1))
for rnd in range(2):
    t = time.perf_counter(); root, files, on_disk = job._list_segments(spark, J); print("list", round(time.perf_counter() - t, 1))
    t = time.perf_counter(); package.ship(spark.sparkContext); print("ship", round(time.perf_counter() - t, 1))
    listed = [(f, f.rsplit("/", 1)[0], job._name_seq(f)) for f in files]
    t = time.perf_counter(); job._hash(spark, listed, {}, {}); print("hash", round(time.perf_counter() - t, 1))
spark.stop()
