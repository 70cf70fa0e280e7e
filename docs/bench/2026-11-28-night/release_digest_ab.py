"""The digest of the large releases (requests of 4,096 partitions or more) among the
PartitionStatesWritten decisions of sampled units of a journal: each checked against the
definition (`codec.reference_digest`), then timed with and without the shared rows
(`digest._SharedRows`), alternating, and profiled.

    python docs/bench/2026-11-28-night/release_digest_ab.py J UNITS
"""
import sys, random, time
from pathlib import Path
from replay import local, fold as foldmod
from replay.plan import plan_units
from replay.fold import UnitFold
from controller_core import codec, digest as D
J = Path(sys.argv[1]); N = int(sys.argv[2])
kept = []
real_step = foldmod.step
def step(s, e):
    out = real_step(s, e)
    if type(e).__name__ == "PartitionStatesWritten":
        kept.append(out[1])
    return out
foldmod.step = step
jdir = sorted(J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(2)
for u in random.sample(units, N):
    recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
    UnitFold(u._asdict(), "j").run(records[u.head_path][0][4], recs)
dg = foldmod.fast_digest
def size(c):
    v = getattr(c, "partitions", None)
    return len(v) if v is not None and hasattr(v, "__len__") else 0
big = [c for c in kept if max([size(x) for x in c] or [0]) >= 4096]
bad = sum(dg.digest(c) != codec.reference_digest(c) for c in big)
print("big", len(big), "mismatches", bad)
# timing: shared on vs off, alternating
real_rows = D._SharedRows.rows
off = lambda self, v, c: None
for rnd in range(3):
    for name, f in (("shared", real_rows), ("own", off)):
        D._SharedRows.rows = f
        t = time.perf_counter()
        for c in big: dg.digest(c)
        print(rnd, name, "%.2f ms/event" % ((time.perf_counter() - t) / len(big) * 1e3))
D._SharedRows.rows = real_rows
import cProfile, pstats
pr = cProfile.Profile(); pr.enable()
for c in big: dg.digest(c)
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(18)
