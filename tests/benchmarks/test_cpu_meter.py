"""The failover benchmark's CPU meter: what each group of processes used between two moments,
read from procfs (the README's "the machine was saturated" rests on it)."""
import os
import subprocess
import sys
import time

from benchmarks.meters import CpuMeter, cpu_seconds


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_counts_this_process_and_a_child_and_the_share_of_the_cores():
    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 0.4\n"
                              "while time.process_time() < end: pass\ntime.sleep(30)"])
    try:
        meter = CpuMeter(lambda: {"controller_process": [os.getpid()], "zookeeper": None, "brokers": [child.pid]})
        meter.start()
        _burn(0.3)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and cpu_seconds(child.pid) < 0.4:
            time.sleep(0.05)  # the child burns its 0.4 s, then sleeps
        cpu = meter.stop()
    finally:
        child.kill()
        child.wait()
    assert 250 <= cpu["controller_process_ms"] <= 1000
    assert 300 <= cpu["brokers_ms"] <= 1000  # most of the child's 0.4 s falls after start()
    assert cpu["zookeeper_ms"] is None  # an external server is not measured
    assert cpu["total_ms"] == cpu["controller_process_ms"] + cpu["brokers_ms"]
    assert 0 < cpu["cores_busy"] <= 1.0 + 0.1  # tick rounding


def test_a_process_gone_before_the_end_counts_nothing():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    meter = CpuMeter(lambda: {"controller_process": [], "zookeeper": None, "brokers": [child.pid]})
    meter.start()
    child.wait()  # reaped: its procfs entry is gone
    cpu = meter.stop()
    assert cpu["brokers_ms"] == 0 and cpu["controller_process_ms"] == 0 and cpu["total_ms"] == 0
    assert cpu_seconds(child.pid) is None
