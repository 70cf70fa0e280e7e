"""Fixtures of the process-level tests."""
from __future__ import annotations

import pytest

from adapters.sim.cluster import LocalCluster

SESSION_MS = 2000
"""The nodes' ZooKeeper session timeout in `local`: short, so that a killed node's session ends soon."""


@pytest.fixture
def local(zk_connect, tmp_path):
    """`kctl node` processes on the test's chroot (started by the test), stopped at the end."""
    with LocalCluster(zk_connect, tmp_path, settings={"zookeeper.session.timeout.ms": str(SESSION_MS),
                                                     "auto.leader.rebalance.enable": "false",
                                                     "replica.catch.up.delay.ms": "100"}) as c:
        yield c
