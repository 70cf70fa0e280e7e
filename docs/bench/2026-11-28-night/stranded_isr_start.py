"""A new controller's step over a snapshot in which one leaderless partition keeps, as its only
ISR member, a replica a reassignment removed (broker 9, not assigned): with today's check the
machines start over the columns; with the old check (any unassigned ISR member sends the start
down the per-partition walk) the walk runs. Alternating in one process, medians.

    python docs/bench/2026-11-28-night/stranded_isr_start.py [RUNS]
"""
import statistics
import sys

import attrs
import numpy as np

from benchmarks.core_step import snapshot_event, time_ms
from controller_core import columnar_failover
from controller_core.snapshot_states import SnapshotStates
from controller_core.state import ControllerConfig, initial_state
from controller_core.step import step
from controller_core.values import LeaderIsr

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
real = columnar_failover._nothing_to_repair


def old_check(leader, isr, replicas, pstate):
    return np.zeros(len(leader), bool)


config = ControllerConfig(broker_id=5, auto_leader_rebalance_enable=False)
for n in (10_000, 100_000):
    event = snapshot_event(n)
    states = event.snapshot.partition_states
    codes = states.content_of.copy()
    codes[n // 2] = len(states.contents)
    event = attrs.evolve(event, snapshot=attrs.evolve(event.snapshot, partition_states=SnapshotStates(
        states.tps, states.contents + (LeaderIsr(-1, 3, (9,), 1, 4),), codes, states.versions)))
    base = initial_state(config)
    times = {"walk (old check)": [], "columns (this check)": []}
    commands = {}
    for _ in range(runs if n <= 10_000 else max(1, runs // 2)):
        for name, check in (("walk (old check)", old_check), ("columns (this check)", real)):
            columnar_failover._nothing_to_repair = check
            out = []
            times[name] += time_ms(lambda: out.append(step(base, event)), 1)
            commands[name] = out[-1][1]
    columnar_failover._nothing_to_repair = real
    same = commands["walk (old check)"] == commands["columns (this check)"]
    print(f"{n:,} partitions: " + ", ".join(f"{k} {statistics.median(v):.1f} ms" for k, v in times.items())
          + f" (medians of {len(next(iter(times.values())))}); same commands: {same}")
