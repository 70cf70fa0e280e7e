"""Profile step() for one event type while replay.local re-executes a journal."""
import cProfile, pstats, sys
from replay import fold, local
kind = sys.argv[2]
pr = cProfile.Profile()
real = fold.step
def step(state, event):
    if type(event).__name__ == kind:
        pr.enable()
        try:
            return real(state, event)
        finally:
            pr.disable()
    return real(state, event)
fold.step = step
local.main(["--journal", sys.argv[1]]) if hasattr(local, "main") else None
pstats.Stats(pr).sort_stats(sys.argv[3] if len(sys.argv) > 3 else "cumulative").print_stats(35)
