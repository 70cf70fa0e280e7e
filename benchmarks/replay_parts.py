"""Where the plain replay's CPU goes (`replay.local`: the same read, fold and audit as the Spark
job, in one process): reading and checking the segments, the fold (head snapshots decoded,
events decoded, `step()`, the digest check, history rows, final state hashes), the audit, the
cyclic collector, and per event type.

    PYTHONHASHSEED=0 python -m benchmarks.replay_parts --journal DIR [--by-type]

Times are CPU seconds (`time.process_time`). The parts are timed by wrapping the functions the
fold calls, which adds a few µs per event to the total.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time

from replay import fold, local

from benchmarks.meters import per_event as _us


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.replay_parts")
    p.add_argument("--journal", required=True, nargs="+")
    p.add_argument("--by-type", action="store_true", help="also a table per event type")
    args = p.parse_args(argv)

    parts = {"read and check (scan)": 0.0, "head snapshots decoded": 0.0, "events decoded": 0.0,
             "step()": 0.0, "digest": 0.0, "history rows": 0.0, "state hashes (head, final)": 0.0,
             "audit per partition": 0.0, "cyclic collector": 0.0}
    per_type: dict[str, list] = {}  # type -> [count, step, digest, history]
    current: list = [None]

    def timed(owner, name, part):
        real = getattr(owner, name)

        def wrapper(*a, **k):
            t = time.process_time()
            try:
                return real(*a, **k)
            finally:
                parts[part] += time.process_time() - t
        setattr(owner, name, wrapper)
        return real

    real_step, real_digest, real_history = fold.step, fold.fast_digest, fold.UnitFold._history

    def step(state, event):
        t = time.process_time()
        result = real_step(state, event)
        dt = time.process_time() - t
        row = current[0] = per_type.setdefault(type(event).__name__, [0, 0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += dt
        parts["step()"] += dt
        return result

    class Digest:
        @staticmethod
        def digest(commands):
            t = time.process_time()
            result = real_digest.digest(commands)
            dt = time.process_time() - t
            current[0][2] += dt
            parts["digest"] += dt
            return result

    def history(self, *a):
        t = time.process_time()
        try:
            return real_history(self, *a)
        finally:
            dt = time.process_time() - t
            current[0][3] += dt
            parts["history rows"] += dt

    started_gc = [0.0]

    def collector(phase, info):
        if phase == "start":
            started_gc[0] = time.process_time()
        else:
            parts["cyclic collector"] += time.process_time() - started_gc[0]

    fold.step, fold.fast_digest, fold.UnitFold._history = step, Digest, history
    timed(local, "scan", "read and check (scan)")
    timed(fold.codec, "decode_state", "head snapshots decoded")
    timed(fold.codec, "decode_event", "events decoded")
    timed(fold, "state_hashes", "state hashes (head, final)")
    timed(fold.codec, "encode_state", "state hashes (head, final)")
    timed(local.audit, "audit_partition", "audit per partition")
    gc.callbacks.append(collector)
    try:
        started = time.process_time()
        result = local.replay(args.journal if len(args.journal) > 1 else args.journal[0])
        total = time.process_time() - started
    finally:
        gc.callbacks.remove(collector)
    events = result.stats["events"]
    print(f"{events} events, {result.stats['units']} units, verdict {'PASS' if result.passed else 'FAIL'}: "
          f"{total:.2f} CPU s in all, {events / total:,.0f} events per CPU s")
    for name, seconds in parts.items():
        print(f"  {name:32} {seconds:7.2f} s")
    print(f"  {'the rest':32} {total - sum(parts.values()):7.2f} s")
    reexec = parts["step()"] + parts["digest"]
    print(f"  re-execution (step + digest): {events / reexec:,.0f} events per CPU s")
    if args.by_type:
        print(f"\n  {'event type':30} {'count':>7} {'step s':>7} {'digest s':>9} {'history s':>10} "
              f"{'step/ev':>9} {'digest/ev':>10} {'history/ev':>11}")
        for name, (n, s, d, h) in sorted(per_type.items(), key=lambda kv: -sum(kv[1][1:])):
            print(f"  {name:30} {n:7d} {s:7.2f} {d:9.2f} {h:10.2f} {_us(s / n):>9} {_us(d / n):>10} {_us(h / n):>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
