"""Events, commands and the controller state to and from JSON-compatible values.

The journal stores every event (and snapshots of the state, and a digest of each decision's
commands) as JSON; replay decodes them and feeds the same `step()`. This module is that codec.

Public API
----------
- `encode_event(e) -> dict` / `decode_event(d) -> Event`
- `encode_command(c) -> dict` / `decode_command(d) -> Command`
- `encode_commands(cs) -> list[dict]` / `decode_commands(ds) -> tuple` (shared tuples encoded once)
- `encode_state(s) -> dict` / `decode_state(d) -> ControllerState`
- `canonical_json(obj) -> str` and `digest(commands) -> str` (for the journal's "effects" records):
  blake2b-128 of the canonical JSON of `encode_commands(commands)`; `reference_digest` computes
  it by that definition, `digest` gives the same bytes faster (controller_core/digest.py;
  `digester(canonical)` makes another, with its own caches and JSON writer)
- `CodecError` (a `ValueError`) for anything that cannot be decoded, with a path to the culprit:
  ``BrokersChanged.brokers[1].port: expected an int, got str '9092'``.

Layout
------
Every top-level dict is ``{"type": <class name>, "v": <schema version>, <field>: ..., ...}``.
Values are encoded from the attrs fields and their type hints:

- int, str, bool, float, None: as themselves; enums by value; `X | None` as X or null.
- `tuple[X, ...]` and fixed tuples `tuple[A, B]`: JSON lists; `frozenset[X]`: a sorted list.
- attrs classes: objects keyed by field name, except the hot value types below, which are
  positional lists (a 100,000-partition snapshot is mostly these):

  ====================  ==========================================================================
  TopicPartition        ``["t", 0]``
  LeaderIsr             ``[leader, leader_epoch, [isr], controller_epoch, zk_version]``
  ReplicaAssignment     ``[[replicas]]``, or ``[[replicas], [adding], [removing]]`` while reassigning
  PartitionInfo         ``[assignment, leader_isr or null, "PartitionState", [[replica, "ReplicaState"], ...]]``
  PartitionView         ``[tp, leader, leader_epoch, [isr], controller_epoch, zk_version, [replicas]]``
                        ``+ [[adding], [removing], is_new]`` unless all three are at their defaults
  PartitionWrite        ``[tp, leader_isr, expected_version]``
  ====================  ==========================================================================

- persistent-map fields (`ControllerState`'s maps, `Outbox.intents`: their hints say only
  `PMap`, so `_MAP_FIELDS`, in codec_tables.py, gives key and value types): str keys as a JSON
  object, other keys as a list of ``[key, value]`` pairs.

Everything whose iteration order depends on hashing (frozensets, maps) is written sorted, so
equal values always encode to equal JSON, in any process and under any PYTHONHASHSEED.

Decoding is strict: every field present (unless it has a default), of the right JSON type, and
no unknown keys; the result is `==` to what was encoded (tuples, frozensets, enums,
`immutables.Map`). `CodecError` is the only exception it raises for bad input.

Versions
--------
`VERSIONS` holds the current schema version of each top-level type (1 for all, so far). To
change a type's layout, bump its entry and register in `UPGRADES[(name, old_v)]` a function that
turns an old body dict into one of version `old_v + 1`; old journal records then still decode.
Both are defined in codec_tables.py.
A type that is unknown, or a version newer than ours, raises `CodecError` naming both.

How it is fast
--------------
Each top-level type is compiled once, when this module is imported, into a pair of plain Python
functions generated from its fields: controller_core/codec_compiler.py, whose docstring says
what makes them fast. Compiling everything at import (which Python serialises) leaves the
compiler's tables read-only afterwards, so the codec needs no lock when threads share it.

The codec does not touch the garbage collector: the core takes no locks and changes no process
state. Collections triggered by the allocations of a big snapshot walk the whole heap and can
triple the codec's cost, so the callers that encode or decode big values pause the collector
around the call (adapters/runtime/gcpause.py: the controller loop's bursts, the replay's fold).

Modules
-------
This module is the public API; the rest of the codec is split by what it holds:
controller_core/codec_errors.py (`CodecError`), controller_core/codec_tables.py (the top-level
types, `VERSIONS`, `UPGRADES` and the layout tables), controller_core/codec_compiler.py (the
code generator) and controller_core/digest.py (the commands' digest). Import everything from here.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

import attrs

from .codec_compiler import _Compiler
from .digest import Digester
from .codec_errors import CodecError, _show
from .codec_tables import (  # the top-level types and their versions: callers import them from here
    COMMAND_TYPES,
    EVENT_TYPES,
    STATE_TYPES,
    UPGRADES,
    VERSIONS,
    _COMMANDS_BY_NAME,
    _EVENTS_BY_NAME,
    _STATES_BY_NAME,
)
from . import commands as _commands
from .state import ControllerState

__all__ = [
    "CodecError",
    "VERSIONS",
    "UPGRADES",
    "encode_event",
    "decode_event",
    "encode_command",
    "decode_command",
    "encode_commands",
    "decode_commands",
    "encode_state",
    "decode_state",
    "canonical_json",
    "digest",
    "reference_digest",
    "digester",
]


_COMPILER = _Compiler(lambda e: encode_event(e), lambda d: decode_event(d))  # late-bound: defined further down


# -- public API -----------------------------------------------------------------------------------


def _encode_top(value: Any, by_name: dict[str, type], kind: str, memo: dict | None = None) -> dict:
    cls = value.__class__
    if by_name.get(cls.__name__) is not cls:
        raise CodecError(f"not {kind}: {cls.__module__}.{cls.__qualname__}")
    enc = _COMPILER.encoders.get(cls) or _COMPILER.top_encoder(cls)
    try:
        return enc(value, memo)
    except (AttributeError, TypeError) as exc:
        raise CodecError(f"cannot encode {cls.__name__}: {exc}") from exc


def _decode_top(d: Any, by_name: dict[str, type], kind: str) -> Any:
    if d.__class__ is not dict:
        raise CodecError(f"{kind} must be a JSON object, got {_show(d)}")
    name = d.get("type")
    v = d.get("v")
    if name.__class__ is not str:
        raise CodecError(f"{kind} without a string 'type': {_show(d)}")
    if v.__class__ is not int:
        raise CodecError(f"{kind} {name!r} without an integer version 'v' (got {_show(v)})")
    cls = by_name.get(name)
    if cls is None:
        raise CodecError(f"unknown {kind} type {name!r} (v {v})")
    current = VERSIONS[name]
    if v > current:
        raise CodecError(f"{kind} type {name!r} v {v} is newer than this codec reads (up to v {current})")
    if v < 1:
        raise CodecError(f"{kind} type {name!r} has an invalid version v {v}")
    while v < current:
        upgrade = UPGRADES.get((name, v))
        if upgrade is None:
            raise CodecError(f"{kind} type {name!r} v {v}: no upgrade to v {v + 1} is registered")
        d = upgrade(d)
        v += 1
    dec = _COMPILER.decoders.get(cls) or _COMPILER.top_decoder(cls)
    try:
        return dec(d, 2)
    except CodecError as e:
        e._rpath.append(name)
        raise


def encode_event(e: Any) -> dict:
    """An event as a JSON-compatible dict: {"type": class name, "v": version, field: ...}."""
    return _encode_top(e, _EVENTS_BY_NAME, "an event")


def decode_event(d: Any) -> Any:
    """The event `encode_event` made `d` from; `CodecError` if `d` is not one."""
    return _decode_top(d, _EVENTS_BY_NAME, "event")


def encode_command(c: Any) -> dict:
    return _encode_top(c, _COMMANDS_BY_NAME, "a command")


def decode_command(d: Any) -> Any:
    return _decode_top(d, _COMMANDS_BY_NAME, "command")


def encode_commands(commands: Iterable[Any]) -> list[dict]:
    """Encode a decision's commands. A tuple of values shared by several commands (the
    `partitions` of the UpdateMetadata sent to every broker) is encoded once, and the resulting
    list object is shared by their dicts: treat the result as read-only."""
    memo: dict[int, list] = {}
    commands = list(commands)  # keeps every tuple alive, so ids stay unique during the call
    return [_encode_top(c, _COMMANDS_BY_NAME, "a command", memo) for c in commands]


def decode_commands(items: Any) -> tuple:
    if items.__class__ is not list:
        raise CodecError(f"expected a list of commands, got {_show(items)}")
    out = []
    for k, d in enumerate(items):
        try:
            out.append(decode_command(d))
        except CodecError as e:
            e._rpath.append(f"[{k}]")
            raise
    return tuple(out)


def encode_state(s: ControllerState) -> dict:
    """A whole `ControllerState` (a snapshot), maps included."""
    return _encode_top(s, _STATES_BY_NAME, "a controller state")


def decode_state(d: Any) -> ControllerState:
    return _decode_top(d, _STATES_BY_NAME, "controller state")


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def canonical_json(obj: Any) -> str:
    """The one JSON text of a JSON-compatible value: keys sorted, no spaces, ASCII only."""
    try:
        return _CANONICAL.encode(obj)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"not JSON-compatible: {exc}") from exc


_REQUEST_TYPES = (_commands.SendUpdateMetadata, _commands.SendLeaderAndIsr)
"""The broker requests whose fields the digest encodes one at a time."""


def _compile_everything() -> None:
    for cls in (*EVENT_TYPES, *COMMAND_TYPES, *STATE_TYPES):
        _COMPILER.top_encoder(cls)
        _COMPILER.top_decoder(cls)


_compile_everything()

FLOAT_FREE = not _COMPILER.floats
"""No event, command or state type has a float field, so no encoding of one holds a float: the
journal writer may then take orjson's output as is (its NaN-as-null check walks the whole body,
0.7 s for a 100,000-partition ControllerElected). tests/core/test_codec.py keeps this honest."""


def reference_digest(commands: Iterable[Any]) -> str:
    """The digest's definition: hex blake2b-128 of `canonical_json(encode_commands(commands))`."""
    text = canonical_json(encode_commands(commands))
    return hashlib.blake2b(text.encode("ascii"), digest_size=16).hexdigest()


