"""Where the journal generator's CPU goes: `step()`, the digest of the commands (both
`replay.digest` and `codec.digest`, on the same decisions), the journal appends, the cyclic
collector, and per event type.

    PYTHONHASHSEED=0 python -m benchmarks.generator_parts --out DIR --events 4000 --partitions 10000 [--by-type]

Times are CPU seconds (`time.process_time`), so a loaded machine changes them less than wall
times (but still some: two busy cores share caches). The generator itself digests once, with
`replay.digest`, right after `step()`; that digest is timed first here, because the first
consumer of a decision's broker requests pays for gathering their partitions from the state's
columns (the core builds them lazily), and the generator's digest is that consumer. `codec.digest`
is then timed on the same, already gathered, commands; the total counts one digest.
`--by-type` adds a table per event type (count, step and digest CPU, per event).
"""
from __future__ import annotations

import argparse
import gc
import sys
import time

from benchmarks.meters import per_event as _us
from controller_core import codec
from replay import digest as fast
from replay import world
from replay.generate import generate


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.generator_parts")
    p.add_argument("--out", required=True)
    p.add_argument("--events", type=int, default=4000)
    p.add_argument("--partitions", type=int, default=10000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--by-type", action="store_true", help="also a table per event type")
    args = p.parse_args(argv)

    acc = {"step": 0.0, "digest (replay.digest)": 0.0, "digest (codec, views gathered)": 0.0, "journal append": 0.0,
           "cyclic collector": 0.0}
    per_type: dict[str, list] = {}  # type -> [count, step s, digest s]
    real_step, real_append = world.step, world.Journal.append

    def step(state, event):
        t = time.process_time()
        result = real_step(state, event)
        t1 = time.process_time()
        fast.digest(result[1])
        t2 = time.process_time()
        codec.digest(result[1])
        t3 = time.process_time()
        acc["step"] += t1 - t
        acc["digest (replay.digest)"] += t2 - t1
        acc["digest (codec, views gathered)"] += t3 - t2
        row = per_type.setdefault(type(event).__name__, [0, 0.0, 0.0])
        row[0] += 1
        row[1] += t1 - t
        row[2] += t2 - t1
        return result

    def append(self, *a, **k):
        t = time.process_time()
        seq = real_append(self, *a, **k)
        acc["journal append"] += time.process_time() - t
        return seq

    started_gc = [0.0]

    def collector(phase, info):
        if phase == "start":
            started_gc[0] = time.process_time()
        else:
            acc["cyclic collector"] += time.process_time() - started_gc[0]

    world.step, world.Journal.append = step, append
    world.fast_digest = lambda commands: "0" * 32  # timed above; not a third time
    gc.callbacks.append(collector)
    try:
        started = time.process_time()
        generate(args.out, events=args.events, partitions=args.partitions, seed=args.seed)
        total = time.process_time() - started - acc["digest (codec, views gathered)"]
    finally:
        gc.callbacks.remove(collector)
    print(f"{args.events} events, {args.partitions} partitions, seed {args.seed}: {total:.2f} CPU s in all "
          f"(one digest), {args.events / total:,.0f} events per CPU s")
    for name, seconds in acc.items():
        print(f"  {name:32} {seconds:7.2f} s")
    rest = total - acc["step"] - acc["digest (replay.digest)"] - acc["journal append"] - acc["cyclic collector"]
    print(f"  {'the rest (world, snapshots, I/O)':32} {rest:7.2f} s")
    if args.by_type:
        print(f"\n  {'event type':30} {'count':>7} {'step s':>8} {'digest s':>9} {'step/event':>11} {'digest/event':>13}")
        for name, (n, s, d) in sorted(per_type.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
            print(f"  {name:30} {n:7d} {s:8.2f} {d:9.2f} {_us(s / n):>11} {_us(d / n):>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
