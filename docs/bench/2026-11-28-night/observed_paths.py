"""PartitionStatesObserved in the replay: how many isr_change.decide takes, and what the others are."""
import sys, random, time
from pathlib import Path
from collections import Counter
from replay import local
from replay.plan import plan_units
from replay.fold import UnitFold
import importlib; from controller_core import isr_change; S = importlib.import_module("controller_core.step")
J = Path(sys.argv[1]); N = int(sys.argv[2])
c = Counter(); tm = Counter()
real = isr_change.decide
def decide(state, event):
    out = real(state, event)
    if out is None:
        why = "source " + event.source if event.source != "isr_change" else ("many" if len(event.states) > 16 else "other")
        if event.source == "isr_change" and state.reassigning and any(tp in state.reassigning for tp, _ in event.states):
            why = "reassigning"
    else:
        why = "taken" if out[1] else "taken, nothing changed"
    c[why] += 1
    return out
S.isr_change.decide = decide
real_drafted = S._observed_drafted
def drafted(state, event, confirmed=frozenset()):
    t = time.perf_counter()
    try: return real_drafted(state, event, confirmed)
    finally: tm["drafted"] += time.perf_counter() - t
S._observed_drafted = drafted
jdir = sorted(J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(4)
for u in random.sample(units, N):
    recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
    UnitFold(u._asdict(), "j").run(records[u.head_path][0][4], recs)
print(c, dict(tm))
