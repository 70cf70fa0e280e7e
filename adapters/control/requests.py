"""Bodies of the control-channel requests, both ways (pure: no sockets).

The controller turns `Send*` commands into request bodies; brokers turn bodies back into values.
Partition states travel in a compact, columnar form, because an UpdateMetadata may carry 100,000
of them and both ends spend their time creating and parsing JSON objects per partition:

    "partition_states": {
      "sets":   [[1, 2, 3], [2, 3], [], ...],        # each distinct broker list, once
      "topics": [[topic, [partition, ...], [controller_epoch, ...], [leader, ...],
                  [leader_epoch, ...], [isr set index, ...], [zk_version, ...],
                  [replicas set index, ...], [adding set index, ...],
                  [removing set index, ...], [is_new 0/1, ...]], ...]
    }

Column k of a topic holds field k of each of its partitions, in the same order; broker lists
are indexes into `sets`. A partition therefore costs a handful of small integers on the wire
(which the JSON parser does not even allocate) instead of a list, a topic string and four
lists. A 10,000-partition request parses about five times faster than as a list of rows.

| api | body | answer |
|---|---|---|
| LeaderAndIsr | controller_id, controller_epoch, broker_epoch, partition_states, live_leaders | {"partition_errors": [[t, p, error]]} |
| UpdateMetadata | controller_id, controller_epoch, broker_epoch, partition_states, live_brokers, shutting_down_brokers | {} |
| StopReplica | controller_id, controller_epoch, broker_epoch, delete_partitions, partitions | {"partition_errors": [...]} |
| ControlledShutdown | broker_id, broker_epoch | {"error", "partitions_remaining": [[t, p]]} |
| ElectLeaders | election_type, partitions (or null: all) | {"error", "results": [[t, p, error]]} |
| Metadata | topics (or null/absent: all) | the broker's metadata cache: {"broker_id", "controller_epoch", "brokers", "partitions": {"t-0": {leader, leader_epoch, isr, replicas}}} |

Metadata is read-only, like Kafka's MetadataRequest: tools (the chaos soak's checks) ask each
broker what its cache holds and compare it with ZooKeeper.

Malformed bodies raise `RequestFormatError` with the field that was wrong.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from controller_core import commands as C
from controller_core.partition_views import PartitionViews, distinct_rows
from controller_core.values import BrokerInfo, PartitionView, TopicPartition
from adapters.control.framing import EncodedBody

LEADER_AND_ISR = "LeaderAndIsr"
UPDATE_METADATA = "UpdateMetadata"
STOP_REPLICA = "StopReplica"
CONTROLLED_SHUTDOWN = "ControlledShutdown"
ELECT_LEADERS = "ElectLeaders"
METADATA = "Metadata"
APIS = (LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA, CONTROLLED_SHUTDOWN, ELECT_LEADERS, METADATA)


class RequestFormatError(ValueError):
    pass


def _broker(b: BrokerInfo) -> list:
    return [b.broker_id, b.host, b.port, b.rack]


_COLUMNS = 10  # partition, controller_epoch, leader, leader_epoch, isr, zk_version, replicas, adding, removing, is_new


class _Sets:
    """A body's broker lists (ISRs, replica sets, adding, removing), each listed once:
    `index(members)` is its position in `lists`, the body's "sets"."""

    __slots__ = ("positions", "lists")

    def __init__(self):
        self.positions: dict[tuple, int] = {}
        self.lists: list[list[int]] = []

    def index(self, members: tuple) -> int:
        i = self.positions.get(members)
        if i is None:
            i = self.positions[members] = len(self.lists)
            self.lists.append(list(members))
        return i


