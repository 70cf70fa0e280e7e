"""The node's config-change follower (adapters/broker/config_watch.py) against a real ZooKeeper:
it purges consumed `/config/changes` notifications older than `change_expiration_ms` (Kafka's
15 minutes, shortened here), as Kafka's ZkNodeChangeNotificationListener does, and keeps the
younger ones."""
from __future__ import annotations

import asyncio
import time

from adapters.broker.config_watch import CHANGE_EXPIRATION_MS, DynamicConfigs
from adapters.znodes import dynconfig as D


async def _changes(zk) -> list[str]:
    return sorted(await zk.get_children(D.CONFIG_CHANGES))


async def _wait(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_kafkas_expiration_is_the_default():
    assert CHANGE_EXPIRATION_MS == 15 * 60 * 1000
    assert DynamicConfigs(None).change_expiration_ms == CHANGE_EXPIRATION_MS


async def test_old_notifications_are_purged_and_younger_ones_kept(admin):
    await D.change_config(admin, D.TOPICS, "t", {"min.insync.replicas": "2"})
    await D.change_config(admin, D.BROKERS, "1", {D.LEADER_THROTTLED_RATE: "100"})
    old = await _changes(admin)
    assert len(old) == 2
    configs = DynamicConfigs(admin, change_expiration_ms=1500)
    await configs.start()
    try:
        assert configs.get(D.TOPICS, "t") == {"min.insync.replicas": "2"}
        assert await _changes(admin) == old and configs.purged == 0  # too young at the first look
        await asyncio.sleep(1.6)
        await D.change_config(admin, D.TOPICS, "t", {"min.insync.replicas": "3"})

        async def purged():
            return not set(old) & set(await _changes(admin))
        await _wait(purged)
        left = await _changes(admin)
        assert len(left) == 1 and left[0] > old[-1]  # the new one stays; the sequence goes on
        assert configs.get(D.TOPICS, "t") == {"min.insync.replicas": "3"}
        assert configs.purged == 2
    finally:
        configs.stop()


async def test_a_notification_purged_by_another_node_first_is_no_error(admin):
    await D.change_config(admin, D.TOPICS, "t", {"min.insync.replicas": "2"})
    await asyncio.sleep(0.05)
    first = DynamicConfigs(admin, change_expiration_ms=0)
    second = DynamicConfigs(admin, change_expiration_ms=0)
    await first.start()
    await second.start()  # finds nothing left to purge
    try:
        assert await _changes(admin) == []
        assert (first.purged, second.purged) == (1, 0)
        assert second.get(D.TOPICS, "t") == {"min.insync.replicas": "2"}  # the config itself is read all the same
    finally:
        first.stop()
        second.stop()
