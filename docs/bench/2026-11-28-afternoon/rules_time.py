"""The window-function rules over a replay's whole timeline, timed twice, and the other
whole-history reads of an audit (events, the unclean-election filter, the findings' counts).
    python rules_time.py OUT     # OUT: a `kctl replay --out` directory
Needs a checkout up to 0225327: `replay/rules.py`, the window-function form of the rules, was
removed after this measurement (the rules run in the partitions' walk since 2e0d1c9).
"""
import time, sys
from replay import job, rules
spark = job.session("local[2]")
out = sys.argv[1]
spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
tl = spark.read.parquet(f"{out}/partition_timeline").drop("date", "unit")
t=time.perf_counter(); n=tl.count(); print("rows", n, "count %.1f s" % (time.perf_counter()-t))
for k in range(2):
    t=time.perf_counter(); f=rules.timeline_rules(tl).count(); print("rules findings", f, "%.1f s" % (time.perf_counter()-t))
ev = spark.read.parquet(f"{out}/events")
t=time.perf_counter(); print(ev.count(), "events count %.1f s" % (time.perf_counter()-t))
el = spark.read.parquet(f"{out}/elections").drop("date","unit")
t=time.perf_counter(); print(job.unclean_not_allowed(el).count(), "unclean %.1f s" % (time.perf_counter()-t))
fi = spark.read.parquet(f"{out}/findings")
t=time.perf_counter(); print(fi.groupBy("severity","rule").count().collect(), "findings groupBy %.1f s" % (time.perf_counter()-t))
