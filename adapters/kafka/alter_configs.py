"""What AlterConfigs and IncrementalAlterConfigs change, as Kafka 2.4's AdminManager decides it
(pure: the current overrides in, the new overrides or a refusal out).

Who calls it: the Kafka listener's handlers (adapters/kafka/apis.py), which read the entity's
overrides from ZooKeeper first and write the result with its change notification after, as
`kctl configs --alter` does (adapters/znodes/dynconfig.py).

- IncrementalAlterConfigs applies each operation to the current overrides: SET, DELETE, and for
  list-valued keys APPEND and SUBTRACT (comma-separated items); AlterConfigs replaces them whole.
- Topic keys are checked as Kafka's LogConfig checks them; broker keys must be ones a running
  kctl cluster follows dynamically (`dynconfig.validate_broker_config`).
- A broker resource is the cluster-wide default (empty name) or this broker itself; another
  broker's id is refused, as Kafka refuses it (the client sends per-broker changes to that broker).
"""
from __future__ import annotations

from typing import Iterable, Mapping

from adapters.admin.checks import validate_topic_configs
from adapters.admin.errors import AdminError, UnknownTopicConfigError
from adapters.znodes import dynconfig as D

from . import configs as CF
from . import protocol as K

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

LIST_TOPIC_KEYS = frozenset({"cleanup.policy", D.LEADER_THROTTLED_REPLICAS, D.FOLLOWER_THROTTLED_REPLICAS})
"""The topic keys of Kafka's LogConfig whose type is LIST: the only ones APPEND and SUBTRACT take."""


class Refused(Exception):
    """A resource's change refused: `code` is Kafka's error code, `message` its error message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def describe(rtype: int, name: str) -> str:
    """Kafka's `ConfigResource.toString`, which its error messages quote."""
    kind = {CF.TOPIC: "TOPIC", CF.BROKER: "BROKER"}.get(rtype, str(rtype))
    return f"ConfigResource(type={kind}, name='{name}')"


def entity(rtype: int, name: str, broker_id: int) -> tuple[str, str]:
    """The znode entity a resource names: (`topics`, topic) or (`brokers`, id or `<default>`)."""
    if rtype == CF.TOPIC:
        return D.TOPICS, name
    if rtype == CF.BROKER:
        if name == "":
            return D.BROKERS, D.DEFAULT_ENTITY
        try:
            asked = int(name)
        except ValueError:
            raise Refused(K.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
        if asked != broker_id:
            raise Refused(K.INVALID_REQUEST, f"Unexpected broker id, expected {broker_id}, but received {name}")
        return D.BROKERS, str(broker_id)
    raise Refused(K.INVALID_REQUEST, f"AlterConfigs is only supported for topics and brokers, but resource type is {rtype}")


def incremental(rtype: int, name: str, current: Mapping[str, str],
                ops: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
    """The overrides after `ops` ((key, operation, value) triples), checked; Refused if not."""
    ops = list(ops)
    seen: dict[str, int] = {}
    for key, _, _ in ops:
        seen[key] = seen.get(key, 0) + 1
    duplicates = sorted(k for k, n in seen.items() if n > 1)
    if duplicates:
        raise Refused(K.INVALID_REQUEST, f"Error due to duplicate config keys : {','.join(duplicates)}")
    new = dict(current)
    for key, op, value in ops:
        if op == SET:
            if value is None:
                raise Refused(K.INVALID_REQUEST, f"Invalid config value for resource {describe(rtype, name)}: "
                                                 f"the value of {key} is null")
            new[key] = value
        elif op == DELETE:
            new.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            if rtype != CF.TOPIC or key not in LIST_TOPIC_KEYS:
                verb = "append" if op == APPEND else "subtract"
                raise Refused(K.INVALID_REQUEST, f"Config value {verb} is not allowed for config key: {key}")
            have = [v for v in new.get(key, "").split(",") if v]
            items = [v for v in (value or "").split(",") if v]
            merged = have + items if op == APPEND else [v for v in have if v not in items]
            if merged:
                new[key] = ",".join(merged)
            else:
                new.pop(key, None)
        else:
            raise Refused(K.INVALID_REQUEST, f"Unknown config operation {op} for config key: {key}")
    return checked(rtype, name, new)


def replacement(rtype: int, name: str, entries: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """AlterConfigs: the given entries become the whole override set (a null value drops its key)."""
    return checked(rtype, name, {k: v for k, v in entries if v is not None})


def checked(rtype: int, name: str, config: Mapping[str, str]) -> dict[str, str]:
    """`config` with its values normalised, as it will be written; Refused naming what is wrong."""
    try:
        if rtype == CF.TOPIC:
            return validate_topic_configs(config)
        return D.validate_broker_config(config)
    except UnknownTopicConfigError as err:
        raise Refused(K.INVALID_CONFIG, str(err)) from None
    except (AdminError, ValueError) as err:
        raise Refused(K.INVALID_REQUEST, f"Invalid config value for resource {describe(rtype, name)}: {err}") from None
