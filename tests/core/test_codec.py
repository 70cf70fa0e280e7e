"""The codec: every event, command and state survives JSON unchanged; the JSON is canonical; bad
input is a CodecError that says what and where.

Values are drawn by strategies derived here from the classes' own type hints (independently of
the codec's compiler), so a field added to any event or command is covered without editing this
file; persistent-map fields (ControllerState's, Outbox.intents), whose hints say only `PMap`, get
their key and value types from `MAP_TYPES` below.
"""
from __future__ import annotations

import enum
import hashlib
import inspect
import json
import os
import subprocess
import sys
import types
import typing

import attrs
import immutables
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller_core import codec
from controller_core import commands as C
from controller_core import request_batch
from controller_core import events as E
from controller_core.codec import (
    CodecError,
    canonical_json,
    decode_command,
    decode_commands,
    decode_event,
    decode_state,
    digest,
    encode_command,
    encode_commands,
    encode_event,
    encode_state,
)
from controller_core.machines import PartitionState, ReplicaState
from controller_core.columns import PartitionImage
from controller_core.pmap import FrozenDict
from controller_core.state import ControllerConfig, ControllerState, PartitionInfo, TopicInfo
from controller_core.values import BrokerInfo, LeaderIsr, PartitionView, ReplicaAssignment, TopicPartition

# --- strategies derived from type hints ----------------------------------------------------------

MAP_TYPES = {
    (ControllerState, "brokers"): (int, BrokerInfo),
    (ControllerState, "topics"): (str, TopicInfo),
    (ControllerState, "topic_configs"): (str, tuple[tuple[str, str], ...]),
    (ControllerState, "partitions"): (TopicPartition, PartitionInfo),
    (ControllerState, "pending"): (int, request_batch.Outbox),
    (request_batch.Outbox, "intents"): (TopicPartition, tuple[tuple[str | int, ...], ...]),
}

_CACHE: dict = {}
SMALL = 4


def strategy(hint) -> st.SearchStrategy:
    try:
        return _CACHE[hint]
    except (KeyError, TypeError):
        pass
    made = _strategy(hint)
    try:
        _CACHE[hint] = made
    except TypeError:
        pass
    return made


def _strategy(hint) -> st.SearchStrategy:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.one_of(st.integers(-3, 5), st.integers())
    if hint is str:
        return st.one_of(st.sampled_from(["t", "topic", ""]), st.text(max_size=6))
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint is type(None):
        return st.none()
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(strategy(a) for a in args))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(strategy(args[0]), max_size=SMALL).map(tuple)
        return st.tuples(*(strategy(a) for a in args))
    if origin is frozenset:
        return st.frozensets(strategy(args[0]), max_size=SMALL)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_fields"):
        hints = typing.get_type_hints(hint)
        return st.builds(hint, *(strategy(hints[f]) for f in hint._fields))
    if isinstance(hint, type) and attrs.has(hint):
        hints = typing.get_type_hints(hint)
        kwargs = {}
        for f in attrs.fields(hint):
            field_hint = hints[f.name]
            if field_hint in (immutables.Map, FrozenDict):
                key, value = MAP_TYPES[hint, f.name]
                kwargs[f.alias] = st.dictionaries(strategy(key), strategy(value), max_size=SMALL).map(field_hint)
            else:
                kwargs[f.alias] = strategy(field_hint)
        return st.builds(hint, **kwargs)
    raise TypeError(f"no strategy for {hint!r}")


def json_round_trip(d):
    return json.loads(json.dumps(d))


