"""Micro-benchmark of the journal writer: appends per second and fsync latency.

    python -m benchmarks.journal_append [--dir DIR] [--seconds 2]

Runs against a real directory (by default a temporary one; pass --dir to measure another disk)
and prints one table row per case:

- 1 KB events, append only: encoding and buffering, one sync at the end.
- 1 KB events, append + sync each, one producer: the controller loop's pattern (an event is
  durable before its commands run), under each fsync policy.
- 1 KB events, 16 concurrent producers each doing append + sync: what group commit buys.
- one 2 MB record (a large snapshot or a 10,000-partition decision), append + sync.

`append ms` is the mean time inside `append()` (JSON encoding, checksum, buffering; for a
2 MB body of small dicts this is almost all the stdlib JSON encoder). `sync p50/p99` is the latency of `sync()` as the caller sees it; `fsync ms` is the mean time of
the fsync system call itself (from `Journal.stats()`); `fsyncs/rec` shows how many fsyncs each
record cost.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from adapters.journal.writer import Journal
from adapters.journal.writer import encode_record

SMALL = {"kind": "IsrChanged", "partitions": [{"topic": "orders", "partition": p, "isr": [1, 2, 3]} for p in range(18)]}
BIG = {"kind": "PartitionStates", "states": [
    {"topic": f"topic-{p // 100}", "partition": p % 100, "leader": 1 + p % 5, "leader_epoch": p % 7,
     "isr": [1 + p % 5, 1 + (p + 1) % 5, 1 + (p + 2) % 5], "controller_epoch": 3, "zk_version": p % 11}
    for p in range(17_600)
]}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _row(case, policy, size, n, seconds, latencies, journal, append_s=float("nan")):
    stats = journal.stats()
    return {
        "case": case,
        "policy": policy,
        "record": size,
        "appends/s": n / seconds,
        "MB/s": stats.bytes / seconds / 1e6,
        "append ms": append_s / n * 1000,
        "sync p50 ms": _pct(latencies, 0.50),
        "sync p99 ms": _pct(latencies, 0.99),
        "fsync ms": stats.fsync_ms_total / stats.fsyncs if stats.fsyncs else float("nan"),
        "fsyncs/rec": stats.fsyncs / n,
    }


def append_only(directory: Path, seconds: float) -> dict:
    j = Journal.open(directory, 1, fsync="batch")
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1000):
            j.append("event", SMALL, controller_epoch=1, at=n)
        n += 1000
    appending = time.perf_counter() - start
    j.sync_blocking()
    row = _row("append only", "any", "1 KB", n, time.perf_counter() - start, [], j, appending)
    j.close()
    return row


async def sequential(directory: Path, policy: str, body: dict, size: str, seconds: float, max_n: int) -> dict:
    j = Journal.open(directory, 1, fsync=policy)
    latencies = []
    appending = 0.0
    n, start = 0, time.perf_counter()
    while n < max_n and time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        j.append("event", body, controller_epoch=1, at=n)
        t1 = time.perf_counter()
        await j.sync()
        latencies.append((time.perf_counter() - t1) * 1000)
        appending += t1 - t0
        n += 1
    row = _row("append+sync", policy, size, n, time.perf_counter() - start, latencies, j, appending)
    j.close()
    return row


async def concurrent(directory: Path, policy: str, seconds: float, producers: int = 16) -> dict:
    j = Journal.open(directory, 1, fsync=policy)
    latencies: list[float] = []
    count = 0
    deadline = time.perf_counter() + seconds

    async def producer():
        nonlocal count
        while time.perf_counter() < deadline:
            j.append("event", SMALL, controller_epoch=1, at=count)
            t0 = time.perf_counter()
            await j.sync()
            latencies.append((time.perf_counter() - t0) * 1000)
            count += 1

    start = time.perf_counter()
    await asyncio.gather(*(producer() for _ in range(producers)))
    row = _row(f"{producers} producers", policy, "1 KB", count, time.perf_counter() - start, latencies, j)
    j.close()
    return row


def print_table(rows: list[dict]) -> None:
    columns = list(rows[0])
    cells = [[_fmt(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(columns, widths))))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(v.ljust(w) if i < 3 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))


def _fmt(value) -> str:
    if isinstance(value, str):
        return value
    if value != value:  # NaN
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="where to write (default: a temporary directory)")
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each case")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="journal-bench-", dir=args.dir))

    small_len = len(encode_record(1, 1, 1, 0, "event", 1, SMALL))
    big_len = len(encode_record(1, 1, 1, 0, "event", 1, BIG))
    print(f"record sizes: small {small_len} bytes, big {big_len / 1e6:.2f} MB; directory {base}\n")
    rows = []
    try:
        case = iter(range(1000))
        fresh = lambda: base / f"case-{next(case)}"  # noqa: E731
        rows.append(append_only(fresh(), args.seconds))
        for policy in ("always", "batch", "never"):
            rows.append(asyncio.run(sequential(fresh(), policy, SMALL, "1 KB", args.seconds, 10**9)))
        for policy in ("always", "batch"):
            rows.append(asyncio.run(concurrent(fresh(), policy, args.seconds)))
        for policy in ("always", "batch", "never"):
            rows.append(asyncio.run(sequential(fresh(), policy, BIG, "2 MB", args.seconds, 30)))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_table(rows)


if __name__ == "__main__":
    main()
