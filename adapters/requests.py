"""Bodies of the control-channel requests, both ways (pure: no sockets).

The controller turns `Send*` commands into request bodies; brokers turn bodies back into values.
Partition states travel as positional lists, Kafka's field order, because an UpdateMetadata may
carry 100,000 of them:

    [topic, partition, controller_epoch, leader, leader_epoch, [isr], zk_version,
     [replicas], [adding], [removing], is_new]

| api | body | answer |
|---|---|---|
| LeaderAndIsr | controller_id, controller_epoch, broker_epoch, partition_states, live_leaders | {"partition_errors": [[t, p, error]]} |
| UpdateMetadata | controller_id, controller_epoch, broker_epoch, partition_states, live_brokers | {} |
| StopReplica | controller_id, controller_epoch, broker_epoch, delete_partitions, partitions | {"partition_errors": [...]} |
| ControlledShutdown | broker_id, broker_epoch | {"error", "partitions_remaining": [[t, p]]} |
| ElectLeaders | election_type, partitions (or null: all) | {"error", "results": [[t, p, error]]} |

Malformed bodies raise `RequestFormatError` with the field that was wrong.
"""
from __future__ import annotations

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


def leader_and_isr_body(c: C.SendLeaderAndIsr, controller_id: int) -> dict:
    return {"controller_id": controller_id, "controller_epoch": c.controller_epoch, "broker_epoch": c.broker_epoch,
            "partition_states": views_body(c.partitions), "live_leaders": [_broker(b) for b in c.live_leaders]}


def update_metadata_body(c: C.SendUpdateMetadata, controller_id: int, states: list | None = None) -> dict:
    """`states` lets the caller pass the already-encoded partition list shared by every broker."""
    return {"controller_id": controller_id, "controller_epoch": c.controller_epoch, "broker_epoch": c.broker_epoch,
            "partition_states": states if states is not None else views_body(c.partitions),
            "live_brokers": [_broker(b) for b in c.live_brokers]}


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
    if not isinstance(value, list) or any(type(x) is not int for x in value):
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
    for i, s in enumerate(items):
        if not isinstance(s, list) or len(s) != 11:
            raise RequestFormatError(f"partition_states[{i}] must have 11 fields")
        tp = _tp(s[:2], f"partition_states[{i}]")
        for j in (2, 3, 4, 6):
            if type(s[j]) is not int:
                raise RequestFormatError(f"partition_states[{i}][{j}] must be an integer")
        out.append(PartitionView(tp, s[3], s[4], _ints(s[5], "isr"), s[2], s[6], _ints(s[7], "replicas"),
                                 _ints(s[8], "adding"), _ints(s[9], "removing"), bool(s[10])))
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
