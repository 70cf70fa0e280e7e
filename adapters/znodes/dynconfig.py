"""Dynamic configuration in ZooKeeper, as Kafka 2.4's AdminZkClient writes it.

An entity's overrides live in `/config/<type>/<name>` (`{"version":1,"config":{...}}`, values
are strings); after every write the writer creates a sequential
`/config/changes/config_change_<10 digits>` holding `{"version":2,"entity_path":"<type>/<name>"}`
so that every broker's config manager rereads that entity (Kafka's `changeConfigs` followed by
`createConfigChangeNotification`). `brokers/<default>` is the cluster-wide broker default.

Used by `kctl configs` (adapters/cli/configs.py) and the throttle of `kctl reassign-partitions`
(adapters/admin/throttle.py). The node side, which follows the notifications, is
adapters/broker/config_watch.py.
"""
from __future__ import annotations

import json
import re
from typing import Callable, Iterable, Mapping

from adapters.znodes import codec as zkdata
from adapters.zookeeper.session import BadVersion, NodeExists, NoNode, ZkSession

CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DEFAULT_ENTITY = "<default>"
TOPICS = "topics"
BROKERS = "brokers"
ENTITY_TYPES = (TOPICS, BROKERS)

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
UNCLEAN_KEY = "unclean.leader.election.enable"

BROKER_DYNAMIC_KEYS: dict[str, str] = {
    LEADER_THROTTLED_RATE: "long",
    FOLLOWER_THROTTLED_RATE: "long",
    "replica.alter.log.dirs.io.max.bytes.per.second": "long",
    UNCLEAN_KEY: "bool",
}
"""Broker keys that may be changed in ZooKeeper while brokers run. Kafka 2.4's ConfigCommand
allows only the replication quotas through ZooKeeper on a running cluster; the cluster-wide
`unclean.leader.election.enable` is added here because this controller follows it without a
restart (CONTRACT.md section 1)."""


class ConfigWriteConflict(Exception):
    """The entity's config znode changed between our read and our write."""


def entity_path(entity_type: str, name: str) -> str:
    if entity_type not in ENTITY_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r}")
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"invalid config entity name {name!r}")
    return f"/config/{entity_type}/{name}"


def encode_change_notification(entity_type: str, name: str) -> bytes:
    return json.dumps({"version": 2, "entity_path": f"{entity_type}/{name}"}, separators=(",", ":")).encode()


def decode_change_notification(data: bytes | None) -> tuple[str, str]:
    """(entity type, name) of a version-2 notification; ValueError otherwise."""
    try:
        doc = json.loads(data or b"")
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != 2 or not isinstance(doc.get("entity_path"), str):
        raise ValueError("expected {\"version\":2,\"entity_path\":\"<type>/<name>\"}")
    entity_type, sep, name = doc["entity_path"].partition("/")
    if not sep or not name:
        raise ValueError(f"entity_path {doc['entity_path']!r} is not <type>/<name>")
    return entity_type, name


async def read_config(zk: ZkSession, entity_type: str, name: str) -> tuple[dict[str, str], int | None]:
    """(overrides, znode version); ({}, None) when the znode does not exist."""
    try:
        data, stat = await zk.get(entity_path(entity_type, name))
    except NoNode:
        return {}, None
    return zkdata.decode_topic_config(data), stat.version


async def write_config(zk: ZkSession, entity_type: str, name: str, config: Mapping[str, str],
                       version: int | None) -> None:
    """Write `config` whole (conditional on `version`, None: the znode must not exist), then the
    change notification. Raises ConfigWriteConflict if someone else wrote meanwhile."""
    path = entity_path(entity_type, name)
    data = zkdata.encode_topic_config(dict(config))
    try:
        if version is None:
            await zk.create(path, data, make_parents=True)
        else:
            await zk.set(path, data, version)
    except (BadVersion, NodeExists, NoNode):
        raise ConfigWriteConflict(f"the configuration of {entity_type}/{name} changed meanwhile") from None
    await zk.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}", encode_change_notification(entity_type, name),
                    sequential=True, make_parents=True)


async def change_config(zk: ZkSession, entity_type: str, name: str, add: Mapping[str, str] = {},
                        delete: Iterable[str] = (), *, attempts: int = 5) -> tuple[dict[str, str], bool]:
    """Read-modify-write of one entity's overrides (retried on a concurrent write). Returns the
    new config and whether anything changed; nothing is written when nothing changes."""
    delete = list(delete)

    def change(config: dict[str, str]) -> dict[str, str]:
        new = dict(config)
        new.update(add)
        for key in delete:
            new.pop(key, None)
        return new
    return await update_config(zk, entity_type, name, change, attempts=attempts)


async def update_config(zk: ZkSession, entity_type: str, name: str,
                        change: Callable[[dict[str, str]], dict[str, str]], *, write: bool = True,
                        attempts: int = 5) -> tuple[dict[str, str], bool]:
    """`change(current overrides) -> new overrides`, written with its change notification if it
    differs (and `write`), read again and redone on a concurrent write. Returns the new config
    and whether it was written. `change` may raise to refuse; nothing is written then."""
    for _ in range(attempts):
        config, version = await read_config(zk, entity_type, name)
        new = change(config)
        if not write or (new == config and (version is not None or not new)):
            return new, False  # (nothing to change: a missing znode stays missing)
        try:
            await write_config(zk, entity_type, name, new, version)
        except ConfigWriteConflict:
            continue
        return new, True
    raise ConfigWriteConflict(f"the configuration of {entity_type}/{name} kept changing; nothing was written")


async def entity_names(zk: ZkSession, entity_type: str) -> list[str]:
    try:
        return sorted(await zk.get_children(f"/config/{entity_type}"))
    except NoNode:
        return []


def validate_broker_config(add: Mapping[str, str]) -> dict[str, str]:
    """The broker keys this cluster follows dynamically, with values of the right type."""
    out = {}
    for key, value in add.items():
        kind = BROKER_DYNAMIC_KEYS.get(key)
        if kind is None:
            raise ValueError(f"broker config {key!r} cannot be changed in ZooKeeper on a running cluster "
                             f"(dynamic keys: {', '.join(sorted(BROKER_DYNAMIC_KEYS))})")
        if kind == "long":
            if not re.fullmatch(r"[0-9]{1,18}", value.strip()):
                raise ValueError(f"Invalid value {value} for configuration {key}: Not a number of type LONG "
                                 "(a non-negative number of bytes per second)")
            value = value.strip()
        elif kind == "bool":
            if value.strip().lower() not in ("true", "false"):
                raise ValueError(f"Invalid value {value} for configuration {key}: Expected value to be either "
                                 "true or false")
            value = value.strip().lower()
        out[key] = value
    return out


def parse_add_config(text: str) -> dict[str, str]:
    """`k1=v1,k2=[v1,v2],k3=v3` as Kafka's ConfigCommand splits it: on commas outside square
    brackets, then on the first `=`; brackets are removed from values."""
    out: dict[str, str] = {}
    for item in re.split(r",(?=[^\]]*(?:\[|$))", text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError('Invalid entity config: all configs to be added must be in the format "key=val".')
        out[key.strip()] = re.sub(r"[\[\]]", "", value).strip()
    return out
