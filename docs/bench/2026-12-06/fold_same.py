"""Folds sampled units of a journal and prints a hash of every history row (the step's own time
left out): run it at two commits to check that a change to the fold or the core keeps the rows.

    PYTHONPATH=<checkout> python fold_same.py JOURNAL UNITS

(benchmarks/sampled_units.py is from 2026-12-06: copy it into an older checkout.)
"""
import hashlib
import json
import sys

from benchmarks.sampled_units import fold, sampled_units

h = hashlib.sha256()
rows = 0
for u in sampled_units(sys.argv[1], int(sys.argv[2]), seed=3):
    f = fold(u)
    for name in ("timeline", "elections", "terms", "brokers", "reassignments", "orphans", "unconfirmed", "events"):
        for r in getattr(f, name):
            h.update(json.dumps({k: v for k, v in r.items() if k != "replay_us"}, sort_keys=True, default=str).encode())
            rows += 1
    for d in f.decisions.values():
        h.update(json.dumps(d, sort_keys=True, default=str).encode())
        rows += 1
print(rows, "rows", h.hexdigest())
