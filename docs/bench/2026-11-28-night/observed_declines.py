"""Which ISR observations isr_change.decide declines in sampled units, and why (a completion, an absent partition)."""
import sys, random, importlib
from pathlib import Path
from collections import Counter
from replay import local
from replay.plan import plan_units
from replay.fold import UnitFold
from controller_core import isr_change
S = importlib.import_module("controller_core.step")
J = Path(sys.argv[1]); N = int(sys.argv[2])
c = Counter()
real = isr_change.decide
def decide(state, event):
    out = real(state, event)
    if out is None:
        image = state.partitions
        whys = []
        for tp, li in event.states:
            found = image.leader_isr_row(tp)
            if found is None: whys.append("absent/odd"); continue
            now = li if li is not None and found[1] is not None and li.zk_version >= found[1][4] else found[1]
            if now is None: whys.append("no state"); continue
            if tp in state.reassigning and isr_change._caught_up(now[2], found[2], found[4]): whys.append("completes")
            else: whys.append("?")
        c[(event.source, len(event.states) > 16, tuple(sorted(set(whys))))] += 1
    return out
S.isr_change.decide = decide
jdir = sorted(J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(4)
for u in random.sample(units, N):
    recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
    UnitFold(u._asdict(), "j").run(records[u.head_path][0][4], recs)
for k, v in c.most_common(): print(v, k)
