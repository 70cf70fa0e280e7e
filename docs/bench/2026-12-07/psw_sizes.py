"""Per event of a type: its size (partitions it names) against step and digest time."""
import sys, time, collections
from benchmarks.sampled_units import sampled_units, fold
import replay.fold as F
from controller_core import events as E
kind = getattr(E, sys.argv[2])
rows = []
orig_step, orig_dg = F.step, F.fast_digest.digest
cur = {}
def size(ev):
    for f in ("versions", "states", "partitions", "tps"):
        v = getattr(ev, f, None)
        if v is not None:
            try: return len(v)
            except TypeError: pass
    return -1
def step(state, event):
    t = time.perf_counter(); r = orig_step(state, event); dt = time.perf_counter() - t
    cur.clear()
    if type(event) is kind:
        cur["row"] = [size(event) if type(event) is not E.PartitionStatesWritten else max([len(getattr(c, "partitions", ())) for c in r[1]] or [0]), dt, 0.0, len(r[1]), type(getattr(state, "rechecking", None) and state.rechecking[0]).__name__ if getattr(state, "rechecking", None) else ""]
        rows.append(cur["row"])
    return r
class D:
    @staticmethod
    def digest(c):
        t = time.perf_counter(); r = orig_dg(c); dt = time.perf_counter() - t
        if "row" in cur: cur["row"][2] = dt
        return r
F.step = step; F.fast_digest = D
for node in range(3):
    for u in sampled_units(sys.argv[1], 100, seed=4, node=node): fold(u)
buckets = collections.defaultdict(lambda: [0, 0.0, 0.0])
for n, s, d, c, parked in rows:
    b = 0 if n <= 0 else (1 if n == 1 else (10 if n <= 10 else (100 if n <= 100 else (1000 if n <= 1000 else 10000))))
    key = (b, parked) if sys.argv[2] == "PartitionStatesRechecked" else (b, "")
    x = buckets[key]; x[0] += 1; x[1] += s; x[2] += d
tot = sum(x[1] + x[2] for x in buckets.values())
for k in sorted(buckets):
    n, s, d = buckets[k]
    print(f"size<={k[0]:>6} {k[1]:<28} n={n:6d} step {s:6.2f}s ({s/n*1e6:8.0f} us) digest {d:6.2f}s ({d/n*1e6:8.0f} us) share {(s+d)/tot:5.1%}")
