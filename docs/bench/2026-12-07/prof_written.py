import sys, cProfile, pstats
from benchmarks.sampled_units import sampled_units, fold
import importlib
S = importlib.import_module("controller_core.step")
from controller_core import events as E
pr = cProfile.Profile()
real = S._HANDLERS[E.PartitionStatesWritten]
n = [0]
def w(state, event, *a):
    small = len(state.pending.get(event.write_id).intents) <= 10 if state.pending.get(event.write_id) is not None else False
    if small:
        n[0] += 1; pr.enable()
    try: return real(state, event, *a)
    finally:
        if small: pr.disable()
S._HANDLERS[E.PartitionStatesWritten] = w
for node in range(3):
    for u in sampled_units(sys.argv[1], 100, seed=4, node=node): fold(u)
print(n[0], "small writes")
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
