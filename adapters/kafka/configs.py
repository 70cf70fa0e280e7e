"""Kafka 2.4's configuration defaults and sources, for DescribeConfigs (pure data).

Topic configs: every `LogConfig` key with its default and the broker key it falls back to
(Kafka's synonyms). Broker configs: the keys a kctl node reads, with Kafka's defaults.
"""
from __future__ import annotations

# ConfigSource (DescribeConfigsResponse v1+)
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# ResourceType
TOPIC = 2
BROKER = 4

_LONG_MAX = "9223372036854775807"

# topic config -> (Kafka 2.4 default, broker synonym or None)
TOPIC_DEFAULTS: dict[str, tuple[str, str | None]] = {
    "cleanup.policy": ("delete", "log.cleanup.policy"),
    "compression.type": ("producer", "compression.type"),
    "delete.retention.ms": ("86400000", "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": ("60000", "log.segment.delete.delay.ms"),
    "flush.messages": (_LONG_MAX, "log.flush.interval.messages"),
    "flush.ms": (_LONG_MAX, "log.flush.interval.ms"),
    "follower.replication.throttled.replicas": ("", None),
    "index.interval.bytes": ("4096", "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": ("", None),
    "max.compaction.lag.ms": (_LONG_MAX, "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": ("1000012", "message.max.bytes"),
    "message.downconversion.enable": ("true", "log.message.downconversion.enable"),
    "message.format.version": ("2.4-IV1", "log.message.format.version"),
    "message.timestamp.difference.max.ms": (_LONG_MAX, "log.message.timestamp.difference.max.ms"),
    "message.timestamp.type": ("CreateTime", "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": ("0.5", "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": ("0", "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": ("1", "min.insync.replicas"),
    "preallocate": ("false", "log.preallocate"),
    "retention.bytes": ("-1", "log.retention.bytes"),
    "retention.ms": ("604800000", "log.retention.ms"),
    "segment.bytes": ("1073741824", "log.segment.bytes"),
    "segment.index.bytes": ("10485760", "log.index.size.max.bytes"),
    "segment.jitter.ms": ("0", "log.roll.jitter.ms"),
    "segment.ms": ("604800000", "log.roll.ms"),
    "unclean.leader.election.enable": ("false", "unclean.leader.election.enable"),
}

# broker configs a kctl node reads -> Kafka 2.4 default
BROKER_DEFAULTS: dict[str, str] = {
    "auto.leader.rebalance.enable": "true",
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "5000",
    "delete.topic.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "leader.imbalance.per.broker.percentage": "10",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "replica.lag.time.max.ms": "10000",
    "unclean.leader.election.enable": "false",
    "zookeeper.session.timeout.ms": "6000",
    "leader.replication.throttled.rate": "9223372036854775807",
    "follower.replication.throttled.rate": "9223372036854775807",
}


def _entry(name: str, value: str | None, source: int, synonyms: list[dict], read_only: bool = False) -> dict:
    return {"Name": name, "Value": value, "ReadOnly": read_only, "IsDefault": source == DEFAULT_CONFIG,
            "ConfigSource": source, "IsSensitive": False, "Synonyms": synonyms}


def _chain(pairs) -> list[dict]:
    return [{"Name": n, "Value": v, "Source": s} for n, v, s in pairs if v is not None]


def topic_configs(overrides: dict[str, str], dynamic_default: dict[str, str], static: dict[str, str]) -> list[dict]:
    """Every topic config: the override, else the broker synonym (dynamic default, then static),
    else Kafka's default; each with the chain of synonyms (Kafka's order: most specific first)."""
    out = []
    for name, (default, synonym) in sorted(TOPIC_DEFAULTS.items()):
        chain = [(name, overrides.get(name), DYNAMIC_TOPIC_CONFIG)]
        if synonym is not None:
            chain += [(synonym, dynamic_default.get(synonym), DYNAMIC_DEFAULT_BROKER_CONFIG),
                      (synonym, _static(static, synonym), STATIC_BROKER_CONFIG),
                      (synonym, default, DEFAULT_CONFIG)]
        else:
            chain.append((name, default, DEFAULT_CONFIG))
        synonyms = _chain(chain)
        first = synonyms[0]
        out.append(_entry(name, first["Value"], first["Source"], synonyms))
    for name in sorted(set(overrides) - set(TOPIC_DEFAULTS)):
        out.append(_entry(name, overrides[name], DYNAMIC_TOPIC_CONFIG,
                          _chain([(name, overrides[name], DYNAMIC_TOPIC_CONFIG)])))
    return out


def _static(static: dict[str, str], key: str) -> str | None:
    value = static.get(key)
    return None if value is None else str(value)


def broker_configs(dynamic: dict[str, str], dynamic_default: dict[str, str], static: dict[str, str]) -> list[dict]:
    """One broker's configs: per-broker dynamic, then cluster-wide dynamic default, then static,
    then Kafka's default."""
    names = sorted(set(BROKER_DEFAULTS) | set(dynamic) | set(dynamic_default) | set(static))
    out = []
    for name in names:
        synonyms = _chain([(name, dynamic.get(name), DYNAMIC_BROKER_CONFIG),
                           (name, dynamic_default.get(name), DYNAMIC_DEFAULT_BROKER_CONFIG),
                           (name, _static(static, name), STATIC_BROKER_CONFIG),
                           (name, BROKER_DEFAULTS.get(name), DEFAULT_CONFIG)])
        first = synonyms[0]
        out.append(_entry(name, first["Value"], first["Source"], synonyms,
                          read_only=first["Source"] in (STATIC_BROKER_CONFIG, DEFAULT_CONFIG)
                          and name not in BROKER_DEFAULTS))
    return out


def default_broker_configs(dynamic_default: dict[str, str]) -> list[dict]:
    """The cluster-wide default resource (an empty broker name): its dynamic entries only."""
    return [_entry(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG,
                   _chain([(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG)]))
            for name, value in sorted(dynamic_default.items())]
