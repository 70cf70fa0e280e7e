"""`kctl replay --journal DIR --out DIR`: the Spark replay and audit (replay/job.py), locally.

Wired into the `kctl` parser by `add_replay_command(subparsers)`. Exit 0 when the audit passes,
1 when it finds a violation; bad input raises `UsageError` (one line, exit 2).
"""
from __future__ import annotations

import os
from pathlib import Path

from adapters.cli.errors import UsageError


def add_replay_command(subparsers) -> None:
    p = subparsers.add_parser(
        "replay", help="replay and audit the controller journals on Spark (locally)",
        description="Re-execute every controller journal under --journal through the pure core on Spark, "
                    "rebuild the cluster's history as Parquet tables under --out, audit it, and write "
                    "--out/report.html. Exit 0 when the audit passes, 1 on a violation.")
    p.add_argument("--journal", required=True, nargs="+", action="extend",
                   help="directories holding the journals of one cluster (searched recursively for node-*/ with "
                        "segment files); several may be given, after one --journal or each after its own")
    p.add_argument("--out", required=True, help="directory for the Parquet tables and report.html (created)")
    p.add_argument("--master", default=os.environ.get("KCTL_SPARK_MASTER", "local[*]"),
                   help="Spark master (default: $KCTL_SPARK_MASTER, then local[*])")
    p.add_argument("--driver-memory", default=os.environ.get("KCTL_SPARK_DRIVER_MEMORY", "2g"),
                   help="memory of the local Spark driver (default: $KCTL_SPARK_DRIVER_MEMORY, then 2g)")
    p.add_argument("--hash-seed", default="0",
                   help="PYTHONHASHSEED the journals' controllers ran with (default 0; see replay/README.md)")
    p.add_argument("--full", action="store_true",
                   help="audit everything from scratch (default: re-execute only what the checkpoint under --out "
                        "has not audited)")
    p.add_argument("--follow", action="store_true",
                   help="keep auditing segments as they close, printing each new finding; Ctrl-C stops, checkpoint "
                        "saved")
    p.add_argument("--poll-seconds", type=float, default=2.0, help="how often --follow looks for closed segments")
    p.set_defaults(func=cmd_replay)


def cmd_replay(args) -> int:
    journals = [Path(j) for j in args.journal]
    for journal in journals:
        if not journal.exists():
            raise UsageError(f"--journal {journal} does not exist")
        if not journal.is_dir():
            raise UsageError(f"--journal {journal} is not a directory")
        if not any(journal.rglob("segment-*.jsonl*")):
            raise UsageError(f"--journal {journal}: no journal segments (segment-<seq>.jsonl[.gz]) found")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a directory")
    if not args.hash_seed.isdigit():
        raise UsageError(f"--hash-seed must be a non-negative integer, got {args.hash_seed!r}")
    if not args.poll_seconds > 0:
        raise UsageError(f"--poll-seconds must be positive, got {args.poll_seconds}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {args.out}: {exc.strerror}")

    from replay import job  # pyspark: a heavy import, only when a replay runs

    spark = job.session(args.master, hash_seed=args.hash_seed, conf={"spark.driver.memory": args.driver_memory})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if args.follow:
            from replay.follow import follow

            return follow(spark, [str(j.resolve()) for j in journals], str(out.resolve()), poll=args.poll_seconds,
                          full=args.full)
        code = job.run(spark, [str(j.resolve()) for j in journals], str(out.resolve()), full=args.full)
    finally:
        spark.stop()
    return code  # 2: job.run printed the one-line error (journals of two clusters, say)
