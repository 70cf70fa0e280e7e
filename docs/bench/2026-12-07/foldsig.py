"""A hash of everything a fold gives for sampled units (timings left out): two commits fold alike?"""
import sys, json, hashlib
from benchmarks.sampled_units import sampled_units, fold
h = hashlib.sha256(); n = 0
for node in range(3):
    for u in sampled_units(sys.argv[1], int(sys.argv[2]), seed=5, node=node):
        f = fold(u)
        ev = [{k: v for k, v in r.items() if k != "replay_us"} for r in f.events]
        summ = {k: v for k, v in f.summary.items() if not k.endswith("_seconds")}
        for part in (f.timeline, f.elections, ev, f.findings, f.terms, f.brokers, f.reassignments, f.leftovers(), summ):
            h.update(json.dumps(part, sort_keys=True, default=str).encode())
        n += len(f.timeline)
print(h.hexdigest(), n)