def assert_json_compatible(value, where="$"):
    """Only dict/list/str/int/float/bool/None, with str keys (tuples would pass json.dumps)."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert type(k) is str, f"{where}: key {k!r}"
            assert_json_compatible(v, f"{where}.{k}")
    elif type(value) is list:
        for n, v in enumerate(value):
            assert_json_compatible(v, f"{where}[{n}]")
    else:
        assert value is None or type(value) in (str, int, float, bool), f"{where}: {type(value).__name__}"


RELAXED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- coverage of the type lists ------------------------------------------------------------------


def _attrs_classes_of(module) -> set[type]:
    return {
        obj for obj in vars(module).values()
        if inspect.isclass(obj) and attrs.has(obj) and obj.__module__ == module.__name__
    }


def _reachable_classes(roots) -> set[type]:
    """Every attrs class that a value of one of `roots` may contain (through its type hints)."""
    seen: set[type] = set()

    def walk(hint, owner=None, name=None):
        if hint in (immutables.Map, FrozenDict):
            for part in MAP_TYPES[owner, name]:
                walk(part)
            return
        for arg in typing.get_args(hint):
            if arg is not Ellipsis:
                walk(arg)
        if isinstance(hint, type) and attrs.has(hint) and hint not in seen:
            seen.add(hint)
            hints = typing.get_type_hints(hint)
            for f in attrs.fields(hint):
                walk(hints[f.name], hint, f.name)

    for root in roots:
        walk(root)
    return seen


def test_every_event_and_command_class_is_round_tripped_below():
    # every class of events.py / commands.py is a top-level type, or a value nested in one, so
    # the parametrised round trips below (one per top-level type) reach all of them
    top = set(E.EVENT_TYPES) | set(C.COMMAND_TYPES)
    assert set(TOP_LEVEL) == top
    reachable = _reachable_classes(top)
    assert _attrs_classes_of(E) | _attrs_classes_of(C) <= reachable
    assert {E.ClusterSnapshot, C.PartitionWrite, C.StateChange} <= reachable
    assert set(codec.VERSIONS) == {cls.__name__ for cls in TOP_LEVEL} | {"ControllerState"}


TOP_LEVEL = [*E.EVENT_TYPES, *C.COMMAND_TYPES]

# --- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", E.EVENT_TYPES, ids=lambda c: c.__name__)
@RELAXED
@given(data=st.data())
def test_event_round_trip(cls, data):
    event = data.draw(strategy(cls))
    encoded = encode_event(event)
    assert encoded["type"] == cls.__name__ and encoded["v"] == codec.VERSIONS[cls.__name__]
    assert_json_compatible(encoded)
    decoded = decode_event(json_round_trip(encoded))
    assert decoded == event and type(decoded) is cls
    assert encode_event(decoded) == encoded


@pytest.mark.parametrize("cls", C.COMMAND_TYPES, ids=lambda c: c.__name__)
@RELAXED
@given(data=st.data())
def test_command_round_trip(cls, data):
    command = data.draw(strategy(cls))
    encoded = encode_command(command)
    assert encoded["type"] == cls.__name__ and encoded["v"] == codec.VERSIONS[cls.__name__]
    assert_json_compatible(encoded)
    decoded = decode_command(json_round_trip(encoded))
    assert decoded == command and type(decoded) is cls


@RELAXED
@given(strategy(ControllerState))
def test_state_round_trip(state):
    encoded = encode_state(state)
    assert_json_compatible(encoded)
    decoded = decode_state(json_round_trip(encoded))
    assert decoded == state
    for cls, name in MAP_TYPES:
        if cls is ControllerState:
            assert type(getattr(decoded, name)) is (PartitionImage if name == "partitions" else immutables.Map)
    for outbox in decoded.pending.values():
        assert type(outbox.intents) is FrozenDict
    assert type(decoded.shutting_down) is frozenset


def test_decoded_values_have_the_exact_python_types():
    snapshot = E.ClusterSnapshot(
        brokers=(BrokerInfo(1, "h", 9092, 7, "r1"),),
        topics=(("t", ((0, ReplicaAssignment((1, 2), (2,), ())),)),),
        topics_to_delete=frozenset({"x"}),
        partition_states=((TopicPartition("t", 0), LeaderIsr(1, 0, (1,), 1, 0)),),
        reassignment=E.ReassignmentRequested(at=1, exists=True, partitions=((TopicPartition("t", 0), (2, 1)),)),
    )
    event = decode_event(json_round_trip(encode_event(E.ControllerElected(at=5, epoch=2, epoch_zk_version=1, snapshot=snapshot))))
    snap = event.snapshot
    assert type(snap.topics) is tuple and type(snap.topics[0][1][0]) is tuple
    assert type(snap.topics_to_delete) is frozenset
    tp, li = snap.partition_states[0]
    assert type(tp) is TopicPartition and type(li.isr) is tuple
    assert type(snap.reassignment) is E.ReassignmentRequested
    assert snap.reassignment.partitions[0][1] == (2, 1)


@RELAXED
@given(st.lists(st.one_of(*(strategy(cls) for cls in C.COMMAND_TYPES)), max_size=6))
def test_command_lists_round_trip(commands):
    encoded = encode_commands(commands)
    assert decode_commands(json_round_trip(encoded)) == tuple(commands)


# --- layout of the hot value types ---------------------------------------------------------------


def test_hot_types_are_positional_lists():
    tp = TopicPartition("t", 3)
    li = LeaderIsr(2, 5, (2, 1), 4, 9)
    ra = ReplicaAssignment((1, 2, 3))
    moving = ReplicaAssignment((4, 1, 2), (4,), (2,))
    info = PartitionInfo(ra, li, PartitionState.ONLINE, ((1, ReplicaState.ONLINE),))
    view = PartitionView(tp, 2, 5, (2, 1), 4, 9, (1, 2, 3))
    view_new = PartitionView(tp, 2, 5, (2, 1), 4, 9, (1, 2, 3), is_new=True)

    write = encode_command(C.WritePartitionStates(write_id=1, writes=(C.PartitionWrite(tp, li, 8),)))
    assert write["writes"] == [[["t", 3], [2, 5, [2, 1], 4, 9], 8]]

    assignment = encode_command(C.WriteTopicAssignment(topic="t", partitions=((0, ra), (1, moving))))
    assert assignment["partitions"] == [[0, [[1, 2, 3]]], [1, [[4, 1, 2], [4], [2]]]]

    um = encode_command(C.SendUpdateMetadata(broker_id=1, broker_epoch=1, controller_epoch=1,
                                             partitions=(view, view_new), live_brokers=()))
    assert um["partitions"] == [
        [["t", 3], 2, 5, [2, 1], 4, 9, [1, 2, 3]],
        [["t", 3], 2, 5, [2, 1], 4, 9, [1, 2, 3], [], [], True],
    ]



def test_state_partitions_are_columns_and_the_map_layout_still_decodes():
    tp = TopicPartition("t", 3)
    li = LeaderIsr(2, 5, (2, 1), 4, 9)
    ra = ReplicaAssignment((1, 2, 3))
    info = PartitionInfo(ra, li, PartitionState.ONLINE, ((1, ReplicaState.ONLINE),))
    no_leader = PartitionInfo(ReplicaAssignment((4, 1, 2), (4,), (2,)), None, PartitionState.NEW)
    u0 = TopicPartition("u", 0)
    state = ControllerState(config=ControllerConfig(broker_id=1), partitions=immutables.Map({tp: info, u0: no_leader}))
    columns = encode_state(state)["partitions"]
    codes = {name: k for k, name in enumerate(columns["replica_states"])}
    pcodes = {name: k for k, name in enumerate(columns["partition_states"])}
    non_existent = codes["NonExistentReplica"]
    assert {k: v for k, v in columns.items() if k not in ("partition_states", "replica_states")} == {
        "tps": [["t", 3], ["u", 0]], "has_state": [1, 0], "leader": [2, 0], "leader_epoch": [5, 0],
        "controller_epoch": [4, 0], "zk_version": [9, 0], "isr": [[2, 1], []], "replicas": [[1, 2, 3], [4, 1, 2]],
        "adding": [[], [4]], "removing": [[], [2]],
        "pstate": [pcodes["OnlinePartition"], pcodes["NewPartition"]],
        "rstate": [[codes["OnlineReplica"], non_existent, non_existent], [non_existent] * 3]}
    assert decode_state(json_round_trip(encode_state(state))) == state
    # a v4 head (the per-partition map layout) decodes to the same state
    v4 = {**encode_state(state), "v": 4, "partitions": [
        [["t", 3], [[[1, 2, 3]], [2, 5, [2, 1], 4, 9], "OnlinePartition", [[1, "OnlineReplica"]]]],
        [["u", 0], [[[4, 1, 2], [4], [2]], None, "NewPartition", []]]]}
    assert decode_state(v4) == state
    with pytest.raises(CodecError, match="partition columns"):
        decode_state({**encode_state(state), "partitions": {**columns, "leader": [2]}})


def test_other_values_are_objects_by_field_name():
    assert encode_event(E.BrokersChanged(at=7, brokers=(BrokerInfo(1, "h", 9092, 3),))) == {
        "type": "BrokersChanged", "v": 1, "at": 7,
        "brokers": [{"broker_id": 1, "host": "h", "port": 9092, "epoch": 3, "rack": None}],
    }


def test_decoded_replica_state_pairs_are_shared():
    info = PartitionInfo(ReplicaAssignment((1, 2)), None, PartitionState.NEW,
                         ((1, ReplicaState.NEW), (2, ReplicaState.NEW)))
    parts = immutables.Map({TopicPartition("t", 0): info, TopicPartition("t", 1): info})
    state = ControllerState(config=ControllerConfig(broker_id=1), partitions=parts)
    decoded = decode_state(json_round_trip(encode_state(state)))
    a, b = (decoded.partitions[TopicPartition("t", p)].replica_states for p in (0, 1))
    assert a == info.replica_states and a[0] is b[0] and a[1] is b[1]


def test_decoded_topic_names_are_shared():
    states = tuple((TopicPartition("some-topic", p), None) for p in range(3))
    event = E.PartitionStatesObserved(at=1, states=states)
    decoded = decode_event(json_round_trip(encode_event(event)))
    first, second = (tp.topic for tp, _ in decoded.states[:2])
    assert first is second


# --- canonical JSON, determinism, digest ---------------------------------------------------------


def test_canonical_json_is_sorted_and_compact():
    assert canonical_json({"b": [1, {"d": None, "c": "é"}], "a": True}) == '{"a":true,"b":[1,{"c":"\\u00e9","d":null}]}'


@RELAXED
@given(strategy(ControllerState))
def test_canonical_json_does_not_depend_on_insertion_order(state):
    text = canonical_json(encode_state(state))
    assert canonical_json(encode_state(decode_state(json.loads(text)))) == text
    reordered = attrs.evolve(
        state,
        partitions=immutables.Map(reversed(list(state.partitions.items()))),
        topics=immutables.Map(reversed(list(state.topics.items()))),
        shutting_down=frozenset(reversed(list(state.shutting_down))),
        topics_to_delete=frozenset(sorted(state.topics_to_delete, reverse=True)),
    )
    assert canonical_json(encode_state(reordered)) == text
    assert json.dumps(encode_state(reordered)) == json.dumps(encode_state(state))  # sorted even unsorted-keys


_EXAMPLE = """
import immutables
from controller_core import codec
from controller_core.machines import PartitionState, ReplicaState
from controller_core.state import ControllerConfig, ControllerState, PartitionInfo, TopicInfo
from controller_core.values import LeaderIsr, ReplicaAssignment, TopicPartition
topics = ["alpha", "beta", "gamma", "delta", "epsilon"]
parts = {TopicPartition(t, p): PartitionInfo(ReplicaAssignment((1, 2)), LeaderIsr(1, 0, (1, 2), 1, 0),
         PartitionState.ONLINE, ((1, ReplicaState.ONLINE), (2, ReplicaState.ONLINE)))
         for t in topics for p in range(3)}
