"""The journal's digest of a broker failure's release (the commands of the PartitionStatesWritten
that ends the write: LeaderAndIsr to each broker holding a partition the dead broker led, and
UpdateMetadata of them to every broker), as the live loop digests it, with and without the
release's shared rows (digest._SharedRows). Alternating in one process, medians.

    python docs/bench/2026-11-28-night/failure_release_digest_ab.py [RUNS]
"""
import statistics
import sys
import time

from benchmarks.core_step import AT, cluster
from controller_core import codec
from controller_core import digest as D
from controller_core import events as E
from controller_core.step import step

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
real = D._SharedRows.rows


def off(self, views, canonical):
    return None


for n in (10_000, 100_000):
    state = cluster(n)
    brokers = tuple(state.brokers[b] for b in (2, 3, 4, 5))
    after, commands = step(state, E.BrokersChanged(at=AT, brokers=brokers))
    write = next(c for c in commands if type(c).__name__ == "WritePartitionStates")
    outcome = E.PartitionStatesWritten(at=AT, write_id=write.write_id,
                                       versions=tuple((w.tp, w.leader_isr.zk_version) for w in write.writes))
    _, release = step(after, outcome)
    times = {"own rows": [], "shared rows": []}
    digests = set()
    for _ in range(runs):
        for name, rows in (("own rows", off), ("shared rows", real)):
            D._SharedRows.rows = rows
            for c in release:
                views = getattr(c, "partitions", None)
                if views is not None and hasattr(views, "_views"):
                    views._views = None
            t = time.perf_counter()
            digests.add(codec.digest(release))
            times[name].append((time.perf_counter() - t) * 1e3)
    D._SharedRows.rows = real
    sizes = sorted({len(c.partitions) for c in release if hasattr(c, "partitions")})
    print(f"{n:,} partitions, {len(release)} commands (request sizes {sizes}): "
          + ", ".join(f"{k} {statistics.median(v):.1f} ms" for k, v in times.items())
          + f" (medians of {runs}); one digest: {len(digests) == 1}")
