import sys, time, cProfile, pstats
from benchmarks.sampled_units import sampled_units
from replay.records import verify_line
from controller_core import codec
u = sampled_units(sys.argv[1], 1, seed=1)[0]
rec = u.head if isinstance(u.head, dict) else verify_line(u.head)
enc = rec["body"]["state"]
for _ in range(3):
    t = time.perf_counter(); s = codec.decode_state(enc); print(f"decode_state {1e3*(time.perf_counter()-t):.1f} ms")

t = time.perf_counter(); e = codec.encode_state(s); print(f"encode_state {1e3*(time.perf_counter()-t):.1f} ms")
pr = cProfile.Profile(); pr.enable(); codec.decode_state(enc); pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(12)
