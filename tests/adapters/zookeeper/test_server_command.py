"""`kctl zookeeper`, the command: a taken port is one line, and the data directory it writes by
default is named in --help and ignored by git."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def kctl(*argv, cwd=None, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adapters.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_a_taken_port_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        started = time.monotonic()
        done = kctl("zookeeper", "--port", str(port), "--data-dir", str(tmp_path / "zk"))
    assert done.returncode == 1
    assert done.stderr == f"error: port {port} is in use\n"
    assert done.stdout == ""
    assert time.monotonic() - started < 30


def test_the_port_of_a_running_zookeeper_is_taken_too(zk_server, tmp_path):
    # its `ruok` must not be taken for the new server's
    done = kctl("zookeeper", "--port", str(zk_server.port), "--data-dir", str(tmp_path / "zk"))
    assert done.returncode == 1 and done.stderr == f"error: port {zk_server.port} is in use\n"


def test_a_port_out_of_range_is_bad_input():
    done = kctl("zookeeper", "--port", "70000")
    assert done.returncode == 2 and done.stderr.startswith("error: --port must be a port number")


def test_the_default_data_dir_is_documented_and_ignored():
    text = " ".join(kctl("zookeeper", "--help").stdout.split())
    assert "default ./zookeeper-data" in text
    assert "/zookeeper-data/" in (ROOT / ".gitignore").read_text().splitlines()
