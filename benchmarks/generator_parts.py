"""Where the journal generator's CPU goes: `step()`, the digest of the commands (both
`codec.digest` and `replay.digest`, on the same decisions), and the journal appends.

    PYTHONHASHSEED=0 python -m benchmarks.generator_parts --out DIR --events 4000 --partitions 10000

Times are CPU seconds (`time.process_time`), so a loaded machine changes them little. The
generator itself digests once (with `replay.digest`); both digests are timed on every decision
here, and the total counts one.
"""
from __future__ import annotations

import argparse
import sys
import time
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
    args = p.parse_args(argv)


    acc = {"step": 0.0, "digest (codec)": 0.0, "digest (replay.digest)": 0.0, "journal append": 0.0}
    real_step, real_append = world.step, world.Journal.append

    def step(state, event):
        t = time.process_time()
        result = real_step(state, event)
        acc["step"] += time.process_time() - t
        t = time.process_time()
        codec.digest(result[1])
        acc["digest (codec)"] += time.process_time() - t
        t = time.process_time()
        fast.digest(result[1])
        acc["digest (replay.digest)"] += time.process_time() - t
        return result

    def append(self, *a, **k):
        t = time.process_time()
        seq = real_append(self, *a, **k)
        acc["journal append"] += time.process_time() - t
        return seq

    world.step, world.Journal.append = step, append
    world.fast_digest = lambda commands: "0" * 32  # timed above; not a third time
    started = time.process_time()
    generate(args.out, events=args.events, partitions=args.partitions, seed=args.seed)
    total = time.process_time() - started - acc["digest (codec)"]
    print(f"{args.events} events, {args.partitions} partitions, seed {args.seed}: {total:.2f} CPU s in all")
    for name, seconds in acc.items():
        print(f"  {name:24} {seconds:7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
