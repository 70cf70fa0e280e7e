"""CPU per line of replay/scan.py check_lines over the first ten segments of a journal (three passes;
the first is cold): `python scan_line_cost.py JOURNAL_DIR`."""
import glob, sys, time
from adapters.runtime.jsonfast import loads
from replay import scan
from replay.tasks import read_segment
paths = sorted(glob.glob(sys.argv[1] + "/**/segment-*", recursive=True))[:10]
datas = [read_segment(p) for p in paths]
n = sum(d.count(b"\n") for d in datas)
for _ in range(3):
    t = time.process_time()
    for d in datas:
        scan.check_lines(d, loads)
    print(f"{(time.process_time() - t) / n * 1e6:.2f} us a line ({n} lines)")
