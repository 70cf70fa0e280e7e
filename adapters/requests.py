"""Bodies of the control-channel requests, both ways (pure: no sockets).

The controller turns `Send*` commands into request bodies; brokers turn bodies back into values.
Partition states travel as positional lists, Kafka's field order, because an UpdateMetadata may
carry 100,000 of them:

    [topic, partition, controller_epoch, leader, leader_epoch, [isr], zk_version,
     [replicas], [adding], [removing], is_new]

| api | body | answer |
|---|---|---|
| LeaderAndIsr | controller_id, controller_epoch, broker_epoch, partition_states, live_leaders | {"partition_errors": [[t, p, error]]} |
| UpdateMetadata | controller_id, controller_epoch, broker_epoch, partition_states, live_brokers, shutting_down_brokers | {} |
| StopReplica | controller_id, controller_epoch, broker_epoch, delete_partitions, partitions | {"partition_errors": [...]} |
| ControlledShutdown | broker_id, broker_epoch | {"error", "partitions_remaining": [[t, p]]} |
| ElectLeaders | election_type, partitions (or null: all) | {"error", "results": [[t, p, error]]} |

Malformed bodies raise `RequestFormatError` with the field that was wrong.
"""
from __future__ import annotations

import json
import zlib
from typing import Any

from controller_core import commands as C
from controller_core.values import BrokerInfo, PartitionView, TopicPartition

LEADER_AND_ISR = "LeaderAndIsr"
UPDATE_METADATA = "UpdateMetadata"
STOP_REPLICA = "StopReplica"
CONTROLLED_SHUTDOWN = "ControlledShutdown"
ELECT_LEADERS = "ElectLeaders"
APIS = (LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA, CONTROLLED_SHUTDOWN, ELECT_LEADERS)


class RequestFormatError(ValueError):
    pass


def _view(v: PartitionView) -> list:
    return [v.tp.topic, v.tp.partition, v.controller_epoch, v.leader, v.leader_epoch, list(v.isr), v.zk_version,
            list(v.replicas), list(v.adding), list(v.removing), v.is_new]


def _broker(b: BrokerInfo) -> list:
    return [b.broker_id, b.host, b.port, b.rack]


def views_body(views: tuple[PartitionView, ...]) -> list:
    return [_view(v) for v in views]


# -- pre-encoded bodies (the controller's hot path) ---------------------------------------------
#
# A failover sends the same partition states to several brokers (LeaderAndIsr to each replica,
# UpdateMetadata to everyone). Each view is turned into JSON text once per decision and bodies
# are spliced from those fragments, instead of building and serialising one dict per broker.

_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode
_TOPIC_JSON: dict[str, str] = {}


def _ints_json(values: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, values)) + "]"


def view_json(v: PartitionView) -> str:
    """The JSON text of `_view(v)`, built directly."""
    topic = _TOPIC_JSON.get(v.tp.topic)
    if topic is None:
        topic = _TOPIC_JSON.setdefault(v.tp.topic, _ENCODE(v.tp.topic))
    return (f"[{topic},{v.tp.partition},{v.controller_epoch},{v.leader},{v.leader_epoch},{_ints_json(v.isr)},"
            f"{v.zk_version},{_ints_json(v.replicas)},{_ints_json(v.adding)},{_ints_json(v.removing)},"
            f"{'true' if v.is_new else 'false'}]")


def states_json(views, memo: dict) -> str:
    """JSON text of a partition_states list; `memo` (id(view) -> text) spans one decision."""
    parts = []
    for v in views:
        text = memo.get(id(v))
        if text is None:
            text = memo[id(v)] = view_json(v)
        parts.append(text)
    return "[" + ",".join(parts) + "]"


def spliced_body(header: dict, states: str, compress_threshold: int = 64 * 1024):
    """An `EncodedBody` for `header` plus a pre-encoded "partition_states" member, compressed
    the way adapters/wire.py compresses (zlib) when large."""
    from .wire import COMPRESS_LEVEL, EncodedBody

    text = _ENCODE(header)[:-1] + ',"partition_states":' + states + "}"
    data = text.encode("ascii")
    if compress_threshold is not None and len(data) > compress_threshold:
        return EncodedBody(zlib.compress(data, COMPRESS_LEVEL), True, len(data))
    return EncodedBody(data, False, len(data))


def leader_and_isr_encoded(c: C.SendLeaderAndIsr, controller_id: int, memo: dict):
    header = {"controller_id": controller_id, "controller_epoch": c.controller_epoch,
              "broker_epoch": c.broker_epoch, "live_leaders": [_broker(b) for b in c.live_leaders]}
    return spliced_body(header, states_json(c.partitions, memo))


