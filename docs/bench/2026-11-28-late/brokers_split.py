"""BrokersChanged in the replay: where a step's time goes (wall time of each part, no profiler)."""
import sys, random, time
from pathlib import Path
from collections import Counter
from replay import local
from replay.plan import plan_units
from replay.fold import UnitFold
from controller_core import brokers as B, columnar_startup, columnar_online, columnar_brokers, reassignment, deletion, draft as DR
from controller_core import partitions as P
J = Path(sys.argv[1]); N = int(sys.argv[2])
tm = Counter(); n = Counter(); ret = Counter()
def timed(name, mod, attr):
    fn = getattr(mod, attr)
    def w(*a, **k):
        t = time.perf_counter()
        try:
            out = fn(*a, **k); ret[(name, out is None or out is False)] += 1; return out
        finally: tm[name] += time.perf_counter() - t; n[name] += 1
    setattr(mod, attr, w)
timed("on_brokers_changed", B, "on_brokers_changed")
timed("startup", B, "on_broker_startup")
timed("failure", B, "on_broker_failure")
timed("  startup.replicas_online", columnar_startup, "replicas_online")
timed("  startup.elect_waiting", columnar_online, "elect_waiting")
timed("  startup.trigger_online (walk)", P, "trigger_online_state_change")
timed("  reassignment.on_partition_reassignment", reassignment, "on_partition_reassignment")
timed("  deletion.resume_for_topics", deletion, "resume_for_topics")
timed("  failure.columnar", columnar_brokers, "on_broker_failure")
timed("  update_metadata_all", DR.Draft, "send_update_metadata_to_all")
timed("finish", DR.Draft, "finish")
import importlib; S = importlib.import_module("controller_core.step")
from controller_core import events as E
h = S._HANDLERS[E.BrokersChanged]
def bc(state, event, *a):
    t = time.perf_counter()
    try: return h(state, event, *a)
    finally: tm["BrokersChanged handler"] += time.perf_counter() - t; n["BrokersChanged handler"] += 1
S._HANDLERS[E.BrokersChanged] = bc
jdir = sorted(J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(int(sys.argv[3]) if len(sys.argv) > 3 else 4)
for u in random.sample(units, N):
    recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
    UnitFold(u._asdict(), "j").run(records[u.head_path][0][4], recs)
for k in ["BrokersChanged handler", "on_brokers_changed", "startup", "  startup.replicas_online", "  startup.elect_waiting", "  startup.trigger_online (walk)", "  reassignment.on_partition_reassignment", "  deletion.resume_for_topics", "failure", "  failure.columnar", "  update_metadata_all", "finish"]:
    if n[k]: print(f"{k:45s} {n[k]:6d} {tm[k]*1e3/n[k]:8.2f} ms  {tm[k]:.3f} s")
print({k: v for k, v in ret.items() if k[0].strip().startswith(("startup.", "failure."))})
