"""The ZooKeeper client against servers that are behind it, and against a three-server ensemble.

The client never goes back in time: the last zxid it has seen survives reconnects and refused
handshakes, so a server behind it (restored from an old copy of its data dir, or a member that
has not caught up) closes the handshake (ZooKeeperServer.processConnectRequest,
CLIENT_ZXID_AHEAD) and the client moves on to another server.
"""
from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from adapters.sim.tcpproxy import TcpProxy
from adapters.zookeeper.session import ZkSession
from adapters.zookeeper.server import EmbeddedZooKeeper, four_letter_word


async def _until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


async def test_a_server_restored_from_an_older_data_dir_is_refused_until_the_current_one_is_back(tmp_path):
    """An operator restores a backup of the data dir: the server serves, but behind what our
    client has read. The client must not reconnect to it (its reads would go back in time),
    however many handshakes fail, and must take up the same session when the current data is back."""
    current, old_copy = tmp_path / "zk", tmp_path / "zk-old"
    server = EmbeddedZooKeeper(current).start()
    port = server.port
    zk = await ZkSession.connect(server.connect_string, session_timeout_ms=60000)
    try:
        await zk.create("/x", b"old")
        session = zk.session_id
        await asyncio.to_thread(server.stop)
        shutil.copytree(current, old_copy)  # the backup: knows the session and /x = "old"
        await asyncio.to_thread(server.start)
        for n in range(5):
            await zk.set("/x", f"new-{n}".encode())
        assert zk.session_id == session
        seen = zk.last_zxid
        await asyncio.to_thread(server.stop)

        restored = EmbeddedZooKeeper(old_copy, port=port)
        await asyncio.to_thread(restored.start)
        try:
            fresh = await ZkSession.connect(restored.connect_string, session_timeout_ms=60000)
            assert (await fresh.get("/x"))[0] == b"old"  # it serves, and it is behind
            assert fresh.last_zxid < seen
            await fresh.close()
            failures = zk.connection.handshake_failures
            deadline = time.monotonic() + 30
            while zk.connection.handshake_failures < failures + 3:  # tries again and again: refused
                assert not zk.connected
                assert time.monotonic() < deadline, "the client stopped trying"
                await asyncio.sleep(0.01)
            assert not zk.connected
            assert zk.last_zxid == seen  # refused handshakes do not lower it
            assert zk.session_id == session and not zk.events  # neither moved nor expired
        finally:
            await asyncio.to_thread(restored.stop)

        await asyncio.to_thread(server.start)
        assert (await asyncio.wait_for(zk.get("/x"), 10))[0] == b"new-4"
        assert zk.session_id == session and not zk.events
        assert zk.connection.reconnections >= 2
    finally:
        await zk.close()
        server.stop()


async def test_a_member_behind_the_client_is_refused_and_the_client_moves_on(zk_ensemble, tmp_path):
    """Member 3 comes back from an older copy of its data dir, cut off from its peers (it serves
    alone, on its own port, what it had): the client, cut from the member it was on, must be
    refused there, again and again, and take its session up on a member that is current."""
    one, three = zk_ensemble.member(1), zk_ensemble.member(3)
    await asyncio.to_thread(three.kill)
    old_copy = tmp_path / "zk-3-old"
    shutil.copytree(three.data_dir, old_copy)
    async with TcpProxy(one.host, one.port) as proxy:
        # member 3's port is closed: the client can only land on member 1, through the proxy
        zk = await ZkSession.connect(f"{proxy.address},{three.connect_string}/t-behind", session_timeout_ms=60000)
        lagging = EmbeddedZooKeeper(old_copy, port=three.port)
        try:
            assert zk.connection.server == proxy.address
            for n in range(5):
                await zk.create(f"/n{n}", b"current")
            await zk.sync()
            session, seen = zk.session_id, zk.last_zxid
            await asyncio.to_thread(lagging.start)
            assert lagging.version()  # serving, alone, from the old copy

            proxy.cut()
            await _until(lambda: not zk.connected, 10, "the client to notice the cut")
            failures = zk.connection.handshake_failures
            deadline = time.monotonic() + 30
            while zk.connection.handshake_failures < failures + 3:
                assert not zk.connected, f"accepted by {zk.connection.server}, a server behind 0x{seen:x}"
                assert time.monotonic() < deadline, "the client stopped trying"
                await asyncio.sleep(0.01)
            assert zk.last_zxid == seen and zk.session_id == session and not zk.events

            proxy.heal()
            assert await asyncio.wait_for(zk.get_children("/"), 15) == [f"n{n}" for n in range(5)]
            assert zk.connection.server == proxy.address
            assert zk.session_id == session and not zk.events  # the same session, never expired
        finally:
            await zk.close()
            await asyncio.to_thread(lagging.stop)


def test_kctl_zookeeper_ensemble_prints_the_connect_string_and_stops_on_sigterm(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "adapters.cli", "zookeeper", "--ensemble", "3", "--port", "0",
                             "--data-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        hosts = line.split(",")
        assert len(hosts) == 3 and all(re.fullmatch(r"127\.0\.0\.1:\d+", h) for h in hosts), line
        modes = sorted(four_letter_word("127.0.0.1", int(h.split(":")[1]), "srvr").split("Mode: ")[1].split()[0]
                       for h in hosts)
        assert modes == ["follower", "follower", "leader"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["zk-1", "zk-2", "zk-3"]
        assert all((tmp_path / f"zk-{i}" / "myid").read_text().strip() == str(i) for i in (1, 2, 3))
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize("args, message", [
    (["--ensemble", "0"], "error: --ensemble must be a number of servers from 1 to 9, got 0"),
    (["--ensemble", "3", "--port", "65534"], "error: --port 65534 leaves no room for 3 consecutive client ports"),
])
def test_kctl_zookeeper_ensemble_bad_input(args, message):
    done = subprocess.run([sys.executable, "-m", "adapters.cli", "zookeeper", *args], capture_output=True, text=True)
    assert (done.returncode, done.stderr.strip(), done.stdout) == (2, message, "")


@pytest.mark.parametrize("args, message", [
    (["--zookeeper-servers", "0"], "error: --zookeeper-servers must be 1-9, got 0"),
    (["--zookeeper-servers", "3", "--zookeeper", "127.0.0.1:2181"],
     "error: --zookeeper-servers starts an embedded ensemble: it cannot go with --zookeeper"),
])
def test_kctl_chaos_zookeeper_servers_bad_input(capsys, args, message):
    from adapters.cli import main

    assert main(["chaos", "--duration", "5", *args]) == 2
    assert capsys.readouterr().err.strip() == message
