"""Poll the ZooKeeper JVM's threads' CPU (procfs) every 10 ms; print per-thread-name CPU in windows of activity."""
import os, sys, time, glob, json
out = open(sys.argv[1], "w")
pid = None
while pid is None:
    for p in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            if b"ZooKeeperServerMain" in open(p, "rb").read():
                pid = p.split("/")[2]; break
        except OSError: pass
    time.sleep(0.05)
print("pid", pid, file=sys.stderr)
while True:
    snap = {}
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                st = open(f"/proc/{pid}/task/{t}/stat").read()
                name = st[st.index("(")+1:st.rindex(")")]
                f = st.rsplit(")", 1)[1].split()
                snap[t] = (name, int(f[11]) + int(f[12]))
            except OSError: pass
    except FileNotFoundError:
        break
    out.write(json.dumps([time.time(), snap]) + "\n")
    time.sleep(0.01)
