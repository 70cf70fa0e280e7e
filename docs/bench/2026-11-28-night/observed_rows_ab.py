"""The fold's observed rows (ISR changes and re-reads) with the assignments read from the replica
columns (`fold._assignments`) against the partitions built whole (the earlier
`_get_many(...).assignment`): the same timeline rows on sampled units, and the history's time.

    python docs/bench/2026-11-28-night/observed_rows_ab.py J UNITS
"""
import random
import sys
import time
from pathlib import Path

from replay import fold as foldmod
from replay import local
from replay.fold import UnitFold
from replay.plan import plan_units

J = Path(sys.argv[1])
N = int(sys.argv[2])
columns = foldmod._assignments


def built(partitions, tps):
    return [None if info is None else info.assignment for info in foldmod._get_many(partitions, tps)]


real_history = foldmod.UnitFold._history
spent = {"columns": 0.0, "built": 0.0}
mode = ["columns"]


def history(self, *a):
    t = time.process_time()
    try:
        return real_history(self, *a)
    finally:
        spent[mode[0]] += time.process_time() - t


foldmod.UnitFold._history = history
jdir = sorted(J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(6)
same = rows = 0
for u in random.sample(units, N):
    recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot"
                  and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
    head = records[u.head_path][0][4]
    out = {}
    for name, fn in (("built", built), ("columns", columns)):
        foldmod._assignments = fn
        mode[0] = name
        out[name] = UnitFold(u._asdict(), "j").run(head, recs).timeline
    foldmod._assignments = columns
    rows += len(out["columns"])
    same += out["columns"] == out["built"]
print(f"{N} units, {rows} timeline rows, the same in {same} of {N}; history CPU s: "
      + ", ".join(f"{k} {v:.2f}" for k, v in spent.items()))