def update_metadata_encoded(c: C.SendUpdateMetadata, controller_id: int, states: str):
    header = {"controller_id": controller_id, "controller_epoch": c.controller_epoch,
              "broker_epoch": c.broker_epoch, "live_brokers": [_broker(b) for b in c.live_brokers],
              "shutting_down_brokers": list(c.shutting_down)}
    return spliced_body(header, states)


def leader_and_isr_body(c: C.SendLeaderAndIsr, controller_id: int) -> dict:
    return {"controller_id": controller_id, "controller_epoch": c.controller_epoch, "broker_epoch": c.broker_epoch,
            "partition_states": views_body(c.partitions), "live_leaders": [_broker(b) for b in c.live_leaders]}


def update_metadata_body(c: C.SendUpdateMetadata, controller_id: int, states: list | None = None) -> dict:
    """`states` lets the caller pass the already-encoded partition list shared by every broker."""
    return {"controller_id": controller_id, "controller_epoch": c.controller_epoch, "broker_epoch": c.broker_epoch,
            "partition_states": states if states is not None else views_body(c.partitions),
            "live_brokers": [_broker(b) for b in c.live_brokers], "shutting_down_brokers": list(c.shutting_down)}


def stop_replica_body(c: C.SendStopReplica, controller_id: int) -> dict:
    return {"controller_id": controller_id, "controller_epoch": c.controller_epoch, "broker_epoch": c.broker_epoch,
            "delete_partitions": c.delete, "partitions": [[tp.topic, tp.partition] for tp in c.partitions]}


# -- decoding (brokers and the controller's request handlers) ----------------------------------


def _int(body: dict, key: str) -> int:
    value = body.get(key)
    if type(value) is not int:
        raise RequestFormatError(f"{key} must be an integer, got {value!r}")
    return value


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if type(value) is not list:
        raise RequestFormatError(f"{what} must be a list of integers, got {value!r}")
    for x in value:
        if type(x) is not int:
            raise RequestFormatError(f"{what} must be a list of integers, got {value!r}")
    return tuple(value)


def _tp(value: Any, what: str) -> TopicPartition:
    if (not isinstance(value, list) or len(value) < 2 or not isinstance(value[0], str)
            or type(value[1]) is not int):
        raise RequestFormatError(f"{what} must be [topic, partition], got {value!r}")
    return TopicPartition(value[0], value[1])


def decode_views(items: Any) -> tuple[PartitionView, ...]:
    if not isinstance(items, list):
        raise RequestFormatError("partition_states must be a list")
    out = []
    append = out.append
    for i, s in enumerate(items):
        if type(s) is not list or len(s) != 11:
            raise RequestFormatError(f"partition_states[{i}] must have 11 fields")
        topic, partition, ce, leader, le, isr, zkv, replicas, adding, removing, is_new = s
        if type(topic) is not str or type(partition) is not int or type(ce) is not int or type(leader) is not int \
                or type(le) is not int or type(zkv) is not int:
            raise RequestFormatError(f"partition_states[{i}] has a field of the wrong type")
        append(PartitionView(TopicPartition(topic, partition), leader, le, _ints(isr, "isr"), ce, zkv,
                             _ints(replicas, "replicas"), _ints(adding, "adding") if adding else (),
                             _ints(removing, "removing") if removing else (), is_new is True))
    return tuple(out)


def decode_brokers(items: Any) -> tuple[BrokerInfo, ...]:
    if not isinstance(items, list):
        raise RequestFormatError("broker list must be a list")
    out = []
    for b in items:
        if not isinstance(b, list) or len(b) != 4 or type(b[0]) is not int or not isinstance(b[1], str) \
                or type(b[2]) is not int:
            raise RequestFormatError(f"bad broker entry {b!r}")
        out.append(BrokerInfo(b[0], b[1], b[2], -1, b[3]))
    return tuple(out)


def decode_control_header(body: dict) -> tuple[int, int, int]:
    """(controller_id, controller_epoch, broker_epoch) of a controller request."""
    if not isinstance(body, dict):
        raise RequestFormatError("body must be an object")
    return _int(body, "controller_id"), _int(body, "controller_epoch"), _int(body, "broker_epoch")


def decode_partitions(items: Any, what: str = "partitions") -> tuple[TopicPartition, ...]:
    if not isinstance(items, list):
        raise RequestFormatError(f"{what} must be a list")
    return tuple(_tp(x, f"{what}[{i}]") for i, x in enumerate(items))


def partition_errors(body: dict) -> tuple[tuple[TopicPartition, str], ...]:
    """The per-partition errors of a LeaderAndIsr / StopReplica answer."""
    items = body.get("partition_errors") or []
    out = []
    for e in items:
        if isinstance(e, list) and len(e) == 3 and e[2]:
            out.append((TopicPartition(e[0], e[1]), str(e[2])))
    return tuple(out)


def tp_list(tps) -> list:
    return [[tp.topic, tp.partition] for tp in tps]