def views_body(views) -> dict:
    """The compact `partition_states` of `views` (see the module docstring)."""
    if isinstance(views, PartitionViews):
        return _columns_body(views)
    body_sets = _Sets()
    sets, index = body_sets.positions, body_sets.index
    topics: dict[str, list[list]] = {}

    for v in views:
        tp = v.tp
        cols = topics.get(tp.topic)
        if cols is None:
            cols = topics[tp.topic] = [[] for _ in range(_COLUMNS)]
        cols[0].append(tp.partition)
        cols[1].append(v.controller_epoch)
        cols[2].append(v.leader)
        cols[3].append(v.leader_epoch)
        isr = sets.get(v.isr)
        cols[4].append(isr if isr is not None else index(v.isr))
        cols[5].append(v.zk_version)
        rs = sets.get(v.replicas)
        cols[6].append(rs if rs is not None else index(v.replicas))
        cols[7].append(index(v.adding) if v.adding else index(()))
        cols[8].append(index(v.removing) if v.removing else index(()))
        cols[9].append(1 if v.is_new else 0)
    return {"sets": body_sets.lists, "topics": [[t, *cols] for t, cols in topics.items()]}


def _columns_body(pv: PartitionViews) -> dict:
    """`views_body` of partitions the controller gathered as columns (controller_core/
    partition_views.py): the same body (topics in order of first appearance, each topic's
    partitions in request order), made with array operations rather than per partition."""
    n = len(pv)
    if not n:
        return {"sets": [], "topics": []}
    body_sets = _Sets()
    index_of = body_sets.index

    def indexes(matrix: np.ndarray) -> np.ndarray:
        distinct, inverse = distinct_rows(matrix)
        index = np.array([index_of(tuple(x for x in row if x != -1)) for row in distinct.tolist()], np.int64)
        return index[inverse]

    def moving(mask) -> np.ndarray:
        if mask is None or not mask.any():
            return np.full(n, index_of(()), np.int64)
        return indexes(np.where(mask, pv.replicas, -1))

    isr, replicas = indexes(pv.isr), indexes(pv.replicas)
    adding, removing = moving(pv.adding), moving(pv.removing)
    new = pv.is_new.astype(np.int64) if pv.is_new is not None else np.zeros(n, np.int64)
    topics, partitions = zip(*pv.tps)  # (a TopicPartition is a tuple: split in C, not per partition)
    names = list(dict.fromkeys(topics))  # in order of first appearance
    codes = {t: i for i, t in enumerate(names)}
    topic_of = np.fromiter(map(codes.__getitem__, topics), np.int64, n)
    order = np.argsort(topic_of, kind="stable")
    bounds = [0, *(np.flatnonzero(np.diff(topic_of[order])) + 1).tolist(), n]
    columns = [c[order].tolist() for c in (np.array(partitions, np.int64), pv.controller_epoch, pv.leader,
                                            pv.leader_epoch, isr, pv.zk_version, replicas, adding, removing, new)]
    return {"sets": body_sets.lists,
            "topics": [[names[k], *(c[lo:hi] for c in columns)]
                       for k, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]}


# -- pre-encoded bodies (the controller's hot path) ---------------------------------------------
#
# A failover sends the same 10,000 partition states to every broker in UpdateMetadata: they are
# serialised once per decision (orjson) and spliced into each broker's body.


def states_json(views) -> bytes:
    """The JSON bytes of `views_body(views)`."""
    return orjson.dumps(views_body(views))


def spliced_body(header: dict, states: bytes):
    """An `EncodedBody` for `header` plus a pre-encoded "partition_states" member. Not
    compressed: the control channel runs between the brokers of one cluster, where zlib costs
    more CPU than the bytes it saves."""

    data = orjson.dumps(header)[:-1] + b',"partition_states":' + states + b"}"
    return EncodedBody(data, False, len(data))


def leader_and_isr_encoded(c: C.SendLeaderAndIsr, controller_id: int):
    header = {"controller_id": controller_id, "controller_epoch": c.controller_epoch,
              "broker_epoch": c.broker_epoch, "live_leaders": [_broker(b) for b in c.live_leaders]}
    return spliced_body(header, states_json(c.partitions))


