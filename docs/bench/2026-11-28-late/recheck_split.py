"""PartitionStatesRechecked: the refresh's cost against the parked event's decision, by the parked event's type."""
import sys, random, time
from pathlib import Path
from collections import Counter
from replay import local
from replay.plan import plan_units
from replay.fold import UnitFold
import importlib; S = importlib.import_module("controller_core.step")
from controller_core import events as E
J = Path(sys.argv[1]); N = int(sys.argv[2])
tm = Counter(); n = Counter(); sizes = Counter()
H = S._HANDLERS
real = {k: v for k, v in H.items()}
inside = [False]
def wrap(k, h):
    def w(state, event, *a):
        if inside[0] and a:
            t = time.perf_counter()
            try: return h(state, event, *a)
            finally: tm["parked " + k.__name__] += time.perf_counter() - t; n["parked " + k.__name__] += 1
        return h(state, event, *a)
    return w
for k, h in real.items():
    if k is not E.PartitionStatesRechecked:
        H[k] = wrap(k, h)
rh = real[E.PartitionStatesRechecked]
def rechecked(state, event):
    inside[0] = True
    t = time.perf_counter()
    try: return rh(state, event)
    finally:
        inside[0] = False; tm["rechecked total"] += time.perf_counter() - t; n["rechecked total"] += 1
        sizes[min(len(event.states), 10**6).bit_length()] += 1
H[E.PartitionStatesRechecked] = rechecked
jdir = sorted(J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(4)
for u in random.sample(units, N):
    recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
    UnitFold(u._asdict(), "j").run(records[u.head_path][0][4], recs)
for k in sorted(tm, key=lambda k: -tm[k]): print(f"{k:40s} {n[k]:6d} {tm[k]*1e6/n[k]:9.1f} us  {tm[k]:.3f} s")
print("re-read sizes (bit length: count)", sorted(sizes.items()))
