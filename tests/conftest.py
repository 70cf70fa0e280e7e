"""Shared fixtures: one real ZooKeeper for the whole run, a fresh chroot per test."""
from __future__ import annotations

import re
import uuid

import pytest
from hypothesis import HealthCheck, settings

from adapters.zookeeper.session import ZkSession
from adapters.zookeeper.server import EmbeddedZooKeeper

# Property tests check what is computed, not how fast: on a shared 2-core machine one example can
# take longer than Hypothesis's default 200 ms deadline for reasons that have nothing to do with
# the code, so no test may fail on time alone (tests that set their own settings keep them).
settings.register_profile("kctl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kctl")


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory):
    """The embedded ZooKeeper (from pyspark's jars) shared by every test of the run. Tests that
    stop, pause or restart a server start their own instead."""
    server = EmbeddedZooKeeper(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zk_server, request) -> str:
    """A connect string with a chroot of its own ("127.0.0.1:P/t-<test>-<uuid>"), so tests
    sharing the server never see each other's znodes. The chroot is created on connect."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:48]
    return f"{zk_server.connect_string}/t-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def zk_ensemble_shared(tmp_path_factory):
    """A three-server ZooKeeper ensemble (adapters/zookeeper/ensemble.py), started on first use
    and shared by every test that asks for it: three JVMs cost too much to start per test."""
    from adapters.zookeeper.ensemble import ZooKeeperEnsemble

    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("ensemble"), size=3)
    ensemble.start(timeout=120)
    yield ensemble
    ensemble.stop()


@pytest.fixture
def zk_ensemble(zk_ensemble_shared):
    """The shared ensemble, whole again after the test: members a test killed, stopped or
    paused are resumed or restarted (same ports and data dirs) and serving."""
    yield zk_ensemble_shared
    for member in zk_ensemble_shared.members:
        member.resume()
    zk_ensemble_shared.start(timeout=120)


@pytest.fixture
def zk_ensemble_connect(zk_ensemble, request) -> str:
    """The ensemble's connect string (all three servers) with a chroot of the test's own."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:48]
    return f"{zk_ensemble.connect_string}/t-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def admin(zk_connect):
    """A plain ZooKeeper session on the test's chroot, as an admin tool or a check would use."""
    zk = await ZkSession.connect(zk_connect)
    yield zk
    await zk.close()
