import statistics, time, sys
from benchmarks.core_step import cluster, tune_gc, AT
from controller_core import events as E
from controller_core.step import step
res = []
for n, runs in ((10_000, 9), (100_000, 5)):
    state = cluster(n); tune_gc()
    event = E.BrokersChanged(at=AT, brokers=tuple(state.brokers[b] for b in (2, 3, 4, 5)))
    dec, rel, prog = [], [], []
    for _ in range(runs):
        t = time.process_time(); after, commands = step(state, event); dec.append(time.process_time() - t)
        write = next(c for c in commands if type(c).__name__ == "WritePartitionStates")
        tps = [w.tp for w in write.writes]; q = len(tps) // 4
        evs = [E.PartitionStatesWritten(at=AT, write_id=write.write_id, landed=tuple(tps[i*q:(i+1)*q]), final=False) for i in range(3)]
        evs.append(E.PartitionStatesWritten(at=AT, write_id=write.write_id))
        s = after
        t = time.process_time()
        for ev in evs: s, _ = step(s, ev)
        prog.append(time.process_time() - t)
    med = lambda xs: statistics.median(xs) * 1e3
    res.append(f"{n}: decide {med(dec):.1f} four releases {med(prog):.1f} ms")
print(" | ".join(res))
