"""Why ControllerElected declines the columnar start of the machines."""
import sys, random
from pathlib import Path
from collections import Counter
import numpy as np
from replay import local
from replay.plan import plan_units
from replay.fold import UnitFold
from controller_core import columnar_failover as CF, vector_election as V
from controller_core.columns import PAD, R_OFFLINE_FROM
from controller_core.machines import PartitionState
J = Path(sys.argv[1]); N = int(sys.argv[2])
reasons = Counter()
real = CF.start_machines
def why(d):
    ok = real(d)
    if ok:
        reasons["columnar"] += 1; return ok
    if d.has_writes or d.log or d.lai or d.stop:
        reasons["draft busy: w%d l%d lai%d s%d" % (bool(d.has_writes), bool(d.log), bool(d.lai), bool(d.stop))] += 1; return ok
    image = d.partitions
    if image.odd or not image.count:
        reasons["odd/empty"] += 1; return ok
    rows = np.flatnonzero(image.column("present"))
    pstate = image.column("pstate")[rows]; has = image.column("has_state")[rows]
    from controller_core.columns import P_CODE
    if (has & (pstate != P_CODE[PartitionState.ONLINE]) & (pstate != P_CODE[PartitionState.OFFLINE])).any() or (~has & (pstate != P_CODE[PartitionState.NEW])).any():
        reasons["pstate"] += 1; return ok
    kept = ~image.topic_mask(d.topics_to_delete)[rows] if d.topics_to_delete else np.ones(len(rows), bool)
    if (image.column("controller_epoch")[rows][kept] > d.epoch).any():
        reasons["newer epoch"] += 1; return ok
    replicas = image.column("replicas")[rows]; isr = image.column("isr")[rows]
    if ((isr != PAD) & ~V.contained(isr, replicas))[kept].any():
        reasons["half-done reassignment"] += 1; return ok
    dead_at = (replicas != PAD) & ~V.member(replicas, d.live) & kept[:, None]
    if (dead_at & ~V.one_of(image.column("rstate")[rows], R_OFFLINE_FROM)).any():
        from controller_core.columns import REPLICA_STATES
        rs = image.column("rstate")[rows][dead_at & ~V.one_of(image.column("rstate")[rows], R_OFFLINE_FROM)]
        reasons["dead replica rstate " + ",".join(sorted({str(REPLICA_STATES[x]) for x in rs.tolist()}))] += 1; return ok
    reasons["later"] += 1
    return ok
CF.start_machines = why
jdirs = sorted(p for p in J.iterdir())
total = 0
for jdir in jdirs:
    summaries, records, findings, clusters = local.scan(jdir)
    units, _ = plan_units(summaries)
    random.seed(2)
    for u in random.sample(units, min(N, len(units))):
        recs = sorted(r for s in summaries for r in records.get(s.path, ()) if r[1] != "snapshot" and u.lo < (r[5] if r[1] == "effects" else r[0]) <= u.hi)
        head = records[u.head_path][0][4]
        UnitFold(u._asdict(), "j").run(head, recs)
print(reasons)
