"""What the failover benchmark measures besides time: the CPU each group of processes used
(from procfs) and this process's peak resident set. Used by the benchmark (failover.py) and by
its floors (floors.py)."""
from __future__ import annotations

import os
import time
from pathlib import Path

CPU_GROUPS = ("controller_process", "zookeeper", "brokers")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU a process has used so far, from procfs (None without procfs, or
    once the process is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


class CpuMeter:
    """The CPU every process of the cluster used between `start()` and `stop()`, by group:

    - `controller_process`: this process (the controller, broker 5, in broker-failure the
      crashed victim, and the harness, which only waits);
    - `zookeeper`: the embedded server's JVM (None with `--zookeeper`: not ours to measure);
    - `brokers`: the `kctl node` processes (one that exits before the end is not counted).

    `cores_busy` is the share of the machine's cores those processes kept busy: near 1, the
    run was CPU-bound, and only less work (not more overlap) makes it shorter. `groups()` names
    the pids of each group at `start()`."""

    def __init__(self, groups):
        self.groups = groups
        self._pids: dict[str, list[int] | None] = {}
        self._before: dict[int, float | None] = {}
        self._t0 = 0.0

    def start(self) -> None:
        self._pids = self.groups()
        self._before = {pid: cpu_seconds(pid) for pids in self._pids.values() if pids for pid in pids}
        self._t0 = time.perf_counter()

    def stop(self) -> dict:
        """`{"<group>_ms": ..., "total_ms": ..., "cores_busy": ...}`."""
        wall_ms = (time.perf_counter() - self._t0) * 1000
        out: dict = {}
        total = 0.0
        for group, pids in self._pids.items():
            if pids is None:
                out[f"{group}_ms"] = None
                continue
            used = 0.0
            for pid in pids:
                before, after = self._before.get(pid), cpu_seconds(pid)
                if before is not None and after is not None:
                    used += after - before
            out[f"{group}_ms"] = round(used * 1000, 1)  # procfs counts in ticks (10 ms)
            total += out[f"{group}_ms"]
        out["total_ms"] = round(total, 1)
        out["cores_busy"] = round(total / ((os.cpu_count() or 1) * wall_ms), 3) if wall_ms > 0 else 0.0
        return out


class PeakRss:
    """This process's peak resident set from its creation to `peak_mb()`: the kernel's
    high-water mark (VmHWM) is reset on creation where it allows (Linux >= 4.0,
    /proc/self/clear_refs), else it covers the process's life so far (`reset` False)."""

    def __init__(self):
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.reset = True
        except OSError:
            self.reset = False

    @staticmethod
    def peak_mb() -> float | None:
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
        except (OSError, ValueError, IndexError):
            pass
        return None


def per_event(seconds: float) -> str:
    """A per-event time as people read it: ms from a millisecond up, µs below (the per-part
    benchmarks' tables: generator_parts, replay_parts)."""
    return f"{seconds * 1e3:,.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:,.0f} µs"
