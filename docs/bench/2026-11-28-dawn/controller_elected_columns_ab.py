"""ControllerElected from a snapshot whose partition states are the ZooKeeper reader's columns
(`SnapshotStates`, each distinct content once) against the same snapshot as a tuple of
(TopicPartition, LeaderIsr) pairs, a LeaderIsr per partition (what the reader gave before
2026-11-28, 04:33), interleaved in one process, CPU time, medians. Both give the same commands
(checked before timing).

    PYTHONPATH=. python docs/bench/2026-11-28-dawn/controller_elected_columns_ab.py
"""
import statistics
import time

import attrs

from benchmarks.core_step import snapshot_event
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr

config = ControllerConfig(broker_id=5, auto_leader_rebalance_enable=False)
for n in (10_000, 100_000):
    columns = snapshot_event(n)
    base = initial_state(config)
    pairs = tuple((tp, LeaderIsr(*li)) for tp, li in columns.snapshot.partition_states)
    as_pairs = attrs.evolve(columns, snapshot=attrs.evolve(columns.snapshot, partition_states=pairs))
    assert step(base, as_pairs)[1] == step(base, columns)[1]
    res = {"pairs": [], "columns": []}
    for _ in range(9 if n > 10_000 else 25):
        for name, event in (("pairs", as_pairs), ("columns", columns)):
            t = time.process_time()
            step(base, event)
            res[name].append((time.process_time() - t) * 1000)
    print(f"{n:>7,} partitions: " + ", ".join(f"{k} {statistics.median(v):.1f} ms" for k, v in res.items()))
