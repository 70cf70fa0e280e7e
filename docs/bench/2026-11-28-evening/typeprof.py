"""cProfile of step() (and its digest) for one event type only, over sampled units."""
import sys, random, gzip, cProfile, pstats
from pathlib import Path
from replay import local, fold as foldmod
from replay.plan import plan_units
from replay.fold import UnitFold
J = Path(sys.argv[1]); N = int(sys.argv[2]); TYPE = sys.argv[3]
jdir = sorted(p for p in J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(2)
pick = random.sample(units, N)
prof = cProfile.Profile()
real_step, real_digest = foldmod.step, foldmod.fast_digest.digest
state = {"on": False, "n": 0}
def step(s, e):
    if type(e).__name__ == TYPE:
        state["on"] = True; state["n"] += 1
        prof.enable()
        try:
            return real_step(s, e)
        finally:
            prof.disable()
    state["on"] = False
    return real_step(s, e)
class D:
    @staticmethod
    def digest(c):
        if state["on"]:
            prof.enable()
            try:
                return real_digest(c)
            finally:
                prof.disable()
        return real_digest(c)
foldmod.step = step
foldmod.fast_digest = D
for u in pick:
    recs = sorted(r for s in summaries if True for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
    head = records[u.head_path][0][4]
    UnitFold(u._asdict(), "j").run(head, recs)
print("events", state["n"])
pstats.Stats(prof).sort_stats(sys.argv[4] if len(sys.argv) > 4 else "cumulative").print_stats(45)
