"""Encoders and decoders for every znode of the Kafka 2.4 layout, and for the JSON files of
Kafka's command-line tools (CONTRACT.md sections 1 and 2).

Encoders write what Kafka 2.4 writes: the same key names, value types and versions, as compact
UTF-8 JSON. Decoders read what Kafka 2.4 reads, as leniently as Kafka does (unknown keys are
ignored, version 1 topic znodes are accepted), but check the type of every field they use. A
decoder raises only `ZnodeFormatError`, whose message names the kind of data and what exactly
was wrong with it, e.g. ``reassignment request: partitions[2].replicas must be a list of
integers, got 'x'``. Semantic checks (duplicate replicas, known brokers, consecutive partition
ids) belong to the callers.

Integers that Kafka holds in a Java `Int` (broker ids, partitions, epochs, versions) must fit in
32 bits here too; JSON `true`/`false` and fractions are never integers.
"""
from __future__ import annotations

import base64
import json
import re
import reprlib
from collections.abc import Iterable, Mapping
from itertools import chain
from typing import Any, NoReturn

from controller_core.values import BrokerInfo, LeaderIsr, ReplicaAssignment, TopicPartition, shared_assignment

__all__ = [
    "ZnodeFormatError",
    "encode_controller",
    "decode_controller",
    "encode_controller_epoch",
    "decode_controller_epoch",
    "encode_broker",
    "decode_broker",
    "encode_topic_assignment",
    "decode_topic_assignment",
    "encode_partition_state",
    "encode_partition_states",
    "decode_partition_state",
    "encode_reassignment",
    "decode_reassignment",
    "encode_preferred_replica_election",
    "decode_preferred_replica_election",
    "encode_isr_change_notification",
    "decode_isr_change_notification",
    "encode_topic_config",
    "decode_topic_config",
    "encode_cluster_id",
    "decode_cluster_id",
    "new_cluster_id",
    "encode_topics_to_move_file",
    "decode_topics_to_move_file",
    "encode_leader_election_file",
    "decode_leader_election_file",
    "encode_reassignment_file",
    "decode_reassignment_file",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
ANY_LOG_DIR = "any"
"""What Kafka's reassignment tool writes in `log_dirs` when no log directory is chosen."""

_DECIMAL = re.compile(r"-?[0-9]+")
_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
_shown = reprlib.Repr()
_shown.maxstring = 60
_shown.maxother = 60
_shown.maxlist = 6
_shown.maxdict = 4
_shown.maxlevel = 3


class ZnodeFormatError(ValueError):
    """Znode (or tool file) content that does not have the expected format.

    `kind` names the data ("topic assignment", "reassignment file", ...) and `problem` says what
    was wrong; the message is ``"<kind>: <problem>"``.
    """

    def __init__(self, kind: str, problem: str) -> None:
        super().__init__(f"{kind}: {problem}")
        self.kind = kind
        self.problem = problem


# --- /controller --------------------------------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    """The controller's broker id. A bare integer (the pre-0.9 format) is accepted too."""
    doc = _Doc("controller")
    value = doc.parse(data)
    if type(value) is int:
        return doc.int32(value, "the legacy controller id")
    return doc.int32_field(doc.root(value), "brokerid")


# --- /controller_epoch --------------------------------------------------------------------------


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    doc = _Doc("controller epoch")
    raw = doc.raw(data)
    if not _DECIMAL.fullmatch(raw) or raw.startswith("-"):
        doc.fail(f"expected a decimal number, got {_show(raw)}")
    return doc.decimal(raw, "the epoch")


# --- /brokers/ids/<id> --------------------------------------------------------------------------


def encode_broker(
    broker_id: int, host: str, port: int, rack: str | None, timestamp_ms: int
) -> bytes:
    """A version 4 registration with one PLAINTEXT listener, as a Kafka 2.4 broker writes it.

    `broker_id` is not part of the content (it is the znode's name); it is taken for symmetry
    with `decode_broker`.
    """
    content: dict[str, Any] = {
        "version": 4,
        "host": host,
        "port": port,
        "jmx_port": -1,
        "timestamp": str(timestamp_ms),
        "endpoints": [f"PLAINTEXT://{_format_address(host, port)}"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
    }
    if rack is not None:
        content["rack"] = rack
    return _dump(content)


def decode_broker(broker_id: int, data: bytes, czxid: int) -> BrokerInfo:
    """A broker registration; `czxid` (the znode's creation zxid) becomes the broker epoch.

    Host and port come from the `host` / `port` keys, or, when those are missing or null (a
    broker without a PLAINTEXT listener writes `"host":null,"port":-1`), from the PLAINTEXT
    endpoint, else the first endpoint.
    """
    doc = _Doc(f"broker registration {broker_id}")
    root = doc.root(doc.parse(data))
    version = doc.int32_field(root, "version")
    if version < 1:
        doc.fail(f"version must be at least 1, got {version}")
    if "jmx_port" in root:
        doc.int32(root["jmx_port"], "jmx_port")
    rack = root.get("rack")
    if rack is not None:
        doc.string(rack, "rack")
    host = root.get("host")
    if host is not None:
        doc.string(host, "host")
    port = root.get("port")
    if port is not None:
        doc.int32(port, "port")

    endpoints: list[tuple[str, str, int]] = []
    if version >= 2:
        for index, item in enumerate(doc.array(doc.field(root, "endpoints"), "endpoints")):
            endpoints.append(doc.endpoint(item, f"endpoints[{index}]"))
    protocols: dict[str, str] = {}
    if root.get("listener_security_protocol_map") is not None:
        where = "listener_security_protocol_map"
        for listener, protocol in doc.obj(root[where], where).items():
            protocols[listener] = doc.string(protocol, f"{where}[{listener!r}]")

    if host is not None and port is not None and port >= 0:
        return BrokerInfo(broker_id, host, port, czxid, rack)
    if version == 1:
        doc.fail("host and port are required in a version 1 registration")
    if not endpoints:
        doc.fail("has no host and port and no endpoints")
    plaintext = [e for e in endpoints if protocols.get(e[0], e[0]) == "PLAINTEXT"]
    _, host, port = (plaintext or endpoints)[0]
    return BrokerInfo(broker_id, host, port, czxid, rack)


# --- /brokers/topics/<topic> --------------------------------------------------------------------


def encode_topic_assignment(
    assignment: Mapping[int, ReplicaAssignment | Iterable[int]],
) -> bytes:
    """Version 2, with `adding_replicas` / `removing_replicas` holding only non-empty entries.

    Values may also be plain replica lists (a partition that is not being reassigned).
    """
    replicas: dict[str, list[int]] = {}
    adding: dict[str, list[int]] = {}
    removing: dict[str, list[int]] = {}
    for partition in sorted(assignment):
        value = assignment[partition]
        if not isinstance(value, ReplicaAssignment):
            value = ReplicaAssignment(tuple(value))
        key = str(partition)
        replicas[key] = list(value.replicas)
        if value.adding:
            adding[key] = list(value.adding)
        if value.removing:
            removing[key] = list(value.removing)
    return _dump(
        {
            "version": 2,
            "partitions": replicas,
            "adding_replicas": adding,
            "removing_replicas": removing,
        }
    )


def decode_topic_assignment(
    data: bytes, *, topic: str | None = None
) -> dict[int, ReplicaAssignment]:
    """`{partition: ReplicaAssignment}` in partition order, from a version 1 or 2 topic znode.

    `topic` only names the topic in error messages.
    """
    doc = _Doc("topic assignment" if topic is None else f"topic assignment of {topic}")
    root = doc.root(doc.parse(data))
    replicas = doc.partition_map(root, "partitions", required=True)
    adding = doc.partition_map(root, "adding_replicas", required=False)
    removing = doc.partition_map(root, "removing_replicas", required=False)
    for where, extra in (("adding_replicas", adding), ("removing_replicas", removing)):
        unknown = sorted(set(extra) - set(replicas))
        if unknown:
            doc.fail(f"{where} names partition {unknown[0]}, which is not in partitions")
    # one shared value per distinct assignment: a new controller decodes every topic's znode
    if not adding and not removing:
        return {partition: shared_assignment(replicas[partition]) for partition in sorted(replicas)}
    return {
        partition: shared_assignment(
            replicas[partition], adding.get(partition, ()), removing.get(partition, ())
        )
        for partition in sorted(replicas)
    }


def _plain_partition_map(mapping: dict) -> dict[int, tuple[int, ...]] | None:
    """`_Doc.partition_map`'s result when every entry is plainly well formed (partition ids of at
    most 10 digits, lists of 32-bit integers, no id twice), checked in a few C-level passes over
    the whole map rather than entry by entry (a new controller decodes 100,000 of them); None
    when anything is unusual, for the entry-by-entry checks that name the problem."""
    if not mapping:
        return {}
    names = list(mapping)
    lists = list(mapping.values())
    if set(map(type, lists)) != {list} or max(map(len, names)) > 10 \
            or not all(map(_DECIMAL.fullmatch, names)):
        return None
    flat = list(chain.from_iterable(lists))
    if flat and (set(map(type, flat)) != {int} or min(flat) < INT32_MIN or max(flat) > INT32_MAX):
        return None
    ids = list(map(int, names))
    if min(ids) < INT32_MIN or max(ids) > INT32_MAX or len(set(ids)) != len(ids):
        return None
    return dict(zip(ids, map(tuple, lists)))


# --- /brokers/topics/<topic>/partitions/<p>/state -----------------------------------------------


def encode_partition_state(leader_isr: LeaderIsr) -> bytes:
    """The same bytes as `_dump` of the dict (Kafka's key order), written directly: a failover
    encodes 10,000 of these, and json.dumps costs ten times more per call."""
    li = leader_isr
    return (f'{{"version":1,"leader":{int(li.leader)},"leader_epoch":{int(li.leader_epoch)},'
            f'"controller_epoch":{int(li.controller_epoch)},"isr":[{",".join(map(str, map(int, li.isr)))}]}}'
            ).encode("ascii")


def _state_template(isr_size: int) -> bytes:
    return (b'{"version":1,"leader":%d,"leader_epoch":%d,"controller_epoch":%d,"isr":['
            + b",".join([b"%d"] * isr_size) + b"]}")


_STATE_TEMPLATES = [_state_template(size) for size in range(16)]
"""`encode_partition_state`'s output as a bytes template, one per ISR size (the shape of the
znode): filling one is a single C call."""


def encode_partition_states(states) -> list[bytes]:
    """`[encode_partition_state(s) for s in states]`, byte for byte (a Hypothesis test holds it
    to that), at about a third of the cost: the ZooKeeper writer encodes every state of a
    failover, 100,000 of them at that scale, and the per-state f-string with its `map`s and
    `join` was most of the writer's encoding time. `%d` converts as `int()` does for ints,
    bools and numpy integers; anything else takes the per-state encoder and its errors."""
    templates = _STATE_TEMPLATES
    out = []
    append = out.append
    for li in states:
        isr = li[2]
        try:
            append(templates[len(isr)] % (li[0], li[1], li[3], *isr))
        except (IndexError, TypeError):  # a larger ISR, or values %d does not take
            append(encode_partition_state(li))
    return out


_INT = rb"(-?(?:0|[1-9][0-9]{0,9}))"
_CANONICAL_STATE = re.compile(rb'\{"version":1,"leader":' + _INT + rb',"leader_epoch":' + _INT
                              + rb',"controller_epoch":' + _INT + rb',"isr":\[((?:' + _INT[1:-1] + rb'(?:,'
                              + _INT[1:-1] + rb')*)?)\]\}')
"""A state znode exactly as `encode_partition_state` writes it. A new controller reads one per
partition (100,000 of them took 3 s through the strict JSON reader); bytes of this shape are
well-formed JSON with no duplicate key, so reading the numbers out of the match gives what the
strict reader gives. Anything else (Kafka's own key order, spaces, a damaged znode) takes the
strict reader and its errors."""


def decode_partition_state(
    data: bytes, zk_version: int, *, tp: TopicPartition | None = None
) -> LeaderIsr:
    """The state read at znode version `zk_version`. `tp` only names the partition in errors."""
    m = _CANONICAL_STATE.fullmatch(data) if type(data) is bytes else None
    if m is not None:
        leader, leader_epoch, controller_epoch, isr = m.groups()
        numbers = (int(leader), int(leader_epoch), int(controller_epoch),
                   *(map(int, isr.split(b",")) if isr else ()))
        if INT32_MIN <= min(numbers) and max(numbers) <= INT32_MAX:
            return LeaderIsr(numbers[0], numbers[1], numbers[3:], numbers[2], zk_version)
    doc = _Doc("partition state" if tp is None else f"partition state of {tp}")
    root = doc.root(doc.parse(data))
    return LeaderIsr(
        leader=doc.int32_field(root, "leader"),
        leader_epoch=doc.int32_field(root, "leader_epoch"),
        isr=doc.int_list(doc.field(root, "isr"), "isr"),
        controller_epoch=doc.int32_field(root, "controller_epoch"),
        zk_version=zk_version,
    )


# --- /admin/reassign_partitions and the reassignment tool's file ---------------------------------


def encode_reassignment(
    reassignment: Mapping[TopicPartition, Iterable[int]]
    | Iterable[tuple[TopicPartition, Iterable[int]]],
) -> bytes:
    """The `/admin/reassign_partitions` content, partitions in the given order."""
    return _dump({"version": 1, "partitions": _reassignment_entries(reassignment, False)})


def decode_reassignment(data: bytes) -> tuple[tuple[TopicPartition, tuple[int, ...]], ...]:
    """`((TopicPartition, target replicas), ...)` in the order of the znode."""
    return _decode_reassignment(_Doc("reassignment request"), data)


def encode_reassignment_file(
    reassignment: Mapping[TopicPartition, Iterable[int]]
    | Iterable[tuple[TopicPartition, Iterable[int]]],
) -> bytes:
    """The reassignment JSON that kafka-reassign-partitions.sh prints and reads, with `log_dirs`
    set to "any" for every replica as Kafka 2.4's tool writes it."""
    return _dump({"version": 1, "partitions": _reassignment_entries(reassignment, True)})


def decode_reassignment_file(data: bytes) -> tuple[tuple[TopicPartition, tuple[int, ...]], ...]:
    """The `--reassignment-json-file` of the reassignment tool (same format as the znode)."""
    return _decode_reassignment(_Doc("reassignment file"), data)


def _reassignment_entries(reassignment, with_log_dirs: bool) -> list[dict[str, Any]]:
    items = reassignment.items() if isinstance(reassignment, Mapping) else reassignment
    entries = []
    seen = set()
    for tp, replicas in items:
        if tp in seen:
            raise ValueError(f"{tp} is listed twice")
        seen.add(tp)
        entry: dict[str, Any] = {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(replicas),
        }
        if with_log_dirs:
            entry["log_dirs"] = [ANY_LOG_DIR] * len(entry["replicas"])
        entries.append(entry)
    return entries


def _decode_reassignment(
    doc: "_Doc", data: bytes
) -> tuple[tuple[TopicPartition, tuple[int, ...]], ...]:
    root = doc.root(doc.parse(data))
    doc.version_one(root)
    result = []
    seen: set[TopicPartition] = set()
    for index, item in enumerate(doc.array(doc.field(root, "partitions"), "partitions")):
        where = f"partitions[{index}]"
        entry = doc.obj(item, where)
        tp = doc.topic_partition(entry, where)
        replicas = doc.int_list(doc.field(entry, "replicas", where), f"{where}.replicas")
        if entry.get("log_dirs") is not None:
            log_dirs = doc.string_list(entry["log_dirs"], f"{where}.log_dirs")
            if len(log_dirs) != len(replicas):
                doc.fail(
                    f"{where}.log_dirs has {len(log_dirs)} entries but {where}.replicas has "
                    f"{len(replicas)}"
                )
        if tp in seen:
            doc.fail(f"lists {tp} twice")
        seen.add(tp)
        result.append((tp, replicas))
    return tuple(result)


# --- /admin/preferred_replica_election, /isr_change_notification/isr_change_*, election file -----


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _dump({"version": 1, "partitions": _partition_entries(partitions)})


def decode_preferred_replica_election(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions, in znode order; a partition listed twice counts once (Kafka reads a set)."""
    return _decode_partitions(_Doc("preferred replica election"), data, duplicates_allowed=True)


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    return _dump({"version": 1, "partitions": _partition_entries(partitions)})


def decode_isr_change_notification(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions, in znode order; a partition listed twice counts once (Kafka reads a set)."""
    return _decode_partitions(_Doc("isr change notification"), data, duplicates_allowed=True)


def encode_leader_election_file(partitions: Iterable[TopicPartition]) -> bytes:
    """The `--path-to-json-file` of kafka-leader-election.sh."""
    return _dump({"partitions": _partition_entries(partitions)})


def decode_leader_election_file(data: bytes) -> tuple[TopicPartition, ...]:
    """The `--path-to-json-file` of kafka-leader-election.sh; duplicates are an error there."""
    return _decode_partitions(_Doc("leader election file"), data, duplicates_allowed=False)


def _partition_entries(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in dict.fromkeys(partitions)]


def _decode_partitions(
    doc: "_Doc", data: bytes, duplicates_allowed: bool
) -> tuple[TopicPartition, ...]:
    root = doc.root(doc.parse(data))
    result: dict[TopicPartition, None] = {}
    for index, item in enumerate(doc.array(doc.field(root, "partitions"), "partitions")):
        where = f"partitions[{index}]"
        tp = doc.topic_partition(doc.obj(item, where), where)
        if tp in result and not duplicates_allowed:
            doc.fail(f"lists {tp} twice")
        result[tp] = None
    return tuple(result)


# --- /config/topics/<topic> ---------------------------------------------------------------------


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    for key, value in config.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"topic config keys and values must be strings: {key!r}={value!r}")
    return _dump({"version": 1, "config": dict(config)})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    """The config overrides. Like Kafka, a znode without data or without `config` means none."""
    doc = _Doc("topic config")
    if data is None or (isinstance(data, (bytes, bytearray, memoryview)) and len(data) == 0):
        return {}
    root = doc.root(doc.parse(data))
    if root.get("config") is None:
        return {}
    return {
        key: doc.string(value, f"config[{key!r}]")
        for key, value in doc.obj(root["config"], "config").items()
    }


# --- /cluster/id --------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    doc = _Doc("cluster id")
    cluster_id = doc.string(doc.field(doc.root(doc.parse(data)), "id"), "id")
    if not cluster_id:
        doc.fail("id is empty")
    return cluster_id


def new_cluster_id(uuid_bytes: bytes) -> str:
    """Kafka's cluster id: the 16 bytes of a (random) UUID in URL-safe base64 without padding,
    22 characters. The caller supplies the bytes, e.g. `uuid.uuid4().bytes`."""
    if len(uuid_bytes) != 16:
        raise ValueError(f"a cluster id is made from 16 bytes, got {len(uuid_bytes)}")
    return base64.urlsafe_b64encode(bytes(uuid_bytes)).rstrip(b"=").decode("ascii")


# --- kafka-reassign-partitions.sh --topics-to-move-json-file ------------------------------------


def encode_topics_to_move_file(topics: Iterable[str]) -> bytes:
    return _dump({"version": 1, "topics": [{"topic": t} for t in dict.fromkeys(topics)]})


def decode_topics_to_move_file(data: bytes) -> tuple[str, ...]:
    doc = _Doc("topics-to-move file")
    root = doc.root(doc.parse(data))
    doc.version_one(root)
    topics: dict[str, None] = {}
    for index, item in enumerate(doc.array(doc.field(root, "topics"), "topics")):
        where = f"topics[{index}]"
        topic = doc.string(doc.field(doc.obj(item, where), "topic", where), f"{where}.topic")
        if topic in topics:
            doc.fail(f"lists topic {topic} twice")
        topics[topic] = None
    return tuple(topics)


# --- helpers ------------------------------------------------------------------------------------


def _dump(content: Any) -> bytes:
    return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _format_address(host: str, port: int) -> str:
    """Kafka's `Utils.formatAddress`: IPv6 literals go in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _show(value: Any) -> str:
    return _shown.repr(value)


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


class _NonFiniteNumber(Exception):
    def __init__(self, token: str) -> None:
        self.token = token


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _reject_constant(token: str) -> NoReturn:
    raise _NonFiniteNumber(token)


class _Doc:
    """Reads one document of a given kind; every failure becomes a ZnodeFormatError."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def fail(self, problem: str) -> NoReturn:
        raise ZnodeFormatError(self.kind, problem)

    # Raw data.

    def raw(self, data: Any) -> str:
        if data is None:
            self.fail("the znode has no data")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            self.fail(f"expected bytes, got {type(data).__name__}")
        if len(data) == 0:
            self.fail("the znode has no data")
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as error:
            self.fail(f"not valid UTF-8 ({error.reason} at byte {error.start})")

    def parse(self, data: Any) -> Any:
        text = self.raw(data)
        try:
            return json.loads(
                text, object_pairs_hook=_object_without_duplicates, parse_constant=_reject_constant
            )
        except _DuplicateKey as error:
            self.fail(f"a JSON object has the key {error.key!r} twice")
        except _NonFiniteNumber as error:
            self.fail(f"not valid JSON ({error.token} is not a JSON number)")
        except json.JSONDecodeError as error:
            self.fail(f"not valid JSON ({error.msg} at line {error.lineno} column {error.colno})")
        except RecursionError:
            self.fail("not valid JSON (nested too deeply)")
        except ValueError as error:  # e.g. an integer literal with thousands of digits
            self.fail(f"not valid JSON ({error})")

    # Structure.

    def root(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(f"the content must be a JSON object, got {_show(value)}")
        return value

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(f"{where} must be an object, got {_show(value)}")
        return value

    def array(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(f"{where} must be a list, got {_show(value)}")
        return value

    def field(self, obj: dict[str, Any], key: str, where: str | None = None) -> Any:
        if key not in obj:
            self.fail(f"{where}.{key} is missing" if where else f"{key} is missing")
        return obj[key]

    # Scalars.

    def int32(self, value: Any, where: str) -> int:
        if type(value) is not int:
            self.fail(f"{where} must be an integer, got {_show(value)}")
        if not INT32_MIN <= value <= INT32_MAX:
            self.fail(f"{where} must be a 32-bit integer, got {_show(value)}")
        return value

    def decimal(self, digits: str, where: str) -> int:
        """A 32-bit integer from a string already matched by `_DECIMAL`."""
        if len(digits.lstrip("-").lstrip("0")) > 10:  # int() of huge strings is slow or refused
            self.fail(f"{where} must be a 32-bit integer, got {_show(digits)}")
        return self.int32(int(digits), where)

    def int32_field(self, obj: dict[str, Any], key: str) -> int:
        return self.int32(self.field(obj, key), key)

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            self.fail(f"{where} must be a string, got {_show(value)}")
        return value

    def int_list(self, value: Any, where: str) -> tuple[int, ...]:
        if not isinstance(value, list):
            self.fail(f"{where} must be a list of integers, got {_show(value)}")
        for item in value:
            if type(item) is not int:
                self.fail(f"{where} must be a list of integers, got {_show(item)} in it")
            if not INT32_MIN <= item <= INT32_MAX:
                self.fail(f"{where} must be a list of 32-bit integers, got {_show(item)} in it")
        return tuple(value)

    def string_list(self, value: Any, where: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.fail(f"{where} must be a list of strings, got {_show(value)}")
        for item in value:
            if not isinstance(item, str):
                self.fail(f"{where} must be a list of strings, got {_show(item)} in it")
        return tuple(value)

    # Shapes shared by several kinds.

    def version_one(self, root: dict[str, Any]) -> None:
        """An optional `version` that must be 1 (Kafka's tools reject any other)."""
        if "version" in root:
            version = self.int32(root["version"], "version")
            if version != 1:
                self.fail(f"version {version} is not supported, only version 1 is")

    def topic_partition(self, entry: dict[str, Any], where: str) -> TopicPartition:
        topic = self.string(self.field(entry, "topic", where), f"{where}.topic")
        partition = self.int32(self.field(entry, "partition", where), f"{where}.partition")
        return TopicPartition(topic, partition)

    def partition_map(
        self, root: dict[str, Any], key: str, required: bool
    ) -> dict[int, tuple[int, ...]]:
        """A `{"<partition>": [replica, ...]}` object, keyed by partition id."""
        if key not in root and not required:
            return {}
        mapping = self.obj(self.field(root, key), key)
        fast = _plain_partition_map(mapping)
        if fast is not None:
            return fast
        result: dict[int, tuple[int, ...]] = {}
        for name, replicas in mapping.items():
            where = f"{key}[{name!r}]"
            if not _DECIMAL.fullmatch(name):
                self.fail(f"{key} has the key {_show(name)}, which is not a partition id")
            partition = self.decimal(name, f"the partition id {where}")
            if partition in result:
                self.fail(f"{key} lists partition {partition} twice")
            result[partition] = self.int_list(replicas, where)
        return result

    def endpoint(self, value: Any, where: str) -> tuple[str, str, int]:
        text = self.string(value, where)
        match = _ENDPOINT.fullmatch(text)
        if match is None:
            self.fail(f"{where} must look like LISTENER://host:port, got {_show(text)}")
        listener, host, port = match.groups()
        return listener, host, self.decimal(port, f"the port of {where}")