def _unencodable(value: Any):
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _made_writer():
    """`canonical_json` without its per-call set-up: the standard library's C encoder, made once
    with the same settings. It does not look for reference cycles, which the codec's output
    (a tree, some lists shared) never has, so it is only used where that holds: the digest."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - an interpreter without the C accelerator
        return canonical_json
    encode = make(None, _unencodable, json.encoder.encode_basestring_ascii, None, ":", ",", True, False, False)
    join = "".join

    def write(value: Any) -> str:
        return join(encode(value, 0))

    return write


def _field_encoder(cls: type, name: str):
    """The codec's encoding of one field of a broker request (None for another class), compiled
    when this module is imported (below): a digester made later only reads them."""
    return _FIELD_ENCODERS.get((cls, name))


_FIELD_ENCODERS = {(cls, f.name): _COMPILER.field_encoder(cls, f.name)
                   for cls in _REQUEST_TYPES for f in attrs.fields(cls)}


def digester(canonical: Any = None) -> Digester:
    """A new `Digester` (controller_core/digest.py: same bytes as `reference_digest`, faster),
    writing JSON with `canonical` (by default the standard library's, as `canonical_json` sets
    it up; another must write the same text)."""
    return Digester(lambda c, memo: _encode_top(c, _COMMANDS_BY_NAME, "a command", memo),
                    canonical if canonical is not None else _made_writer(), _field_encoder)


digest = digester().digest
"""`digest(commands) -> str`: equal to `reference_digest(commands)` (what the controller loop
journals in its "effects" records, and the replay compares)."""
