import statistics, time, sys, gc
from benchmarks.core_step import snapshot_event, tune_gc
from controller_core.state import initial_state, ControllerConfig
from controller_core.step import step
config = ControllerConfig(broker_id=5, auto_leader_rebalance_enable=False)
out = []
for n in (10_000, 100_000):
    ev = snapshot_event(n); base = initial_state(config)
    ts = []
    for _ in range(15 if n == 10_000 else 9):
        t = time.process_time(); step(base, ev); ts.append((time.process_time() - t) * 1e3)
    out.append(f"{n}: {statistics.median(ts):.1f} ({' '.join(f'{x:.0f}' for x in ts)})")
print(" | ".join(out))
