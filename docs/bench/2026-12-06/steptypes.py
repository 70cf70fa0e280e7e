"""step() and digest CPU by event type over sampled units of a journal (perf_counter, no
profiler): 2026-11-28-late/steptypes.py on benchmarks/sampled_units.py.

    python steptypes.py JOURNAL UNITS [SEED]
"""
import sys
import time
from collections import Counter

import replay.fold as foldmod
from benchmarks.sampled_units import fold, sampled_units

tm, n, dg = Counter(), Counter(), Counter()
real_step, real_digest = foldmod.step, foldmod.fast_digest.digest
cur = [None]


def step(s, e):
    k = cur[0] = type(e).__name__
    t = time.perf_counter()
    try:
        return real_step(s, e)
    finally:
        tm[k] += time.perf_counter() - t
        n[k] += 1


class Digest:
    @staticmethod
    def digest(c):
        t = time.perf_counter()
        try:
            return real_digest(c)
        finally:
            dg[cur[0]] += time.perf_counter() - t


units = sampled_units(sys.argv[1], int(sys.argv[2]), seed=int(sys.argv[3]) if len(sys.argv) > 3 else 4)
foldmod.step, foldmod.fast_digest = step, Digest
for u in units:
    fold(u)
print(f"all: {sum(n.values())} events, step+digest {sum(tm.values()) + sum(dg.values()):.2f} s")
for k, v in sorted(tm.items(), key=lambda kv: -kv[1])[:10]:
    print(f"{k:30s} {n[k]:7d} step {v * 1e6 / n[k]:8.1f} us  digest {dg[k] * 1e6 / n[k]:7.1f} us  total {v + dg[k]:.3f} s")
