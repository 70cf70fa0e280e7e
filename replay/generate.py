"""Generate controller journals from a long, random but seeded cluster life (no ZooKeeper).

    python -m replay.generate --out DIR --events N --partitions P --seed S [--controllers K]
        [--brokers B] [--segment-bytes BYTES] [--no-compress]

Drives the pure core through broker failures and returns, bounces, controlled shutdowns, topic
churn and partition expansion, reassignments (some halted on an offline target), preferred and
unclean elections, unclean-election config changes, partition leaders changing their ISR (which
makes some controller writes conflict), and controller failovers between K controller-eligible
nodes with increasing epochs (crash and restart, session expiry, zombie fenced on its next
write). See `replay/world.py`. Each node writes `DIR/node-<id>/` with `adapters.journal.writer.Journal`,
so the output is byte-compatible with a live cluster's journals and the same seed always gives
the same bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .world import START_AT, World


def generate(out, *, events: int, partitions: int, seed: int, controllers: int = 3, brokers: int | None = None,
             segment_bytes: int = 4 << 20, compress: bool = True, progress=None) -> dict:
    """Write the journals; return a summary (counts of what happened, and the final states)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    world = World(out, seed=seed, partitions=partitions, controllers=controllers, brokers=brokers,
                  segment_bytes=segment_bytes, compress=compress)
    try:
        world.run(events, progress=progress)
    finally:
        world.close()
    return {
        "events": world.events,
        "partitions": world.partition_count(),
        "topics": len(world.topics),
        "epoch": world.epoch,
        "controller": world.controller,
        "simulated_ms": world.now - START_AT,
        "stats": dict(sorted(world.stats.items())),
        "world": world,
    }


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # The core's command order still depends on str hashing in two places (see README,
        # "Known core issues"), and the simulation's random draws follow the commands: pin the
        # hash seed so that a seed always gives the same bytes, and so that Spark's Python
        # workers (PYTHONHASHSEED=0 by default) re-execute the same command order.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        args = sys.argv[1:] if argv is None else list(argv)
        os.execve(sys.executable, [sys.executable, "-m", "replay.generate", *args], env)
    p = argparse.ArgumentParser(prog="python -m replay.generate", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory to write node-<id>/ journals into (created)")
    p.add_argument("--events", type=int, required=True, help="events to journal, over all nodes")
    p.add_argument("--partitions", type=int, required=True, help="partitions the cluster holds (about)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--controllers", type=int, default=3, help="controller-eligible nodes (journals)")
    p.add_argument("--brokers", type=int, default=None, help="brokers in all (default: max(controllers, 5))")
    p.add_argument("--segment-bytes", type=int, default=4 << 20)
    p.add_argument("--no-compress", action="store_true", help="leave closed segments uncompressed")
    args = p.parse_args(argv)
    if args.events <= 0 or args.partitions <= 0 or args.controllers <= 0 or args.segment_bytes <= 0:
        print("error: --events, --partitions, --controllers and --segment-bytes must be positive", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(f"error: --out {out} is not empty", file=sys.stderr)
        return 2
    started = time.perf_counter()

    def progress(n: int) -> None:
        elapsed = time.perf_counter() - started
        print(f"\r{n:>10,} events  {elapsed:7.1f} s  {n / max(elapsed, 1e-9):8,.0f} events/s", end="",
              file=sys.stderr, flush=True)

    try:
        summary = generate(out, events=args.events, partitions=args.partitions, seed=args.seed,
                           controllers=args.controllers, brokers=args.brokers, segment_bytes=args.segment_bytes,
                           compress=not args.no_compress, progress=progress if sys.stderr.isatty() else None)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary.pop("world")
    summary["seconds"] = round(time.perf_counter() - started, 1)
    print(file=sys.stderr)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
