import sys, time, collections
from benchmarks.sampled_units import sampled_units, fold
import replay.fold as F
real = F.codec.decode_event
acc = collections.defaultdict(lambda: [0, 0.0])
class C: pass
def dec(body):
    t = time.perf_counter(); r = real(body); dt = time.perf_counter() - t
    a = acc[type(r).__name__]; a[0] += 1; a[1] += dt
    return r
F.codec.decode_event = dec
ev = 0
for u in sampled_units(sys.argv[1], 8, seed=1): ev += fold(u).summary["events"]
tot = sum(a[1] for a in acc.values())
print(f"{ev} events, decode {tot:.2f} s, {1e6*tot/ev:.1f} us/event")
for k, (n, s) in sorted(acc.items(), key=lambda x: -x[1][1])[:10]: print(f"  {k:30s} {n:7d} {s:6.2f} s {1e6*s/n:9.1f} us each")
