"""Shared fixtures: one real ZooKeeper for the whole run, a fresh chroot per test."""
from __future__ import annotations

import re
import uuid

import pytest
from hypothesis import HealthCheck, settings

from adapters.zookeeper_server import EmbeddedZooKeeper

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
