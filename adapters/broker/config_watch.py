"""A node's view of the dynamic configuration: Kafka 2.4's ZkConfigManager.

Every node (controller or not) follows `/config/changes`: at start it reads every
`/config/topics/<t>` and `/config/brokers/<b>` (including `<default>`), then, for each new
`config_change_<seq>` notification, rereads the entity it names and calls
`on_change(entity_type, name)`. After each look at new notifications it deletes every
notification created more than `change_expiration_ms` (15 minutes) before, as Kafka's
ZkNodeChangeNotificationListener purges obsolete ones: the sequence numbers go on, the
children of `/config/changes` stay few. Every node purges; a notification another node deleted
first is simply gone.

What the node does with it (adapters/node.py): the simulated replica manager's replication
throttle (`throttle_rate`), and the controller's `BrokerDefaultConfigChanged` events for
`unclean.leader.election.enable` in `/config/brokers/<default>`.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

from controller_core.values import TopicPartition

from adapters.znodes import dynconfig as D
from adapters.znodes import codec as zkdata
from adapters.zookeeper.watch import ChildrenFollower
from adapters.zookeeper.session import NoNode, ZkSession

log = logging.getLogger("kctl.config")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000
"""Kafka's `changeExpirationMs` for config change notifications."""


def _sequence(name: str) -> int | None:
    if not name.startswith(D.CONFIG_CHANGE_PREFIX):
        return None
    digits = name[len(D.CONFIG_CHANGE_PREFIX):]
    return int(digits) if digits.isascii() and digits.isdigit() else None


def _replica_set(value: str | None) -> frozenset[tuple[int, int]] | str | None:
    """`0:1,1:2` as {(partition, broker)}; "*" for every replica; None when unset or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value == "*":
        return "*"
    out = set()
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        p, sep, b = item.partition(":")
        if not sep or not p.strip().isdigit() or not b.strip().isdigit():
            return None
        out.add((int(p), int(b)))
    return frozenset(out)


class DynamicConfigs:
    """The current overrides of every topic and broker entity, kept up to date."""

    def __init__(self, zk: ZkSession, on_change: Callable[[str, str], None] | None = None, *,
                 change_expiration_ms: int = CHANGE_EXPIRATION_MS):
        self.zk = zk
        self.on_change = on_change
        self.change_expiration_ms = change_expiration_ms
        self.purged = 0
        self.configs: dict[tuple[str, str], dict[str, str]] = {}
        self._seen: int | None = None  # the last notification handled (-1: none); None before the first look
        self._children = ChildrenFollower(zk, D.CONFIG_CHANGES, self._refresh, "config-changes")
        self._replicas_cache: dict[tuple[str, str], tuple[str | None, object]] = {}

    async def start(self) -> None:
        await self._children.start()
        await self._children.first

    def stop(self) -> None:
        self._children.stop()

    def get(self, entity_type: str, name: str) -> dict[str, str]:
        return self.configs.get((entity_type, name), {})

    async def _refresh(self) -> None:
        seqs = sorted((s, n) for n in self._children.names if (s := _sequence(n)) is not None)
        if self._seen is None:
            # first look: everything there is, then only what is announced after
            await self._load_all()
            self._seen = seqs[-1][0] if seqs else -1
            await self._purge_obsolete(name for _, name in seqs)
            return
        entities: dict[tuple[str, str], None] = {}
        for seq, name in seqs:
            if seq <= self._seen:
                continue
            try:
                data, _ = await self.zk.get(f"{D.CONFIG_CHANGES}/{name}")
                entities[D.decode_change_notification(data)] = None
            except NoNode:
                pass
            except ValueError as exc:
                log.error("ignoring config change notification %s/%s: %s", D.CONFIG_CHANGES, name, exc)
            self._seen = seq
        for entity_type, name in entities:
            if entity_type in D.ENTITY_TYPES:
                await self._load(entity_type, name)
        await self._purge_obsolete(name for _, name in seqs)

    async def _purge_obsolete(self, names: Iterable[str]) -> None:
        """Delete the notifications older than `change_expiration_ms` (Kafka's
        `purgeObsoleteNotifications`, run after each batch, every node doing it)."""
        paths = [f"{D.CONFIG_CHANGES}/{n}" for n in names]
        if not paths:
            return
        now_ms = time.time() * 1000  # the server's ctime is also wall-clock ms (Kafka compares the same)
        stats = await self.zk.exists_many(paths)
        for path in paths:
            stat = stats.get(path)
            if stat is None or now_ms - stat.ctime <= self.change_expiration_ms:
                continue
            try:
                await self.zk.delete(path)
                self.purged += 1
            except NoNode:
                pass  # another node purged it first

    async def _load_all(self) -> None:
        for entity_type in D.ENTITY_TYPES:
            for name in await D.entity_names(self.zk, entity_type):
                await self._load(entity_type, name)

    async def _load(self, entity_type: str, name: str) -> None:
        try:
            data, _ = await self.zk.get(D.entity_path(entity_type, name))
            config = zkdata.decode_topic_config(data)
        except NoNode:
            config = {}
        except (zkdata.ZnodeFormatError, ValueError) as exc:
            log.error("ignoring unreadable config of %s/%s: %s", entity_type, name, exc)
            return
        key = (entity_type, name)
        if config:
            self.configs[key] = config
        else:
            self.configs.pop(key, None)
        if self.on_change is not None:
            self.on_change(entity_type, name)

    # -- the replication throttle ------------------------------------------------------------

    def _throttled(self, topic: str, key: str):
        value = self.get(D.TOPICS, topic).get(key)
        cached = self._replicas_cache.get((topic, key))
        if cached is None or cached[0] != value:
            cached = (value, _replica_set(value))
            self._replicas_cache[(topic, key)] = cached
        return cached[1]

    def _rate(self, broker: int, key: str) -> float | None:
        value = self.get(D.BROKERS, str(broker)).get(key)
        if value is None:
            value = self.get(D.BROKERS, D.DEFAULT_ENTITY).get(key)
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None

    def throttle_rate(self, tp: TopicPartition, leader: int, follower: int) -> float | None:
        """The rate limiting `follower` copying `tp` from `leader`: the leader's
        `leader.replication.throttled.rate` if (partition, leader) is leader-throttled for the
        topic, the follower's `follower.replication.throttled.rate` if (partition, follower) is
        follower-throttled; the lower of the two when both apply."""
        rates = []
        led = self._throttled(tp.topic, D.LEADER_THROTTLED_REPLICAS)
        if led is not None and (led == "*" or (tp.partition, leader) in led):
            rates.append(self._rate(leader, D.LEADER_THROTTLED_RATE))
        fol = self._throttled(tp.topic, D.FOLLOWER_THROTTLED_REPLICAS)
        if fol is not None and (fol == "*" or (tp.partition, follower) in fol):
            rates.append(self._rate(follower, D.FOLLOWER_THROTTLED_RATE))
        rates = [r for r in rates if r is not None]
        return min(rates) if rates else None
