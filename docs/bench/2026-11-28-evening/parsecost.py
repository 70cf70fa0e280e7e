import sys, time, gzip, random, json
from pathlib import Path
import orjson
J = Path(sys.argv[1])
files = sorted(J.glob("*/segment-*"))
random.seed(1)
agg = {}
for f in random.sample(files, 12):
    b = f.read_bytes(); text = (gzip.decompress(b) if f.name.endswith(".gz") else b)
    for line in text.split(b"\n")[:-1]:
        t = time.perf_counter(); rec = orjson.loads(line); dt = time.perf_counter() - t
        key = rec["type"] + ":" + (rec["body"].get("type", "") if rec["type"] == "event" else "")
        a = agg.setdefault(key, [0, 0.0, 0])
        a[0] += 1; a[1] += dt; a[2] += len(line)
tot = sum(a[1] for a in agg.values())
for k, (n, dt, size) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:15]:
    print(f"{k:45s} n={n:7d} total {dt:6.2f} s ({100*dt/tot:4.1f}%) {1e6*dt/n:8.1f} us/line {size/n/1024:8.1f} KB/line")
