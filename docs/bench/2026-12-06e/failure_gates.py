"""Which broker failures of a journal's sampled fold units the columns decide, and what each
costs (CPU ms of `brokers.on_broker_failure`, the rules' fallback included).

    PYTHONHASHSEED=0 python docs/bench/2026-12-06e/failure_gates.py JOURNAL
"""
import sys
import time

import controller_core.brokers as B
import controller_core.columnar_brokers as CB
from benchmarks.sampled_units import fold, sampled_units

decided = []
columnar, whole = CB.on_broker_failure, B.on_broker_failure


def spy_columnar(d, dead, last=False):
    decided[-1] = "parked"  # (unless it returns: DecisionParked, a refusal to re-read first)
    decided[-1] = columnar(d, dead, last)
    return decided[-1]


def spy_whole(d, dead, last=False):
    t = time.process_time()
    decided.append(None)
    try:
        whole(d, dead, last)
    finally:  # (a decision parked for a re-read raises DecisionParked)
        over = {True: "columns", "parked": "columns, parked for a re-read"}.get(decided[-1], "rules")
        kept = len(d.replicas_on_offline_dirs)
        print(f"{d.cause}: {over}, {(time.process_time() - t) * 1000:.1f} ms, {kept} replica(s) kept on failed dirs")


B.columnar_brokers.on_broker_failure = spy_columnar
B.on_broker_failure = spy_whole
for u in sampled_units(sys.argv[1], 10, seed=4):
    fold(u)
