"""Throughput of the Spark replay: events re-executed per second, per core and in total.

    python -m benchmarks.replay_throughput [--journal DIR | --events 1000000 --partitions 10000]
        [--master local[2]] [--out DIR] [--seed 7]

Without --journal, a journal is generated first (replay/generate.py; its time is reported
apart). The job then runs once on a fresh SparkSession, and the table shows:

- re-execution per core: events / (time the executors spent in step() + digest), the issue's
  "events per second per core" (start-up, I/O and history extraction excluded);
- fold per core: events / (time the fold tasks took end to end: checking and parsing the lines,
  step, digest, history rows, and the rows made Arrow columns and Parquet files; before the
  evening of 2026-11-28 this was the fold alone, without the parsing before it and the writing
  after it);
- fold stage in total: events / wall time of the fold stage (all cores);
- the whole job's wall time, and Spark's start-up before it.

With `--incremental N`, the journal is copied, each controller's last segments holding about N
events in all are held back for the first run, then put back for a second run over the same
`--out` on a fresh SparkSession (the second `kctl replay` of the issue: "the same journal plus N
new events"); the second run's wall time, start-up included, and what it re-executed are shown.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.replay_throughput", description=__doc__.split("\n\n")[0])
    p.add_argument("--journal", default=None, help="an existing journal directory (else one is generated)")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--out", default=None, help="where the job writes (default: a temporary directory)")
    p.add_argument("--json", default=None, help="also write the numbers here")
    p.add_argument("--incremental", type=int, default=None, metavar="EVENTS",
                   help="hold back about EVENTS events for a second, incremental run (see above)")
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="replay-bench-"))
    generate_s = None
    journal = Path(args.journal) if args.journal else work / "journals"
    if args.journal is None:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "replay.generate", "--out", str(journal), "--events", str(args.events),
                        "--partitions", str(args.partitions), "--seed", str(args.seed), "--segment-bytes",
                        str(8 << 20)], check=True, stdout=subprocess.DEVNULL)
        generate_s = time.perf_counter() - t
    out = args.out or str(work / "out")
    held = []
    if args.incremental:
        journal = _copy(journal, work / "grown")
        held = _hold_back(journal, args.incremental, work / "held")

    t0 = time.perf_counter()
    from replay import job

    spark = job.session(args.master, conf={"spark.driver.memory": args.driver_memory})
    spark.sparkContext.setLogLevel("ERROR")
    startup_s = time.perf_counter() - t0
    cores = spark.sparkContext.defaultParallelism
    try:
        code = job.run(spark, str(journal), out, quiet=True, full=True)
    finally:
        spark.stop()
    total_s = time.perf_counter() - t0
    incremental = None
    if held:
        first = json.loads((Path(out) / "summary.json").read_text())["stats"]
        for src, dst in held:
            dst.rename(src)
        t1 = time.perf_counter()
        spark = job.session(args.master, conf={"spark.driver.memory": args.driver_memory})
        spark.sparkContext.setLogLevel("ERROR")
        try:
            code = job.run(spark, str(journal), out, quiet=True)
        finally:
            spark.stop()
        incremental = {"wall_s": time.perf_counter() - t1, "first_events": first["events"],
                       "first_stats": first}  # the first run's stages (its summary.json is replaced)
    summary = json.loads((Path(out if "://" not in out else "kctl-replay-report") / "summary.json").read_text())
    stats = summary["stats"]
    events = stats["events"]
    fold_stage = stats["stage_seconds"]["fold"]
    rows = [
        ("journal", f"{journal} ({_size(journal)}, {stats['segments']} segments, {stats['journals']} journals)"),
        ("events re-executed", f"{events:,}"),
        ("cores (Spark default parallelism)", str(cores)),
        ("re-execution per core (step + digest)", f"{events / stats['step_seconds']:,.0f} events/s"),
        ("fold per core (parse, step, digest, rows, write)",
         f"{events / stats.get('task_seconds', stats['fold_seconds']):,.0f} events/s"),
        ("fold stage, all cores", f"{events / fold_stage:,.0f} events/s ({fold_stage:,.1f} s)"),
        ("read, check and plan", f"{stats['stage_seconds']['read, check and plan']:,.1f} s"),
        ("audit, tables and report", f"{stats['stage_seconds']['audit, tables and report']:,.1f} s"),
        ("Spark start-up", f"{startup_s:,.1f} s"),
        ("whole job after start-up", f"{stats['wall_seconds']:,.1f} s"),
        ("wall time including start-up", f"{total_s:,.1f} s"),
        ("audit verdict", "pass" if code == 0 else f"exit {code}"),
    ]
    if generate_s is not None:
        rows.insert(0, ("journal generation (not part of the job)", f"{generate_s:,.1f} s"))
    if incremental is not None:
        inc = stats["incremental"]
        first = incremental["first_stats"]
        rows = [("first run (held back segments)", f"{incremental['first_events']:,} events, {total_s:,.1f} s "
                 "with start-up"),
                ("first run: stages", ", ".join(f"{k} {v:,.1f} s" for k, v in first["stage_seconds"].items())),
                ] + [r for r in rows if r[0] == "journal"] + [
            ("second run: new events", f"{events - incremental['first_events']:,}"),
            ("second run: re-executed", f"{inc['events_executed']:,} events in {inc['units_executed']} of "
                                        f"{stats['units']} fold units; {inc['segments_read']} of "
                                        f"{stats['segments']} segments read"),
            ("second run: stages", ", ".join(f"{k} {v:,.1f} s" for k, v in stats["stage_seconds"].items())),
            ("second run: per-partition audit", inc.get("audit", "?")),
            ("second run: wall time including start-up", f"{incremental['wall_s']:,.1f} s"),
            ("audit verdict", "pass" if code == 0 else f"exit {code}")]
    width = max(len(k) for k, _ in rows)
    print(f"replay throughput on {args.master}")
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    if args.json:
        Path(args.json).write_text(json.dumps({"master": args.master, "cores": cores, "startup_s": startup_s,
                                               "total_s": total_s, "generate_s": generate_s, "code": code,
                                               "incremental": incremental, "stats": stats}, indent=2))
    return 0


def _copy(journal: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(journal, to, ignore=shutil.ignore_patterns(".lock"))
    return to


def _hold_back(journal: Path, events: int, store: Path) -> list[tuple[Path, Path]]:
    """Move the newest segments out of the journal (across its controllers) until they hold
    about `events` events (an event is journaled with its effects record: two records);
    returns (place in the journal, place held)."""
    from adapters.journal.format import find_journals, list_segments

    # the newest segments of the cluster (by the time of their first record): a suffix of each journal
    segs = sorted(((_first_at(seg.path), node, seg) for node in find_journals(journal)
                   for seg in list_segments(node)[1:]), key=lambda x: x[0], reverse=True)
    held, records = [], 0
    for _, node, seg in segs:
        if records >= 2 * events:
            break
        records += _records(seg.path)
        store.mkdir(parents=True, exist_ok=True)
        dst = store / f"{node.name}-{seg.path.name}"
        seg.path.rename(dst)
        held.append((seg.path, dst))
    return held


def _first_at(path: Path) -> int:
    import gzip

    with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as f:
        return json.loads(f.readline())["at"]


def _records(path: Path) -> int:
    import gzip

    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    return data.count(b"\n")


def _size(path: Path) -> str:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return f"{total / 1e6:,.0f} MB on disk"


if __name__ == "__main__":
    sys.exit(main())
