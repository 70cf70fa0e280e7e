"""cProfile of small events of one type (their commands name <= N partitions)."""
import sys, cProfile, pstats
from benchmarks.sampled_units import sampled_units, fold
import replay.fold as F
from controller_core import events as E
kind = getattr(E, sys.argv[2]); limit = int(sys.argv[3])
pr = cProfile.Profile()
orig_step = F.step
def step(state, event):
    if type(event) is kind:
        p2 = cProfile.Profile(); p2.enable()
        r = orig_step(state, event)
        p2.disable()
        if max([len(getattr(c, "partitions", ())) for c in r[1]] or [0]) <= limit:
            p2.create_stats(); stats.append(p2)
        return r
    return orig_step(state, event)
stats = []
F.step = step
for node in range(3):
    for u in sampled_units(sys.argv[1], 100, seed=4, node=node): fold(u)
st = pstats.Stats(stats[0])
for p in stats[1:]: st.add(p)
print(len(stats), "events")
st.sort_stats("cumulative").print_stats(45)
st.sort_stats("tottime").print_stats(25)
