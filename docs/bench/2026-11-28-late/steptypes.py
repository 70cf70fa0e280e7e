"""step() and digest CPU by event type over sampled units of a journal (perf_counter, no profiler)."""
import sys, random, time
from pathlib import Path
from collections import Counter
from replay import local, fold as foldmod
from replay.plan import plan_units
from replay.fold import UnitFold
J = Path(sys.argv[1]); N = int(sys.argv[2]); SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 4
tm = Counter(); n = Counter(); dg = Counter()
real_step, real_digest = foldmod.step, foldmod.fast_digest.digest
cur = [None]
def step(s, e):
    k = type(e).__name__; cur[0] = k
    t = time.perf_counter()
    try: return real_step(s, e)
    finally: tm[k] += time.perf_counter() - t; n[k] += 1
class D:
    @staticmethod
    def digest(c):
        t = time.perf_counter()
        try: return real_digest(c)
        finally: dg[cur[0]] += time.perf_counter() - t
foldmod.step = step; foldmod.fast_digest = D
jdir = sorted(J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(SEED)
for u in random.sample(units, N):
    recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
    UnitFold(u._asdict(), "j").run(records[u.head_path][0][4], recs)
tot = sum(tm.values()) + sum(dg.values())
print(f"all: {sum(n.values())} events, step+digest {tot:.2f} s")
for k, v in sorted(tm.items(), key=lambda kv: -kv[1])[:10]:
    print(f"{k:30s} {n[k]:7d} step {v*1e6/n[k]:8.1f} us  digest {dg[k]*1e6/n[k]:7.1f} us  total {v+dg[k]:.3f} s")
