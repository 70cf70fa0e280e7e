"""Journals shared by the replay tests (generated once per session)."""
from __future__ import annotations

import pytest

from replay import local
from replay.generate import generate


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """A generated cluster life, in this process: 6,000 events over 240 partitions and three
    controllers, small segments (many fold units, mid-batch rolls, gz and plain segments).
    Returns (journal root, the world at the end)."""
    root = tmp_path_factory.mktemp("generated") / "journals"
    summary = generate(root, events=6000, partitions=240, seed=11, controllers=3, segment_bytes=40_000)
    return root, summary["world"]


@pytest.fixture(scope="session")
def replayed(generated):
    root, _ = generated
    return local.replay(root)


JVM_DUMP_AFTER_S = 240
"""A Spark test still running after this long is about to meet pytest-timeout's 300 s."""


@pytest.fixture(autouse=True)
def jvm_threads_on_a_hang(request):
    """Where a test holds a SparkSession, prints the driver JVM's threads (jstack) into the
    test's output if the test is still running after `JVM_DUMP_AFTER_S`. pytest-timeout only
    shows the Python side of a hang, a thread waiting for the JVM's answer; once in CI a
    parquet read after a whole job waited past the timeout, and nothing said what the JVM was
    doing."""
    if "spark" not in request.fixturenames:
        yield
        return
    import shutil
    import subprocess
    import sys
    import threading

    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    jstack = shutil.which("jstack")
    if context is None or jstack is None:
        yield
        return
    try:
        pid = context._jvm.java.lang.ProcessHandle.current().pid()
    except Exception:  # a gateway already out of step (an earlier test timed out): nothing to add
        yield
        return

    def dump() -> None:
        out = subprocess.run([jstack, str(pid)], capture_output=True, text=True, timeout=60)
        print(f"--- the driver JVM's threads (pid {pid}) after {JVM_DUMP_AFTER_S} s ---\n{out.stdout}{out.stderr}",
              file=sys.stderr, flush=True)

    timer = threading.Timer(JVM_DUMP_AFTER_S, dump)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
