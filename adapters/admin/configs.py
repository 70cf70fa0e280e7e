"""`kafka-configs.sh --zookeeper --alter`: change the dynamic config of a topic or a broker
(`<default>`: the cluster-wide broker default), as `kctl configs --alter` does.

The checks come before the first write (an `AdminError` leaves ZooKeeper untouched): topic keys
as Kafka's LogConfig checks them, broker keys among those the cluster follows while it runs, a
topic that exists, keys to delete that are set (Kafka's "Invalid config(s)"). The write is
`/config/<type>/<name>` (other keys kept) then a `/config/changes` notification
(adapters/znodes/dynconfig.py).
"""
from __future__ import annotations

from typing import Iterable, Mapping

from adapters.admin.checks import validate_topic_configs
from adapters.admin.errors import AdminError, ToolFailure
from adapters.znodes import dynconfig as D, paths as zkpaths
from adapters.zookeeper.session import ZkSession


def validated(entity_type: str, add: Mapping[str, str], delete: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """The keys to add (checked, normalised) and to delete; AdminError when one is wrong."""
    try:
        add = validate_topic_configs(add) if entity_type == D.TOPICS else D.validate_broker_config(add)
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    delete = [k for k in dict.fromkeys(delete)]
    both = sorted(set(add) & set(delete))
    if both:
        raise AdminError(f"config(s) {', '.join(both)} are both added and deleted")
    return add, delete


async def alter_config(zk: ZkSession, entity_type: str, name: str, add: Mapping[str, str] = {},
                       delete: Iterable[str] = ()) -> dict[str, str]:
    """Set `add` and remove `delete` in the entity's overrides; returns the new overrides."""
    add, delete = validated(entity_type, add, delete)
    if entity_type == D.TOPICS and not await zk.exists(zkpaths.topic(name)):
        raise AdminError(f"Topic '{name}' does not exist as expected")
    config, _ = await D.read_config(zk, entity_type, name)
    missing = [k for k in delete if k not in config]
    if missing:
        raise AdminError(f"Invalid config(s): {','.join(missing)}")
    try:
        new, _ = await D.change_config(zk, entity_type, name, add, delete)
    except D.ConfigWriteConflict as exc:
        raise ToolFailure(str(exc)) from None
    return new
