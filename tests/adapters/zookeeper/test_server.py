"""The embedded ZooKeeper: a real server from pyspark's jars, started, stopped, paused."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.zookeeper.session import ZkSession
from adapters.zookeeper.server import (
    EmbeddedZooKeeper,
    EmbeddedZooKeeperError,
    four_letter_word,
    pyspark_jars_dir,
    zookeeper_classpath,
)

REPO = Path(__file__).resolve().parents[3]


def test_classpath_comes_from_the_installed_pyspark():
    jars = pyspark_jars_dir()
    import pyspark  # the test may import it; the module under test does not need to

    assert jars == Path(pyspark.__file__).parent / "jars"
    entries = [Path(p) for p in zookeeper_classpath().split(os.pathsep)]
    names = [p.name for p in entries]
    assert all(p.parent == jars and p.exists() for p in entries)
    for prefix in ("zookeeper-3.", "zookeeper-jute-", "slf4j-api-", "log4j-core-", "netty-handler-",
                   "metrics-core-", "snappy-java-"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert not any(n.startswith("spark-") for n in names)  # the minimal set, not the whole dir


def test_shared_server_answers_four_letter_words(zk_server):
    assert zk_server.ruok()
    assert zk_server.version().startswith("3.")
    conf = four_letter_word(zk_server.host, zk_server.port, "conf")
    assert "tickTime=500" in conf
    assert "maxSessionTimeout=60000" in conf
    assert "minSessionTimeout=1000" in conf
    assert zk_server.connect_string == f"127.0.0.1:{zk_server.port}"


async def test_start_restart_pause_stop(tmp_path):
    server = EmbeddedZooKeeper(tmp_path / "zk")
    assert server.port != 0
    with server:
        port = server.port
        zk = await ZkSession.connect(server.connect_string, session_timeout_ms=10000)
        await zk.create("/survives", b"restart")
        session = zk.session_id
        server.restart()
        assert server.port == port and server.ruok()
        # the session (timeout 10 s) outlives a restart of ~1-2 s, and so does the data
        assert (await zk.get("/survives"))[0] == b"restart"
        assert zk.session_id == session
        await zk.close()
        assert " INFO " not in server.log_file.read_text()  # WARN and above only
        server.pause()
        assert not server.ruok()  # the socket accepts, nobody answers
        server.resume()
        assert server.ruok()
        server.pause()
    assert not server.is_running() and not server.ruok()  # stop() resumes a paused JVM first
    assert server.stop() is None  # stopping twice is harmless


def test_start_failure_reports_the_log_tail(tmp_path):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    try:
        server = EmbeddedZooKeeper(tmp_path / "zk", port=blocker.getsockname()[1])
        with pytest.raises(EmbeddedZooKeeperError, match="Address already in use"):
            server.start(timeout=20)
        assert not server.is_running()
    finally:
        blocker.close()


def test_serve_forever_prints_the_connect_string_and_stops_on_sigterm(tmp_path):
    code = ("import sys; from adapters.zookeeper.server import serve_forever; "
            f"sys.exit(serve_forever(0, {str(tmp_path / 'zk')!r}))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        host, port = line.split(":")
        assert host == "127.0.0.1"
        assert four_letter_word(host, int(port), "ruok") == "imok"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert proc.stdout.read() == ""  # exactly one line
        with pytest.raises(OSError):
            four_letter_word(host, int(port), "ruok", timeout=1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
