"""StopReplicaResponded in the replay: how many queued topics and partitions each resume reads, and where its time goes."""
import sys, random, time
from pathlib import Path
from collections import Counter
from replay import local
from replay.plan import plan_units
from replay.fold import UnitFold
from controller_core import deletion as D
J = Path(sys.argv[1]); N = int(sys.argv[2])
tm = Counter(); n = Counter(); sizes = []
def timed(name, fn):
    def w(*a, **k):
        t = time.perf_counter()
        try: return fn(*a, **k)
        finally: tm[name] += time.perf_counter() - t; n[name] += 1
    return w
real_resume = D.resume
def resume(d):
    q = sorted(d.topics_to_delete)
    sizes.append((len(q), sum(len(d.partitions_of(t)) for t in q)))
    return real_resume(d)
D.resume = timed("resume", resume)
D._complete = timed("_complete", D._complete)
D._on_topic_deletion = timed("_on_topic_deletion", D._on_topic_deletion)
D.on_stop_replica_response = timed("on_stop_replica_response", D.on_stop_replica_response)
import importlib; S = importlib.import_module("controller_core.step")
from controller_core import events as E
h = S._HANDLERS[E.StopReplicaResponded]
S._HANDLERS[E.StopReplicaResponded] = timed("handler", h)
jdir = sorted(J.iterdir())[0]
summaries, records, findings, clusters = local.scan(jdir)
units, _ = plan_units(summaries)
random.seed(4)
for u in random.sample(units, N):
    recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
    UnitFold(u._asdict(), "j").run(records[u.head_path][0][4], recs)
for k in tm: print(f"{k:28s} {n[k]:7d} {tm[k]*1e6/n[k]:9.1f} us  {tm[k]:.3f} s")
import statistics
print("queued topics median/max", statistics.median(s[0] for s in sizes), max(s[0] for s in sizes), "partitions median/max", statistics.median(s[1] for s in sizes), max(s[1] for s in sizes))
