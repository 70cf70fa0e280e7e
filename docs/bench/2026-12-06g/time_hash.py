import sys, time
sys.path.insert(0, "/work/main")
from replay import job, package
spark = job.session("local[2]", conf={"spark.driver.memory": "6g"})
t = time.time(); root, files, on_disk = job._list_segments(spark, sys.argv[1]); print("list %.1f" % (time.time() - t))
t = time.time(); package.ship(spark.sparkContext); print("ship %.1f" % (time.time() - t))
listed = [(f, f.rsplit("/", 1)[0], job._name_seq(f)) for f in files]
for own in (False, True, False, True):
    t = time.time(); h, u = job._hash(spark, listed, {}, {}, own_reads=own); print("own" if own else "spark", "%.1f" % (time.time() - t), len(h), len(u), flush=True)
