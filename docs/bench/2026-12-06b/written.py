"""PartitionStatesWritten: step and digest time by the size of what it releases."""
import sys, time
from collections import defaultdict
import replay.fold as foldmod
from benchmarks.sampled_units import fold, sampled_units
from controller_core import events as E

rows = []
real_step, real_digest = foldmod.step, foldmod.fast_digest.digest
cur = {}
def step(s, e):
    t = time.perf_counter()
    out = real_step(s, e)
    cur["step"] = time.perf_counter() - t
    cur["e"] = e
    return out
class Digest:
    @staticmethod
    def digest(c):
        t = time.perf_counter()
        out = real_digest(c)
        d = time.perf_counter() - t
        e = cur.get("e")
        if isinstance(e, E.PartitionStatesWritten):
            kinds = defaultdict(int); parts = 0
            for x in c:
                kinds[type(x).__name__] += 1
                p = getattr(x, "partitions", None)
                if p is not None: parts += len(p)
                w = getattr(x, "writes", None)
                if w is not None: parts += len(w)
            rows.append((cur["step"], d, len(c), parts, e.final if hasattr(e, "final") else None, len(e.landed) if hasattr(e, "landed") else -1, dict(kinds)))
        return out
units = sampled_units(sys.argv[1], int(sys.argv[2]), seed=4)
foldmod.step, foldmod.fast_digest = step, Digest
for u in units:
    fold(u)
rows.sort(key=lambda r: -(r[0] + r[1]))
tot = sum(r[0] + r[1] for r in rows)
print(f"{len(rows)} Written events, {tot:.3f} s")
acc = 0
for i, r in enumerate(rows[:25]):
    acc += r[0] + r[1]
    print(f"step {r[0]*1e3:7.2f} ms digest {r[1]*1e3:7.2f} ms commands {r[2]:4d} partitions {r[3]:7d} final {r[4]} landed {r[5]} {r[6]}  cum {acc/tot:.0%}")
import statistics
small = [r for r in rows if r[3] < 100]
print("under 100 partitions:", len(small), f"{sum(r[0]+r[1] for r in small):.3f} s", f"median step {statistics.median(r[0] for r in small)*1e6:.0f} us digest {statistics.median(r[1] for r in small)*1e6:.0f} us")
