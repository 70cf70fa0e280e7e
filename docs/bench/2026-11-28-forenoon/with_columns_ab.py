"""PartitionImage.with_columns on the 10,000- or 100,000-partition broker failure's groups (argv[1]):
the chunk-at-a-time way against the whole-columns way, interleaved in one process, 9 rounds;
asserts the same chunks."""
import time, statistics, sys
exec(open(__file__.replace("with_columns_ab.py", "_cluster.py")).read())
from controller_core import columns
real = columns.PartitionImage.with_columns
captured = []
def cap(self, *groups):
    captured.append((self, groups)); return real(self, *groups)
columns.PartitionImage.with_columns = cap
step(state, ev)
columns.PartitionImage.with_columns = real
img, groups = captured[0]
res = {"chunks": [], "whole": []}
for _ in range(9):
    for k, th in (("chunks", 10**9), ("whole", 16)):
        columns._WHOLE_COLUMNS = th
        t = time.perf_counter(); out = img.with_columns(*groups); res[k].append((time.perf_counter() - t) * 1000)
columns._WHOLE_COLUMNS = 10**9; a = img.with_columns(*groups)
columns._WHOLE_COLUMNS = 16; b = img.with_columns(*groups)
import numpy as np
assert all(all(np.array_equal(x, y) for x, y in zip(ca, cb)) for ca, cb in zip(a.chunks, b.chunks))
print({k: round(statistics.median(v), 2) for k, v in res.items()}, [len(r) for r, _ in groups])
