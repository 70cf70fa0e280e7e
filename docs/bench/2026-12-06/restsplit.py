"""Where a fold task's time outside step() goes: wrappers with perf_counter (no profiler),
over sampled units folded as the tasks fold them (docs/bench/2026-11-28-evening/foldprof.py's set-up)."""
import sys, time, runpy
from collections import Counter
import replay.fold as F, replay.tasks as T
from controller_core import codec
acc = Counter(); calls = Counter()
def wrap(obj, name, label):
    real = getattr(obj, name)
    def w(*a, **k):
        t = time.perf_counter()
        try: return real(*a, **k)
        finally: acc[label] += time.perf_counter() - t; calls[label] += 1
    setattr(obj, name, w)
wrap(F.UnitFold, "_decide", "history: _decide (a write's entries)")
wrap(F.UnitFold, "_history", "history (all)")
wrap(F, "confirm", "history: confirm")
wrap(F, "_assignments", "history: observed assignments")
wrap(F.UnitFold, "_elected_rows", "history: elected rows")
wrap(codec, "decode_event", "decode_event")
wrap(F, "verify_line", "verify_line")
wrap(T, "stage_files", "stage_files (Arrow + Parquet)")
import adapters.journal.format as JF
wrap(JF, "_verify_bytes", "verify bytes+parse")
sys.argv = ["foldprof.py"] + sys.argv[1:]
runpy.run_path("docs/bench/2026-11-28-evening/foldprof.py", run_name="__main__")
ev = 2 * 59379  # foldprof folds twice (plain, then collector paused)
for k, v in sorted(acc.items(), key=lambda kv: -kv[1]):
    print(f"{k:40s} {v:7.2f} s  {1e6*v/ev:6.1f} us/event  ({calls[k]} calls)")
