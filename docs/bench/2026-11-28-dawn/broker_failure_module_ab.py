"""A broker failure's decision (`step()` on BrokersChanged, 10,000 or 100,000 partitions led by
the failed broker) with `columnar_brokers.on_broker_failure` of an earlier commit against the
current one, interleaved in one process, CPU time. The earlier module is loaded from git with its
relative imports made absolute; both must give the same state and commands (checked).

    PYTHONPATH=. python docs/bench/2026-11-28-dawn/broker_failure_module_ab.py COMMIT [PARTITIONS]

The figures in broker-failure-module-ab.txt: a checkout of c678388 (the batch grouped by
broker) with COMMIT 88a1097 (the walk). From a54b5bb on, StopReplica batches are
`PartitionBatch`es, which the older module does not build: run it in a c678388 checkout.
"""
import importlib.util
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.core_step import AT, cluster, tune_gc
from controller_core import columnar_brokers
from controller_core import events as E
from controller_core.step import step

commit, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
source = subprocess.run(["git", "show", f"{commit}:controller_core/columnar_brokers.py"], capture_output=True,
                        text=True, check=True).stdout
source = re.sub(r"^from \. import", "from controller_core import", source, flags=re.M)
source = re.sub(r"^from \.(\w+) import", r"from controller_core.\1 import", source, flags=re.M)
path = Path(tempfile.mkdtemp()) / "old_columnar_brokers.py"
path.write_text(source)
spec = importlib.util.spec_from_file_location("old_columnar_brokers", path)
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)

new = columnar_brokers.on_broker_failure
state = cluster(n)
tune_gc()
event = E.BrokersChanged(at=AT, brokers=tuple(state.brokers[b] for b in (2, 3, 4, 5)))
res = {"before": [], "after": []}
for _ in range(7 if n <= 10_000 else 3):
    for name, f in (("before", old.on_broker_failure), ("after", new)):
        columnar_brokers.on_broker_failure = f
        t = time.process_time()
        step(state, event)
        res[name].append((time.process_time() - t) * 1000)
columnar_brokers.on_broker_failure = old.on_broker_failure
a = step(state, event)
columnar_brokers.on_broker_failure = new
assert a == step(state, event)
for k, v in res.items():
    print(f"{n:,} {k}: median {statistics.median(v):.1f} ms ({', '.join(f'{x:.1f}' for x in v)})")
print(f"ratio {statistics.median(res['before']) / statistics.median(res['after']):.2f}")
