"""ControllerElected from a 10,000- or 100,000-partition snapshot (argv[1]) with broker 1 of five
dead, as the failover benchmark's controller failover has it: median of 5 runs, ms; argv[2] adds a
line profile of columnar_failover.start_machines."""
import sys, time, statistics, attrs, gc
from benchmarks.core_step import snapshot_event
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core import columnar_failover
n = int(sys.argv[1])
ev = snapshot_event(n, (1, 2, 3, 4, 5), None, 100)
ev = attrs.evolve(ev, snapshot=attrs.evolve(ev.snapshot, brokers=tuple(b for b in ev.snapshot.brokers if b.broker_id != 1)))
config = ControllerConfig(broker_id=5, auto_leader_rebalance_enable=False)
s0 = initial_state(config)
gc.collect(); gc.freeze()
ts = []
for _ in range(5):
    t = time.perf_counter(); s, c = step(s0, ev); ts.append((time.perf_counter() - t) * 1000)
print("CE with broker 1 dead, ms", round(statistics.median(ts), 1), [round(x) for x in ts])
if len(sys.argv) > 2:
    from line_profiler import LineProfiler
    lp = LineProfiler(); lp.add_function(columnar_failover.start_machines)
    lp.enable()
    for _ in range(2): step(s0, ev)
    lp.disable(); lp.print_stats(output_unit=1e-3, stripzeros=True)