def update_metadata_encoded(c: C.SendUpdateMetadata, controller_id: int, states: bytes, offline_replicas=None):
    """`offline_replicas`: [[topic, partition, [broker, ...]], ...], the replicas of these
    partitions on failed log dirs of live brokers (Kafka's UpdateMetadata offline_replicas;
    replicas on dead brokers are implied by `live_brokers`)."""
    header = {"controller_id": controller_id, "controller_epoch": c.controller_epoch,
              "broker_epoch": c.broker_epoch, "live_brokers": [_broker(b) for b in c.live_brokers],
              "shutting_down_brokers": list(c.shutting_down)}
    if offline_replicas:
        header["offline_replicas"] = offline_replicas
    return spliced_body(header, states)


def leader_and_isr_body(c: C.SendLeaderAndIsr, controller_id: int) -> dict:
    return {"controller_id": controller_id, "controller_epoch": c.controller_epoch, "broker_epoch": c.broker_epoch,
            "partition_states": views_body(c.partitions), "live_leaders": [_broker(b) for b in c.live_leaders]}


def update_metadata_body(c: C.SendUpdateMetadata, controller_id: int, states: dict | None = None) -> dict:
    """`states` lets the caller pass the already-built partition states shared by every broker."""
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


_INT_ONLY = {int}


def _int_column(values: Any, n: int, what: str) -> list:
    if type(values) is not list or len(values) != n:
        raise RequestFormatError(f"{what} must be a list of {n} integers")
    if values and not set(map(type, values)) <= _INT_ONLY:  # one pass in C (bools are not ints here)
        bad = next(x for x in values if type(x) is not int)
        raise RequestFormatError(f"{what} must hold integers, got {bad!r}")
    return values


def decode_views(states: Any) -> tuple[PartitionView, ...]:
    """The partition states of a request body (the compact form of the module docstring)."""
    if type(states) is not dict or type(states.get("sets")) is not list or type(states.get("topics")) is not list:
        raise RequestFormatError("partition_states must be an object with the lists 'sets' and 'topics'")
    sets = tuple(_ints(s, f"partition_states.sets[{i}]") for i, s in enumerate(states["sets"]))
    n_sets = len(sets)
    out = []
    append = out.append
    make = tuple.__new__  # PartitionView is a NamedTuple: build it without its Python __new__
    view_cls = PartitionView
    tp_cls = TopicPartition
    for k, entry in enumerate(states["topics"]):
        where = f"partition_states.topics[{k}]"
        if type(entry) is not list or len(entry) != _COLUMNS + 1 or type(entry[0]) is not str \
                or type(entry[1]) is not list:
            raise RequestFormatError(f"{where} must be [topic, {_COLUMNS} columns]")
        topic = entry[0]
        n = len(entry[1])
        cols = [_int_column(c, n, f"{where} column {j}") for j, c in enumerate(entry[1:], 1)]
        for j in (5, 7, 8, 9):
            col = cols[j - 1]
            if col and (min(col) < 0 or max(col) >= n_sets):
                raise RequestFormatError(f"{where} column {j}: a broker list index is out of range")
        for p, ce, leader, le, isr, zkv, rs, adding, removing, new in zip(*cols):
            append(make(view_cls, (make(tp_cls, (topic, p)), leader, le, sets[isr], ce, zkv, sets[rs],
                                   sets[adding], sets[removing], new == 1)))
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


def decode_metadata_topics(body: Any) -> frozenset[str] | None:
    """The topics a Metadata request asks about (None: every topic)."""
    if not isinstance(body, dict):
        raise RequestFormatError("body must be an object")
    topics = body.get("topics")
    if topics is None:
        return None
    if type(topics) is not list or any(type(t) is not str for t in topics):
        raise RequestFormatError(f"topics must be a list of topic names or null, got {topics!r}")
    return frozenset(topics)


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
