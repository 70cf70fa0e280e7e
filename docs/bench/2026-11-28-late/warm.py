"""How many floor passes until the embedded ZooKeeper's JIT settles: per pass, wall ms, ZK CPU, JIT threads' CPU."""
import asyncio, sys, os, tempfile
from pathlib import Path
from adapters.zookeeper.server import EmbeddedZooKeeper
from benchmarks import floors
from benchmarks.meters import CpuMeter
from benchmarks.failover import PHASES
def jit_ticks(pid):
    t = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        st = open(f"/proc/{pid}/task/{tid}/stat").read()
        if "Compiler" in st[st.index("("):st.rindex(")")]:
            f = st.rsplit(")", 1)[1].split(); t += int(f[11]) + int(f[12])
    return t
async def main(n, passes):
    server = EmbeddedZooKeeper(Path(tempfile.mkdtemp()) / "zk"); server.start()
    try:
        meter = lambda: CpuMeter(lambda: {"controller_process": [os.getpid()], "zookeeper": [server.pid], "brokers": []})
        for rnd in range(passes):
            for reads in (False, True):
                j0 = jit_ticks(server.pid)
                s = await floors.zk_floor(server.connect_string, n, reads, 3, meter(), PHASES)
                j1 = jit_ticks(server.pid)
                print(f"round {rnd} {'read ' if reads else 'write'}: " + " ".join(f"{x['total_ms']:.0f}ms/zk{x['cpu']['zookeeper_ms']:.0f}" for x in s), f"jit {10*(j1-j0)} ms", flush=True)
    finally:
        server.stop()
asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
