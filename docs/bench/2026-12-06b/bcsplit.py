"""BrokersChanged: where the step goes when the decision is parked for a re-read."""
import sys, time
import replay.fold as foldmod
from benchmarks.sampled_units import fold, sampled_units
from controller_core import events as E, columnar_brokers as CB
rows = []
cur = {}
real_step = foldmod.step
def step(s, e):
    cur.clear(); cur["t0"] = time.perf_counter()
    out = real_step(s, e)
    if type(e) in (E.BrokersChanged, E.PartitionStatesRechecked):
        cur["total"] = time.perf_counter() - cur["t0"]
        rows.append((type(e).__name__, dict(cur), bool(out[0].rechecking)))
    return out
real_off = CB.V.offline
def offline(*a, **k):
    out = real_off(*a, **k)
    cur["offline_done"] = time.perf_counter() - cur["t0"]
    return out
CB.V.offline = offline
real_fail = CB.on_broker_failure
def fail(d, dead, *rest):
    t = time.perf_counter()
    cur["fail_start"] = t - cur["t0"]
    try:
        r = real_fail(d, dead, *rest)
    except BaseException:
        cur["fail_end"] = time.perf_counter() - cur["t0"]; cur["columnar"] = "parked"
        raise
    cur["fail_start"] = t - cur["t0"]; cur["fail_end"] = time.perf_counter() - cur["t0"]; cur["columnar"] = r
    return r
CB.on_broker_failure = fail
units = sampled_units(sys.argv[1], int(sys.argv[2]), seed=4)
foldmod.step = step
for u in units:
    fold(u)
for name, c, parked in rows:
    if name == "BrokersChanged" or "fail_start" in c:
        print(name, "parked" if parked else "decided", {k: (round(v * 1e3, 2) if isinstance(v, float) else v) for k, v in c.items() if k != "t0"})
