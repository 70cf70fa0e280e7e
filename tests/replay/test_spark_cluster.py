"""The job on a real Spark standalone cluster: a master and a worker started from the pyspark
installation's own launcher (`bin/spark-class`), on loopback, and the job submitted with
`spark-submit --master spark://127.0.0.1:PORT --py-files dist/kctl-replay.zip ... replay/job.py`,
the commands README.md and replay/README.md give. The tables must equal the
plain-Python replay's.

Slow (two JVM daemons, an executor, the job): `pytest -m slow tests/replay/test_spark_cluster.py`.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import ROOT, generate_subprocess
from .test_job import plain_replay

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(what: str, check, timeout: float, procs=()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p, log in procs:
            if p.poll() is not None:
                raise AssertionError(f"{what}: a daemon exited with {p.returncode}:\n{log.read_text()[-3000:]}")
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _stop(proc: subprocess.Popen) -> None:
    """End a daemon we started, and its children (its own process group)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


@pytest.fixture
def standalone(tmp_path):
    """A standalone master and one worker (2 cores, 2 GB) on 127.0.0.1; yields the master URL."""
    home = _spark_home()
    port = _free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(home),
           "SPARK_LOG_DIR": str(tmp_path / "logs"), "SPARK_WORKER_DIR": str(tmp_path / "work")}
    procs = []
    try:
        master_log = tmp_path / "master.log"
        master = subprocess.Popen(
            [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(_free_port())],
            env=env, stdout=master_log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        procs.append((master, master_log))
        _wait_for("the master", lambda: "I have been elected leader" in master_log.read_text(), 120, procs)
        worker_log = tmp_path / "worker.log"
        worker = subprocess.Popen(
            [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--cores", "2", "--memory", "2g", "--webui-port", str(_free_port()), "--work-dir",
             str(tmp_path / "work"), f"spark://127.0.0.1:{port}"],
            env=env, stdout=worker_log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        procs.append((worker, worker_log))
        _wait_for("the worker to register", lambda: "Successfully registered with master" in worker_log.read_text(),
                  120, procs)
        yield f"spark://127.0.0.1:{port}", env
    finally:
        for proc, _ in reversed(procs):
            _stop(proc)


def test_spark_submit_to_a_standalone_cluster_writes_the_tables(standalone, tmp_path):
    master, env = standalone
    journal = tmp_path / "journals"
    generate_subprocess(journal, events=1500, partitions=60, seed=5, segment_bytes=40_000)
    expected = plain_replay(journal)
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "replay.package", "--out", str(dist)], cwd=ROOT, check=True,
                   capture_output=True, timeout=120)
    out, report_dir = tmp_path / "out", tmp_path / "report"
    submit = [str(_spark_home() / "bin" / "spark-submit"),
              "--master", master,
              "--py-files", str(dist / "kctl-replay.zip"),
              "--conf", "spark.executorEnv.PYTHONHASHSEED=0",
              "--conf", f"spark.pyspark.python={sys.executable}",
              "replay/job.py", "--journal", str(journal), "--out", str(out), "--report", str(report_dir)]
    proc = subprocess.run(submit, cwd=ROOT, env={k: v for k, v in env.items() if k != "PYTHONHASHSEED"},
                          capture_output=True, text=True, timeout=900)
    noise = (" INFO ", " WARN ")
    said = "\n".join(ln for ln in (proc.stdout + proc.stderr).splitlines() if not any(n in ln for n in noise))
    assert proc.returncode == 0, said[-4000:]
    assert "verdict: PASS" in proc.stdout
    summary = json.loads((report_dir / "summary.json").read_text())
    assert summary["passed"] and summary["stats"]["events"] > 0
    # the executors ran on the worker: its work dir holds this application's executor
    apps = list((tmp_path / "work").glob("app-*/*/stderr"))
    assert apps, "no executor ran on the standalone worker"
    from replay import job

    spark = job.session("local[1]", conf={"spark.ui.enabled": "false"})
    try:
        counts = {name: spark.read.parquet(str(out / name)).count() for name in job.TABLES}
        findings = sorted([f["severity"], f["rule"], f["journal"], f["file"], f["line"], f["seq"]]
                          for f in (r.asDict() for r in spark.read.parquet(str(out / "findings")).collect()))
    finally:
        spark.stop()
    for name in ("partition_timeline", "elections", "events", "controller_terms", "reassignments",
                 "broker_intervals", "partition_offline", "broker_failures", "findings"):
        assert counts[name] == expected["counts"][name], name
    assert findings == expected["findings"]
