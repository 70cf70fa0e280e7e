"""The ZooKeeper client against servers that are behind it, and against a three-server ensemble.

The client never goes back in time: the last zxid it has seen survives reconnects and refused
handshakes, so a server behind it (restored from an old copy of its data dir, or a member that
has not caught up) closes the handshake (ZooKeeperServer.processConnectRequest,
CLIENT_ZXID_AHEAD) and the client moves on to another server.
"""
from __future__ import annotations

import asyncio
import shutil
import time

import pytest

from adapters.tcpproxy import TcpProxy
from adapters.zk import ZkSession
from adapters.zookeeper_ensemble import ZooKeeperEnsemble
from adapters.zookeeper_server import EmbeddedZooKeeper


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
