"""Only the ISR-change part of `benchmarks.core_step` (issue 18's one-partition target), without
the whole benchmark's minutes:

    python -m benchmarks.isr_change_only [--runs 7] [--rounds 3] [--cpu]

Runs `bench_isr_change` of benchmarks/core_step.py (the same 100,000-partition cluster, event and
loops) `--rounds` times in this process and prints each round's medians in microseconds: the
step, the step with the digest of its commands, that digest alone and by its definition. With
`--cpu` its clock is the process's CPU time (`time.process_time`) instead of the wall clock, for
a machine that other work shares."""
from __future__ import annotations

import argparse
import time
import types

from benchmarks import core_step


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpu", action="store_true", help="time with the process's CPU time, not the wall clock")
    args = ap.parse_args(argv)
    if args.cpu:
        core_step.time = types.SimpleNamespace(perf_counter=time.process_time)
    for _ in range(args.rounds):
        r = core_step.bench_isr_change(args.runs)
        print(f"ISR change on 100,000 partitions: step {r['step_ms'] * 1000:.1f} us, with its digest "
              f"{r['with_digest_ms'] * 1000:.1f} us; the digest alone {r['digest_ms'] * 1000:.1f} us, "
              f"by its definition {r['reference_digest_ms'] * 1000:.1f} us (median of {r['runs']}"
              f"{', CPU time' if args.cpu else ''})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
