"""Controlled shutdown of the broker leading all 10,000 partitions, its write released in four
progress reports then the final outcome, in-process: step time of each."""
import time, sys
from benchmarks.core_step import cluster, tune_gc, AT
from controller_core import events as E, commands as C
from controller_core.step import step
n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
state = cluster(n, leader=1)
tune_gc()
ev = E.ControlledShutdownRequested(at=AT, request_id=1, broker_id=1, broker_epoch=state.brokers[1].epoch)
for rep in range(5):
    t = time.perf_counter(); s1, cmds = step(state, ev); dt = time.perf_counter() - t
    w = next(c for c in cmds if type(c) is C.WritePartitionStates)
    tps = [x.tp for x in w.writes]
    q = len(tps) // 4
    times = [dt]
    s = s1
    for k in range(3):
        e = E.PartitionStatesWritten(at=AT, write_id=w.write_id, landed=tuple(tps[k*q:(k+1)*q]), final=False)
        t = time.perf_counter(); s, out = step(s, e); times.append(time.perf_counter() - t)
    e = E.PartitionStatesWritten(at=AT, write_id=w.write_id)
    t = time.perf_counter(); s, out = step(s, e); times.append(time.perf_counter() - t)
    print(f"writes {len(tps)}: decide {times[0]*1e3:.1f} ms, progress " + ", ".join(f"{x*1e3:.1f}" for x in times[1:4]) + f", final {times[4]*1e3:.1f} ms; total {sum(times)*1e3:.1f}")