s = ControllerState(config=ControllerConfig(broker_id=1), partitions=immutables.Map(parts),
    topics=immutables.Map({t: TopicInfo(3) for t in topics}), topics_to_delete=frozenset(topics),
    topic_configs=immutables.Map({t: (("k", t),) for t in topics}))
print(codec.canonical_json(codec.encode_state(s)))
"""


def test_encoding_is_the_same_under_any_hash_seed():
    outputs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        result = subprocess.run([sys.executable, "-c", _EXAMPLE], env=env, capture_output=True, text=True,
                                check=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        outputs.add(result.stdout)
    assert len(outputs) == 1


def _views(n: int) -> tuple[PartitionView, ...]:
    return tuple(PartitionView(TopicPartition("t", p), 1, 0, (1, 2), 1, 0, (1, 2)) for p in range(n))


def test_shared_partitions_are_encoded_once_and_shared():
    views = _views(20)
    brokers = (BrokerInfo(1, "a", 1, 1), BrokerInfo(2, "b", 1, 1))
    cmds = [C.SendUpdateMetadata(broker_id=b, broker_epoch=1, controller_epoch=1, partitions=views,
                                 live_brokers=brokers) for b in (1, 2)]
    first, second = encode_commands(cmds)
    assert first["partitions"] is second["partitions"]
    assert first["live_brokers"] is second["live_brokers"]
    assert first["partitions"] == encode_command(cmds[0])["partitions"]
    # an equal tuple that is a different object is simply encoded again
    other = C.SendUpdateMetadata(broker_id=3, broker_epoch=1, controller_epoch=1, partitions=tuple(views),
                                 live_brokers=brokers)
    assert encode_commands([cmds[0], other])[1]["partitions"] == first["partitions"]


def _reference_digest(commands) -> str:
    text = canonical_json([encode_command(c) for c in commands])
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def test_digest_is_blake2b_128_of_the_canonical_command_list():
    views = _views(40)
    brokers = (BrokerInfo(1, "a", 1, 1), BrokerInfo(2, "b", 1, 1))
    cmds = [
        C.LogStateChanges(cause="x", entries=(C.StateChange("A", "B", (TopicPartition("t", 0),)),)),
        *(C.SendUpdateMetadata(broker_id=b, broker_epoch=1, controller_epoch=1, partitions=views,
                               live_brokers=brokers) for b in (1, 2, 3)),
        C.SendLeaderAndIsr(broker_id=1, broker_epoch=1, controller_epoch=1, partitions=views[:3], live_leaders=brokers),
        C.ScheduleTimer(name="rebalance", delay_ms=300000),
    ]
    result = digest(cmds)
    assert len(result) == 32 and result == _reference_digest(cmds)
    assert digest(cmds[:-1]) != result
    assert digest([]) == _reference_digest([])


@RELAXED
@given(st.lists(st.one_of(*(strategy(cls) for cls in C.COMMAND_TYPES)), max_size=5))
def test_digest_matches_the_reference_for_any_commands(commands):
    assert codec.reference_digest(commands) == _reference_digest(commands)
    assert digest(commands) == _reference_digest(commands)
    assert digest(commands) == _reference_digest(commands)  # again, its caches warm


_BROKER_POOL = st.lists(strategy(BrokerInfo), min_size=0, max_size=4).map(tuple)
_VIEW_POOL = st.lists(strategy(PartitionView), min_size=0, max_size=3).map(tuple)


@st.composite
def _request_decisions(draw):
    """Decisions made only of broker requests (the digest's direct path), their tuples shared
    between commands as `emit_outbox` shares them, or not; ints sometimes bools."""
    brokers = draw(st.lists(_BROKER_POOL, min_size=1, max_size=2))
    views = draw(st.lists(_VIEW_POOL, min_size=1, max_size=2))
    number = st.one_of(st.integers(-2**40, 2**40), st.booleans()) if draw(st.booleans()) else st.integers(0, 9)
    out = []
    for _ in range(draw(st.integers(1, 5))):
        ids = dict(broker_id=draw(number), broker_epoch=draw(number), controller_epoch=draw(number))
        if draw(st.booleans()):
            out.append(C.SendUpdateMetadata(**ids, partitions=draw(st.sampled_from(views)),
                                            live_brokers=draw(st.sampled_from(brokers)),
                                            shutting_down=tuple(draw(st.lists(st.integers(0, 9), max_size=2)))))
        else:
            out.append(C.SendLeaderAndIsr(**ids, partitions=draw(st.sampled_from(views)),
                                          live_leaders=draw(st.sampled_from(brokers))))
    return out


@RELAXED
@given(st.lists(_request_decisions(), min_size=1, max_size=4))
def test_digest_of_broker_requests_matches_the_reference(decisions):
    for commands in decisions:  # one after the other: the broker lists' texts are kept across calls
        assert digest(commands) == _reference_digest(commands)


def test_digest_keeps_broker_texts_by_object_not_by_equality():
    views = _views(2)
    one = (BrokerInfo(1, "a", 1, 1),)
    as_bool = (BrokerInfo(1, "a", True, 1),)  # == one (True == 1), but encodes "port": true
    assert one == as_bool
    for brokers in (one, as_bool, one, (BrokerInfo(1, "a", 2, 1),)):
        cmds = [C.SendUpdateMetadata(broker_id=b, broker_epoch=1, controller_epoch=1, partitions=views,
                                     live_brokers=brokers) for b in (1, 2)]
        assert digest(cmds) == _reference_digest(cmds)
    assert digest([C.SendUpdateMetadata(broker_id=1, broker_epoch=1, controller_epoch=1, partitions=(),
                                        live_brokers=())]) == _reference_digest(
        [C.SendUpdateMetadata(broker_id=1, broker_epoch=1, controller_epoch=1, partitions=(), live_brokers=())])


def test_a_digester_with_another_json_writer_gives_the_same_digest():
    calls = []

    def writer(obj):
        calls.append(obj)
        return json.dumps(obj, sort_keys=True, separators=(",", ":"))

    views = _views(20)
    brokers = (BrokerInfo(1, "a", 1, 1), BrokerInfo(2, "b", 1, 1))
    cmds = [C.LogStateChanges(cause="x", entries=()),
            *(C.SendUpdateMetadata(broker_id=b, broker_epoch=1, controller_epoch=1, partitions=views,
                                   live_brokers=brokers) for b in (1, 2))]
    other = codec.digester(writer)
    assert other.digest(cmds) == _reference_digest(cmds)
    assert other.digest(cmds[1:]) == _reference_digest(cmds[1:])
    assert calls, "the given writer is used"


# --- errors --------------------------------------------------------------------------------------


def _timer(**changes):
    d = {"type": "TimerFired", "v": 1, "at": 5, "name": "rebalance"}
    d.update(changes)
    return d


def test_unknown_type_is_a_codec_error_naming_type_and_version():
    with pytest.raises(CodecError, match=r"unknown event type 'TimerWentOff' \(v 1\)"):
        decode_event(_timer(type="TimerWentOff"))
    with pytest.raises(CodecError, match="unknown event type 'ScheduleTimer'"):
        decode_event(encode_command(C.ScheduleTimer(name="x", delay_ms=1)))
    with pytest.raises(CodecError, match="unknown command type 'TimerFired'"):
        decode_command(_timer())


def test_future_version_is_a_codec_error_naming_type_and_version():
    with pytest.raises(CodecError, match=r"'TimerFired' v 2 is newer than this codec reads \(up to v 1\)"):
        decode_event(_timer(v=2))
    with pytest.raises(CodecError, match="invalid version"):
        decode_event(_timer(v=0))


def test_old_versions_go_through_the_registered_upgrades(monkeypatch):
    monkeypatch.setitem(codec.VERSIONS, "TimerFired", 2)
    with pytest.raises(CodecError, match="'TimerFired' v 1: no upgrade to v 2"):
        decode_event({"type": "TimerFired", "v": 1, "at": 5, "timer": "rebalance"})

    def v1_to_v2(d):  # pretend v1 called the field "timer"
        d = dict(d, v=2, name=d["timer"])
        del d["timer"]
        return d

    monkeypatch.setitem(codec.UPGRADES, ("TimerFired", 1), v1_to_v2)
    assert decode_event({"type": "TimerFired", "v": 1, "at": 5, "timer": "r"}) == E.TimerFired(at=5, name="r")
    assert decode_event(_timer(v=2)) == E.TimerFired(at=5, name="rebalance")


@pytest.mark.parametrize(
    "record, message",
    [
        ([], "event must be a JSON object, got list"),
        ({"v": 1, "at": 5}, "without a string 'type'"),
        (_timer(v="1"), "without an integer version 'v'"),
        (_timer(v=True), "without an integer version 'v'"),
        ({"type": "TimerFired", "v": 1, "at": 5}, "TimerFired: missing field 'name'"),
        (_timer(at="5"), "TimerFired.at: expected an int, got str '5'"),
        (_timer(at=5.0), "TimerFired.at: expected an int, got float 5.0"),
        (_timer(at=True), "TimerFired.at: expected an int, got bool True"),
        (_timer(name=None), "TimerFired.name: expected a str, got null None"),
        (_timer(extra=1), "TimerFired: unknown field.*'extra'"),
        ({"type": "BrokersChanged", "v": 1, "at": 1, "brokers": [{"broker_id": 1, "host": "h", "port": "9092", "epoch": 1, "rack": None}]},
         r"BrokersChanged.brokers\[0\].port: expected an int, got str '9092'"),
        ({"type": "BrokersChanged", "v": 1, "at": 1, "brokers": [{"broker_id": 1, "host": "h", "port": 1, "rack": None}]},
         r"BrokersChanged.brokers\[0\]: missing field 'epoch'"),
        ({"type": "BrokersChanged", "v": 1, "at": 1, "brokers": {}}, "BrokersChanged.brokers: expected a list of BrokerInfo"),
        ({"type": "TopicDeletionsRequested", "v": 1, "at": 1, "topics": ["a", 2]}, r"TopicDeletionsRequested.topics: expected a list of str"),
        ({"type": "PreferredElectionRequested", "v": 1, "at": 1, "exists": True, "partitions": [["t", 0], ["t"]]},
         r"PreferredElectionRequested.partitions\[1\]: expected TopicPartition as a list \[topic, partition\]"),
        ({"type": "PreferredElectionRequested", "v": 1, "at": 1, "exists": 1, "partitions": []},
         "PreferredElectionRequested.exists: expected a bool, got int 1"),
        ({"type": "PartitionStatesObserved", "v": 1, "at": 1, "states": [[["t", 0], [1, 0, [1], 1]]]},
         r"PartitionStatesObserved.states\[0\]\[1\]: expected LeaderIsr as a list"),
        ({"type": "PartitionStatesObserved", "v": 1, "at": 1, "states": [[["t", 0], [1, 0, [1, "2"], 1, 0]]]},
         r"PartitionStatesObserved.states\[0\]\[1\].isr: expected a list of int"),
        ({"type": "PartitionStatesObserved", "v": 1, "at": 1, "states": [[["t", 0], None, 3]]},
         r"PartitionStatesObserved.states\[0\]: expected a list \[TopicPartition, LeaderIsr or null\]"),
    ],
)
def test_malformed_events_are_codec_errors(record, message):
    with pytest.raises(CodecError, match=message):
        decode_event(record)


def _state_record(**changes):
    d = encode_state(ControllerState(config=ControllerConfig(broker_id=1)))
    d.update(changes)
    return d


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"partitions": [[["t", 0], [[[1]], None, "Online", []]]]},
         r"ControllerState.partitions\[0\].state: expected one of .*'OnlinePartition'\] \(PartitionState\), got str 'Online'"),
        ({"partitions": [[["t", 0], [[[1]], None, "NewPartition", []]], [["t", 0], [[[1]], None, "NewPartition", []]]]},
         "duplicate keys"),
        ({"partitions": [[["t", 0]]]}, r"ControllerState.partitions\[0\]: expected a \[key, value\] pair"),
        ({"partitions": [[["t", 0], [[[1], [2]], None, "NewPartition", []]]]},
         r"ControllerState.partitions\[0\].assignment: expected ReplicaAssignment as a list \[replicas \(, adding, removing\)\]"),
        ({"partitions": [[["t", 0], [[[1]], None, "NewPartition", [[[1], "OnlineReplica"]]]]]},
         r"ControllerState.partitions\[0\].replica_states\[0\]\[0\]: expected an int, got list \[1\]"),
        ({"partitions": [[["t", 0], [[[1]], None, "NewPartition", [[1, "OnlineReplica"], [True, "OnlineReplica"]]]]]},
         r"ControllerState.partitions\[0\].replica_states\[1\]\[0\]: expected an int, got bool True"),
        ({"partitions": [[["t", 0], [[[1]], None, "NewPartition", [[1, "OnlineReplica", 3]]]]]},
         r"ControllerState.partitions\[0\].replica_states\[0\]: expected a list \[int, ReplicaState\]"),
        ({"brokers": {"1": {"broker_id": 1, "host": "h", "port": 1, "epoch": 1, "rack": None}}},
         "ControllerState.brokers: expected a list of"),
        ({"topics": {"t": {"partition_count": "3"}}}, r"ControllerState.topics\['t'\].partition_count: expected an int"),
        ({"shutting_down": [1, 1.5]}, "ControllerState.shutting_down: expected a list of int"),
        ({"config": {"broker_id": 1, "delete_topic_enable": "yes"}}, "ControllerState.config.delete_topic_enable: expected a bool"),
        ({"pending": [[1, {"um_partitions": 3}]]}, r"ControllerState.pending\[0\].um_partitions: expected a list of TopicPartition, got int 3"),
        ({"pending": [[1, {"intents": [[["t", 0], [["elect", 1.5]]]]}]]},
         r"ControllerState.pending\[0\].intents\[0\]\[0\]: expected a list of int or str, got list \['elect', 1.5\]"),
    ],
)
def test_malformed_states_are_codec_errors(changes, message):
    with pytest.raises(CodecError, match=message):
        decode_state(_state_record(**changes))


def test_defaulted_fields_may_be_absent_but_required_ones_may_not():
    assert decode_command({"type": "ReplyControlledShutdown", "v": 1, "request_id": 1, "broker_id": 2, "error": None}) == \
        C.ReplyControlledShutdown(request_id=1, broker_id=2, error=None)
    with pytest.raises(CodecError, match="missing field 'error'"):
        decode_command({"type": "ReplyControlledShutdown", "v": 1, "request_id": 1, "broker_id": 2})


def test_encoding_something_else_is_a_codec_error():
    with pytest.raises(CodecError, match="not an event"):
        encode_event(C.ScheduleTimer(name="x", delay_ms=1))
    with pytest.raises(CodecError, match="not a command"):
        encode_command(E.TimerFired(at=1, name="x"))
    with pytest.raises(CodecError, match="not JSON-compatible"):
        canonical_json({"x": object()})
    with pytest.raises(CodecError, match="expected a list of commands"):
        decode_commands({})
    with pytest.raises(CodecError, match=r"\[1\]: unknown command type"):
        decode_commands([encode_command(C.Resign(reason="r")), _timer()])


def test_equal_states_encode_equally_whatever_order_their_partitions_came_in():
    from controller_core.columns import EMPTY_IMAGE

    a, b = TopicPartition("a", 0), TopicPartition("b", 0)
    info = PartitionInfo(ReplicaAssignment((1, 2)), LeaderIsr(1, 0, (1, 2), 1, 0), PartitionState.ONLINE)
    first = ControllerState(config=ControllerConfig(broker_id=1), partitions=EMPTY_IMAGE.set(a, info).set(b, info))
    second = ControllerState(config=ControllerConfig(broker_id=1), partitions=EMPTY_IMAGE.set(b, info).set(a, info))
    assert first.partitions.row(a) != second.partitions.row(a)
    assert first == second and encode_state(first) == encode_state(second)


def test_no_encoded_type_has_a_float_field_and_the_compiler_would_say_if_one_did():
    """The journal writer skips its NaN check for codec bodies on the strength of FLOAT_FREE;
    a float field added to any event, command or state type must turn it off."""
    from controller_core.codec_compiler import _Compiler

    assert codec.FLOAT_FREE

    @attrs.frozen
    class WithFloat:
        ratio: float

    compiler = _Compiler(codec.encode_event, codec.decode_event)
    assert not compiler.floats
    compiler.node(WithFloat, "WithFloat")
    assert compiler.floats


def test_a_broker_request_the_codec_cannot_encode_is_a_codec_error_in_the_digest_too():
    """The digest encodes a request's fields one at a time; a value that encoding chokes on is
    handed to the codec's whole-command encoding, which names the problem as it always did."""
    brokers = (BrokerInfo(1, "a", 1, 1),)
    bad = C.SendUpdateMetadata(broker_id=1, broker_epoch=1, controller_epoch=1, partitions=(7,), live_brokers=brokers)
    with pytest.raises(CodecError, match="cannot encode SendUpdateMetadata"):
        codec.reference_digest([bad])
    with pytest.raises(CodecError, match="cannot encode SendUpdateMetadata"):
        digest([bad, bad])
