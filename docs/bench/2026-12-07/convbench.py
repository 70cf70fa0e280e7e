import sys, time
import pyarrow as pa
from benchmarks.sampled_units import sampled_units, fold
from replay import job
T = {"BIGINT": pa.int64(), "INT": pa.int32(), "STRING": pa.string(), "ARRAY<INT>": pa.list_(pa.int32()),
     "BOOLEAN": pa.bool_(), "DOUBLE": pa.float64()}
def struct(ddl):
    return pa.struct([pa.field(n.strip("`"), T[t]) for n, t in (f.split(" ", 1) for f in ddl.split(", "))])
st = struct(job.SCHEMAS["timeline"])
names = [f.name for f in st]
rows = []
for u in sampled_units(sys.argv[1], 3, seed=1): rows += fold(u).timeline
tuples = [tuple(r[n] for n in names) for r in rows]
n = len(rows)
t = time.perf_counter(); a = pa.array(rows, type=st); t1 = time.perf_counter() - t
t = time.perf_counter()
cols = list(zip(*tuples))
b = pa.StructArray.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, st)], fields=list(st))
t2 = time.perf_counter() - t
t = time.perf_counter(); tuples2 = [tuple(r[n] for n in names) for r in rows]; t3 = time.perf_counter() - t
# dict literal vs tuple build cost
r0 = rows[0]
import timeit
d = timeit.timeit(lambda: {"time": 1, "journal": "j", "controller_id": 1, "epoch": 2, "topic": "t", "partition": 3, "leader": 1, "leader_epoch": 4, "isr": [1], "controller_epoch": 2, "zk_version": 3, "replicas": [1], "adding": [], "removing": [], "kind": "observed", "change": None, "cause_type": "X", "cause_seq": 5, "seq": 5, "file": "f", "line": 3}, number=200000) / 200000
tt = timeit.timeit(lambda: (1, "j", 1, 2, "t", 3, 1, 4, [1], 2, 3, [1], [], [], "observed", None, "X", 5, 5, "f", 3), number=200000) / 200000
print(f"{n} rows: dicts->struct {1e6*t1/n:.2f} us/row; tuples->columns {1e6*t2/n:.2f} us/row; equal {a.equals(b)}; dict literal {d*1e6:.2f} us; tuple {tt*1e6:.2f} us")
from itertools import chain, accumulate
import numpy as np
def lists(col, t):
    offsets = np.fromiter(accumulate(map(len, col), initial=0), np.int32, len(col) + 1)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(list(chain.from_iterable(col)), t.value_type))
def conv(tuples):
    cols = list(zip(*tuples))
    arrs = []
    for c, f in zip(cols, st):
        if pa.types.is_list(f.type): arrs.append(lists(c, f.type))
        else: arrs.append(pa.array(c, type=f.type))
    return pa.StructArray.from_arrays(arrs, fields=list(st))
for _ in range(2):
    t = time.perf_counter(); c = conv(tuples); t4 = time.perf_counter() - t
    t = time.perf_counter(); a = pa.array(rows, type=st); t1 = time.perf_counter() - t
    print(f"dicts {1e6*t1/n:.2f} us/row; tuples+flat lists {1e6*t4/n:.2f} us/row equal {c.equals(a)}")
per = {}
cols = list(zip(*tuples))
for c, f in zip(cols, st):
    t = time.perf_counter()
    x = lists(c, f.type) if pa.types.is_list(f.type) else pa.array(c, type=f.type)
    per[f.name] = 1e6 * (time.perf_counter() - t) / n
print({k: round(v, 3) for k, v in per.items()})
