"""The admin tools' input checks, made before anything is written: topic names, replica
assignments, topic configs as Kafka's LogConfig checks them, topic patterns."""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any


from adapters.admin.errors import AdminError, TopicConfigError, UnknownTopicConfigError


MAX_TOPIC_LENGTH = 249
LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def random_seed() -> int:
    """A random start index for placement, as Kafka draws one from its `Random`."""
    return int.from_bytes(os.urandom(8), "big")


def validate_topic_name(topic: str) -> None:
    """Kafka's `Topic.validate`, with its messages."""
    if not topic:
        raise AdminError("Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise AdminError('Topic name cannot be "." or ".."')
    if len(topic) > MAX_TOPIC_LENGTH:
        raise AdminError(f"Topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH} characters, "
                         f"topic: {topic}")
    if not LEGAL_TOPIC.fullmatch(topic):
        raise AdminError(f'Topic name "{topic}" is illegal, it contains a character other than '
                         "ASCII alphanumerics, '.', '_' and '-'")


def legal_topic_name(topic: str) -> bool:
    try:
        validate_topic_name(topic)
    except AdminError:
        return False
    return True


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """`1:2:3,2:3:1`: partition i is the i-th comma group (Kafka's `parseReplicaAssignment`)."""
    result: dict[int, list[int]] = {}
    for partition, group in enumerate(text.split(",")):
        replicas = []
        for item in group.split(":"):
            item = item.strip()
            if not re.fullmatch(r"[0-9]{1,10}", item) or int(item) > 2**31 - 1:  # a Java Int, not negative
                raise AdminError(f"--replica-assignment: {item!r} in partition {partition} ({group!r}) "
                                 "is not a broker id")
            replicas.append(int(item))
        duplicates = sorted({r for r in replicas if replicas.count(r) > 1})
        if duplicates:
            raise AdminError("Partition replica lists may not contain duplicate entries: "
                             + ",".join(map(str, duplicates)))
        if result and len(replicas) != len(result[0]):
            raise AdminError(f"Partition {partition} has different replication factor: "
                             + ",".join(map(str, replicas)))
        result[partition] = replicas
    return result


def parse_topic_configs(items: Iterable[str] | None) -> dict[str, str]:
    """`--config k=v` items (Kafka splits on `=` and wants exactly two parts)."""
    configs: dict[str, str] = {}
    for item in items or ():
        parts = re.split(r"\s*=\s*", item.strip())
        if len(parts) != 2 or not parts[0]:
            raise AdminError(f'Invalid topic config {item!r}: all configs to be added must be in the format "key=val".')
        configs[parts[0]] = parts[1]
    return configs


_BOOL = "bool"
_LONG = "long"
_INT = "int"
_RATIO = "ratio"
_STRING = "string"
# Kafka 2.4's LogConfig: name -> (kind, lower bound or allowed values)
TOPIC_CONFIGS: dict[str, tuple[str, Any]] = {
    "cleanup.policy": ("list", {"compact", "delete"}),
    "compression.type": ("enum", {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}),
    "delete.retention.ms": (_LONG, 0),
    "file.delete.delay.ms": (_LONG, 0),
    "flush.messages": (_LONG, 0),
    "flush.ms": (_LONG, 0),
    "follower.replication.throttled.replicas": (_STRING, None),
    "index.interval.bytes": (_INT, 0),
    "leader.replication.throttled.replicas": (_STRING, None),
    "max.compaction.lag.ms": (_LONG, 1),
    "max.message.bytes": (_INT, 0),
    "message.downconversion.enable": (_BOOL, None),
    "message.format.version": (_STRING, None),
    "message.timestamp.difference.max.ms": (_LONG, 0),
    "message.timestamp.type": ("enum", {"CreateTime", "LogAppendTime"}),
    "min.cleanable.dirty.ratio": (_RATIO, None),
    "min.compaction.lag.ms": (_LONG, 0),
    "min.insync.replicas": (_INT, 1),
    "preallocate": (_BOOL, None),
    "retention.bytes": (_LONG, None),
    "retention.ms": (_LONG, -1),
    "segment.bytes": (_INT, 14),
    "segment.index.bytes": (_INT, 0),
    "segment.jitter.ms": (_LONG, 0),
    "segment.ms": (_LONG, 1),
    "unclean.leader.election.enable": (_BOOL, None),
}


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Kafka's `LogConfig.validate`: known names, values of the right type. Booleans are
    normalised to lower case, as Kafka's ConfigDef parses them case-insensitively."""
    out = {}
    for name, value in configs.items():
        if name not in TOPIC_CONFIGS:
            raise UnknownTopicConfigError(f"Unknown topic config name: {name}")
        kind, arg = TOPIC_CONFIGS[name]
        prefix = f"Invalid value {value} for configuration {name}"
        if kind == _BOOL:
            if value.lower() not in ("true", "false"):
                raise TopicConfigError(f"{prefix}: Expected value to be either true or false")
            value = value.lower()
        elif kind in (_LONG, _INT):
            bits = 63 if kind == _LONG else 31
            if not re.fullmatch(r"-?[0-9]+", value) or not -(2**bits) <= int(value) < 2**bits:
                raise TopicConfigError(f"{prefix}: Not a number of type {kind.upper()}")
            if arg is not None and int(value) < arg:
                raise TopicConfigError(f"{prefix}: Value must be at least {arg}")
        elif kind == _RATIO:
            try:
                ratio = float(value)
            except ValueError:
                raise TopicConfigError(f"{prefix}: Not a number of type DOUBLE") from None
            if not 0 <= ratio <= 1:
                raise TopicConfigError(f"{prefix}: Value must be between 0 and 1")
        elif kind == "enum":
            if value not in arg:
                raise TopicConfigError(f"{prefix}: String must be one of: {', '.join(sorted(arg))}")
        elif kind == "list":
            items = [v.strip() for v in value.split(",")]
            if not items or any(v not in arg for v in items):
                raise TopicConfigError(f"{prefix}: String must be one of: {', '.join(sorted(arg))}")
        out[name] = value
    return out


def topic_pattern(text: str) -> re.Pattern:
    """Kafka's `Whitelist`: `--topic` is a regular expression (commas mean "or"), matched
    against whole topic names."""
    raw = text.strip().replace(",", "|").replace(" ", "")
    raw = re.sub(r"""^["']+""", "", raw)
    raw = re.sub(r"""["']+$""", "", raw)
    try:
        return re.compile(raw)
    except re.error as exc:
        raise AdminError(f"--topic {text!r} is not a valid regular expression: {exc}") from None


def matching_topics(topics: Iterable[str], text: str | None) -> list[str]:
    if text is None:
        return sorted(topics)
    pattern = topic_pattern(text)
    return sorted(t for t in topics if pattern.fullmatch(t))


def broker_id_list(ids: Iterable[int]) -> str:
    return ",".join(str(b) for b in ids)
