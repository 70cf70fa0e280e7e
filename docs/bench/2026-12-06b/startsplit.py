"""BrokersChanged parked without a failure (a startup): where its step goes."""
import sys, time
import replay.fold as foldmod
from benchmarks.sampled_units import fold, sampled_units
from controller_core import events as E, columnar_online as CO, columnar_startup as CS, brokers as B
rows = []
cur = {}
real_step = foldmod.step
def step(s, e):
    cur.clear(); cur["t0"] = time.perf_counter()
    out = real_step(s, e)
    if type(e) is E.BrokersChanged:
        cur["total"] = time.perf_counter() - cur["t0"]
        rows.append((dict(cur), bool(out[0].rechecking)))
    return out
def wrap(mod, name, key):
    real = getattr(mod, name)
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            cur[key + "_start"] = t - cur["t0"]; cur[key + "_end"] = time.perf_counter() - cur["t0"]
    setattr(mod, name, w)
wrap(CO, "elect_waiting", "elect")
wrap(CS, "replicas_online", "online")
wrap(B, "on_broker_failure", "fail")
units = sampled_units(sys.argv[1], int(sys.argv[2]), seed=4)
foldmod.step = step
for u in units:
    fold(u)
for c, parked in rows:
    if "fail_start" not in c:
        print("parked" if parked else "decided", {k: round(v * 1e3, 2) for k, v in c.items() if k != "t0"})
