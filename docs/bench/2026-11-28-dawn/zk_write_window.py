"""`kctl bench failover`, with each 10,000-state partition-state write's window measured: from
its first multi-op sent to its last answer, how much CPU ZooKeeper's JVM, this process (the
controller and the in-process nodes) and the broker processes used, and how busy the machine was
(/proc). Used on 2026-11-28 to learn whether a broker failure's write waits on the controller's
client or on the machine (zk-write-window.txt). NOPROG=1 switches the writer's partial releases
off (PROGRESS_MIN), to see the write with the brokers idle.

    PYTHONPATH=. python docs/bench/2026-11-28-dawn/zk_write_window.py bench failover \
        --partitions 10000 --runs 3 --scenarios broker-failure --modes batched --no-unprepared --no-client --out DIR
"""
import sys, time, os, subprocess
from adapters.zookeeper import session as S
if os.environ.get("NOPROG"):
    from adapters.controller import zkwriter as W; W.PROGRESS_MIN = 10**9
TCK = os.sysconf("SC_CLK_TCK")
def zkpid():
    out = subprocess.run(["pgrep", "-f", "ZooKeeperServerMain"], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None
def pcpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TCK
def allcpu():
    f = open("/proc/stat").readline().split()[1:]
    v = list(map(int, f)); idle = v[3] + v[4]
    return (sum(v) - idle) / TCK, sum(v) / TCK
def others():
    # cpu of every python kctl node process (brokers)
    out = subprocess.run(["pgrep", "-f", "adapters.cli node"], capture_output=True, text=True).stdout.split()
    s = 0.0
    for p in out:
        try: s += pcpu(int(p))
        except Exception: pass
    return s
ST = {}
orig_send = S.ZkSession._send_states
async def send_states(self, body, members, paths, fenced_check, notify):
    t = time.perf_counter()
    if len(members) >= 100 and "t" not in ST:
        pid = zkpid()
        ST.update(t=t, pid=pid, zk=pcpu(pid), me=time.process_time(), all=allcpu(), br=others(), n=0)
    try:
        return await orig_send(self, body, members, paths, fenced_check, notify)
    finally:
        if len(members) >= 100 and "t" in ST:
            ST["n"] += 1
            if ST["n"] == 50:
                dt = time.perf_counter() - ST["t"]
                busy0, tot0 = ST["all"]; busy1, tot1 = allcpu()
                print(f"WRITE WINDOW {dt*1000:.0f} ms: zk cpu {(pcpu(ST['pid'])-ST['zk'])*1000:.0f} ms, this process {(time.process_time()-ST['me'])*1000:.0f} ms, "
                      f"broker procs {(others()-ST['br'])*1000:.0f} ms, machine busy {(busy1-busy0)*1000:.0f} of {(tot1-tot0)*1000:.0f} ms", file=sys.stderr)
                ST.clear()
S.ZkSession._send_states = send_states
from adapters.cli.kctl import main
sys.exit(main(sys.argv[1:]))
