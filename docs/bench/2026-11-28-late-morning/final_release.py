"""The final release of a 100,000-partition broker failure's write after three progress releases, in
one process (no loop, no brokers): `step()` alone. From the repository's root:

    .venv/bin/python docs/bench/2026-11-28-late-morning/final_release.py [-p]
"""
import time, statistics, sys, cProfile, pstats
from benchmarks.core_step import cluster, tune_gc, AT
from controller_core import events as E
from controller_core.step import step
N = 100_000
state = cluster(N)
tune_gc()
after, commands = step(state, E.BrokersChanged(at=AT, brokers=tuple(state.brokers[b] for b in (2, 3, 4, 5))))
write = next(c for c in commands if type(c).__name__ == "WritePartitionStates")
tps = [w.tp for w in write.writes]
q = len(tps) // 4
s = after
for k in range(3):
    s, cmds = step(s, E.PartitionStatesWritten(at=AT, write_id=write.write_id, landed=tuple(tps[k*q:(k+1)*q]), final=False))
final = E.PartitionStatesWritten(at=AT, write_id=write.write_id, versions=tuple((w.tp, w.leader_isr.zk_version) for w in write.writes))
times = []
for _ in range(3):
    t0 = time.perf_counter(); s2, c2 = step(s, final); times.append((time.perf_counter() - t0) * 1000)
whole = []
for _ in range(3):
    t0 = time.perf_counter(); step(after, final); whole.append((time.perf_counter() - t0) * 1000)
print(f"final release after three progress releases: {statistics.median(times):.1f} ms; the whole release at once: {statistics.median(whole):.1f} ms; commands {len(c2)}")
if "-p" in sys.argv:
    p = cProfile.Profile(); p.enable(); step(s, final); p.disable()
    pstats.Stats(p).sort_stats("cumtime").print_stats(25)
