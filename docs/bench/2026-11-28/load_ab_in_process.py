"""ControllerElected at 100,000 partitions, the columnar load of an older tree against this
one's, interleaved in one process (the rest of the core is this tree's): `failover.columnar_load`
is swapped between the two modules run by run. The older file's path is the first argument.

    PYTHONPATH=. python docs/bench/2026-11-28/load_ab_in_process.py /work/wt/bench/controller_core/columnar_load.py
"""
import gc
import importlib.util
import statistics
import sys
import time

sys.path.insert(0, "docs/bench/2026-11-28")
from controller_elected_shared_cpu import snapshot_event  # noqa: E402

from controller_core import columnar_load as new  # noqa: E402
from controller_core import failover  # noqa: E402
from controller_core.state import ControllerConfig, initial_state  # noqa: E402
from controller_core.step import step  # noqa: E402

spec = importlib.util.spec_from_file_location("controller_core.columnar_load_old", sys.argv[1])
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)
ev = snapshot_event(100_000)
base = initial_state(ControllerConfig(broker_id=5, auto_leader_rebalance_enable=False))
gc.collect()
times = {"old": [], "new": []}
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 15):
    for name, mod in (("old", old), ("new", new)):
        failover.columnar_load = mod
        t = time.process_time()
        step(base, ev)
        times[name].append((time.process_time() - t) * 1e3)
failover.columnar_load = new
print("ControllerElected at 100,000, ms CPU, medians of", len(times["old"]), "interleaved runs:",
      {k: round(statistics.median(v)) for k, v in times.items()},
      "| quartiles", {k: [round(x) for x in statistics.quantiles(v, n=4)] for k, v in times.items()})
