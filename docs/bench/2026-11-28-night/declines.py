"""How often each columnar path declines in the replay of sampled units, and on which line."""
import sys, random, linecache
from pathlib import Path
from collections import Counter
from replay import local
from replay.plan import plan_units
from replay.fold import UnitFold
from controller_core import columnar_brokers, columnar_startup, columnar_online, columnar_shutdown
J = Path(sys.argv[1]); N = int(sys.argv[2])
seen = Counter()
def wrap(mod, name):
    real = getattr(mod, name)
    def w(*a, **k):
        line = [None]
        def tracer(frame, event, arg):
            if event == "return" and frame.f_code is real.__code__:
                line[0] = frame.f_lineno
            return tracer if frame.f_code is real.__code__ else None
        sys.setprofile(None)
        old = sys.gettrace(); sys.settrace(tracer)
        try:
            out = real(*a, **k)
        finally:
            sys.settrace(old)
        ok = out is not None and out is not False
        seen[(mod.__name__.split('.')[-1], name, "taken" if ok else f"declined at {line[0]}: {linecache.getline(mod.__file__, line[0]).strip()[:70]}")] += 1
        return out
    setattr(mod, name, w)
wrap(columnar_brokers, "on_broker_failure"); wrap(columnar_startup, "replicas_online"); wrap(columnar_online, "elect_waiting"); wrap(columnar_shutdown, "on_controlled_shutdown")
jdirs = sorted(J.iterdir())
for jdir in jdirs[:2]:
    summaries, records, findings, clusters = local.scan(jdir)
    units, _ = plan_units(summaries)
    random.seed(3)
    for u in random.sample(units, min(N, len(units))):
        recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
        UnitFold(u._asdict(), "j").run(records[u.head_path][0][4], recs)
for k, v in sorted(seen.items()): print(v, k)
