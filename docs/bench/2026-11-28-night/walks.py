"""Time spent in the per-partition walks (the rules) the columnar paths fall back to, over sampled units."""
import sys, random, time
from pathlib import Path
from collections import defaultdict
from replay import local, fold as foldmod
from replay.plan import plan_units
from replay.fold import UnitFold
from controller_core import partitions as P, replicas as R, failover as F, draft as Dr, reassignment as RA, deletion as DE, rebalance as RB
J = Path(sys.argv[1]); N = int(sys.argv[2])
acc = defaultdict(lambda: [0, 0.0])
depth = [0]
def wrap(mod, name):
    real = getattr(mod, name)
    key = f"{mod.__name__.split('.')[-1]}.{name}"
    def w(*a, **k):
        if depth[0]:
            return real(*a, **k)
        depth[0] += 1
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            depth[0] -= 1
            r = acc[key]; r[0] += 1; r[1] += time.perf_counter() - t
    setattr(mod, name, w)
for mod, name in [(P, "trigger_online_state_change"), (F, "_start_machines"), (R, "replicas_on"), (RA, "resume_in_progress"),
                  (DE, "resume"), (DE, "resume_for_topics"), (RB, "on_rebalance_timer"), (RA, "on_partition_reassignment"),
                  (Dr.Draft, "finish"), (Dr.Draft, "scan")]:
    wrap(mod, name)
real_step = foldmod.step
steps = [0.0]
def step(s, e):
    t = time.perf_counter()
    try: return real_step(s, e)
    finally: steps[0] += time.perf_counter() - t
foldmod.step = step
for jdir in sorted(J.iterdir()):
    summaries, records, findings, clusters = local.scan(jdir)
    units, _ = plan_units(summaries)
    random.seed(5)
    for u in random.sample(units, min(N, len(units))):
        recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
        UnitFold(u._asdict(), "j").run(records[u.head_path][0][4], recs)
print(f"step total {steps[0]:.2f} s")
for k, (n, s) in sorted(acc.items(), key=lambda kv: -kv[1][1]):
    print(f"  {k:40} {n:7} {s:7.2f} s {s/steps[0]:6.1%}")
