import json, sys
from datetime import datetime
d = json.load(open(sys.argv[1]))
def ts(s): return datetime.strptime(s.replace("GMT",""), "%Y-%m-%dT%H:%M:%S.%f").timestamp()
rows = []
for s in d["stages"]:
    if s.get("status") != "COMPLETE" or "submissionTime" not in s: continue
    wall = ts(s["completionTime"]) - ts(s["submissionTime"])
    rows.append((ts(s["submissionTime"]), s["stageId"], wall, s["executorRunTime"]/1000, s["executorCpuTime"]/1e9, s["numTasks"], s["name"][:60], s.get("jvmGcTime",0)/1000))
rows.sort()
t0 = rows[0][0]
for r in rows:
    if r[2] > 0.5:
        print(f"{r[0]-t0:7.1f} stage {r[1]:3d} wall {r[2]:6.1f} run {r[3]:7.1f} cpu {r[4]:7.1f} gc {r[7]:5.1f} tasks {r[5]:4d} {r[6]}")
