"""Events, commands and the controller state to and from JSON-compatible values.

The journal stores every event (and snapshots of the state, and a digest of each decision's
commands) as JSON; replay decodes them and feeds the same `step()`. This module is that codec.

Public API
----------
- `encode_event(e) -> dict` / `decode_event(d) -> Event`
- `encode_command(c) -> dict` / `decode_command(d) -> Command`
- `encode_commands(cs) -> list[dict]` / `decode_commands(ds) -> tuple` (shared tuples encoded once)
- `encode_state(s) -> dict` / `decode_state(d) -> ControllerState`
- `canonical_json(obj) -> str` and `digest(commands) -> str` (for the journal's "effects" records)
- `gc_paused()`: a context manager to wrap `json.loads` of a big snapshot in (see its docstring)
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
  `PMap`, so `_MAP_FIELDS` gives key and value types): str keys as a JSON object, other keys as
  a list of ``[key, value]`` pairs.

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
A type that is unknown, or a version newer than ours, raises `CodecError` naming both.

How it is fast
--------------
Each class is compiled once, on first use, into a pair of plain Python functions generated from
its fields (the way attrs generates `__init__`): primitive checks are inlined, a list of ints is
checked with one C-level pass, per-field `try` blocks cost nothing unless something fails (then
they add the field name to the error's path). Decoded replica-state pairs and replica
assignments are shared between equal values (a few dozen distinct ones for 100,000 partitions),
and topic names are interned. The garbage collector is paused while the codec runs: its
collections, triggered by allocation counts, walk the whole heap and tripled the cost.
"""
from __future__ import annotations

import _thread
import enum
import gc as _gc
import hashlib
import json
import sys
import types
import typing
from typing import Any, Callable, Iterable

import attrs
import immutables

from . import commands as _commands
from . import draft as _draft
from . import events as _events
from .machines import ReplicaState
from .state import ControllerState, PartitionInfo, TopicInfo
from .values import BrokerInfo, LeaderIsr, PartitionView, ReplicaAssignment, TopicPartition

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
    "gc_paused",
]


# -- errors ---------------------------------------------------------------------------------------


class CodecError(ValueError):
    """A value that cannot be decoded (or encoded). `path` locates it, outermost first."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self._rpath: list = []  # innermost first: segments are appended while unwinding

    @property
    def path(self) -> tuple:
        return tuple(reversed(self._rpath))

    def __str__(self) -> str:
        if not self._rpath:
            return self.reason
        where = ""
        for seg in reversed(self._rpath):
            if isinstance(seg, int):
                where += f"[{seg}]"
            elif seg.startswith("["):
                where += seg
            else:
                where += f".{seg}" if where else seg
        return f"{where}: {self.reason}"


_JSON_NAMES = {
    dict: "object", list: "list", str: "str", int: "int", float: "float", bool: "bool", type(None): "null",
}


def _show(value: Any) -> str:
    kind = _JSON_NAMES.get(type(value), type(value).__name__)
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{kind} {text}"


def _bad(value: Any, expected: str) -> typing.NoReturn:
    raise CodecError(f"expected {expected}, got {_show(value)}")


def _missing(field: str) -> typing.NoReturn:
    raise CodecError(f"missing field {field!r}")


def _unknown(value: dict, known: tuple[str, ...]) -> typing.NoReturn:
    extra = sorted(str(k) for k in value if k not in known)
    raise CodecError(f"unknown field(s) {', '.join(map(repr, extra))} (known: {', '.join(known)})")


def _build_failed(cls: type, exc: Exception) -> typing.NoReturn:
    raise CodecError(f"cannot build {cls.__name__}: {exc}") from exc


# -- tables ---------------------------------------------------------------------------------------

_POSITIONAL: dict[type, int | None] = {
    # class -> how many leading fields are always written (None: all of them); the remaining
    # (defaulted) fields are written only when one of them differs from its default.
    TopicPartition: None,
    LeaderIsr: None,
    ReplicaAssignment: 1,
    PartitionInfo: None,
    PartitionView: 7,
    _commands.PartitionWrite: None,
}
"""The hot value types, encoded as positional lists (see the module docstring)."""

_MAP_FIELDS: dict[tuple[type, str], tuple[Any, Any]] = {
    (ControllerState, "brokers"): (int, BrokerInfo),
    (ControllerState, "topics"): (str, TopicInfo),
    (ControllerState, "topic_configs"): (str, tuple[tuple[str, str], ...]),
    (ControllerState, "partitions"): (TopicPartition, PartitionInfo),
    (ControllerState, "pending"): (int, _draft.Outbox),
    (_draft.Outbox, "intents"): (TopicPartition, tuple[tuple[str | int, ...], ...]),
}
"""Key and value types of the persistent-map fields, whose hints say only `PMap`."""

_INTERNED_STR_FIELDS: frozenset[tuple[type, str]] = frozenset({(TopicPartition, "topic")})
"""Strings decoded here go through `sys.intern`: one topic name object per topic, not per
partition (json.loads makes a fresh string for every occurrence)."""

_SHARED_TUPLES = {tuple[int, ReplicaState]}
"""Fixed tuples of these shapes are shared between equal decoded values, as the core does for
replica-state pairs (there are brokers x 7 of them, not one per replica)."""

_SHARED_VALUES = {ReplicaAssignment}
"""Positional classes whose equal decoded values are shared: with RF 3 on 5 brokers, 100,000
partitions have 60 distinct assignments. Saves memory and most of their decoding time."""

EVENT_TYPES: tuple[type, ...] = _events.EVENT_TYPES
COMMAND_TYPES: tuple[type, ...] = _commands.COMMAND_TYPES
STATE_TYPES: tuple[type, ...] = (ControllerState,)

VERSIONS: dict[str, int] = {cls.__name__: 1 for cls in EVENT_TYPES + COMMAND_TYPES + STATE_TYPES}
"""Current schema version per top-level type name. Bump one entry (and add an upgrader) when
that type's encoding changes."""
VERSIONS["ControllerState"] = 2  # v2: `deferred` (events waiting for a write's outcome)
VERSIONS["PartitionStatesWritten"] = 2  # v2: `landed` and `final` (progress of a large write)

UPGRADES: dict[tuple[str, int], Callable[[dict], dict]] = {
    ("ControllerState", 1): lambda d: {**d, "v": 2},  # v1 states had nothing deferred
    ("PartitionStatesWritten", 1): lambda d: {**d, "v": 2},  # v1 outcomes were all final
}
"""(type name, version) -> function turning a body of that version into one of version + 1."""

_EVENT_SET = frozenset(EVENT_TYPES)

_EVENTS_BY_NAME = {cls.__name__: cls for cls in EVENT_TYPES}
_COMMANDS_BY_NAME = {cls.__name__: cls for cls in COMMAND_TYPES}
_STATES_BY_NAME = {cls.__name__: cls for cls in STATE_TYPES}
if len(VERSIONS) != len(EVENT_TYPES) + len(COMMAND_TYPES) + len(STATE_TYPES):
    raise TypeError("codec: two top-level types share a class name")

_SHARE_CAP = 1 << 16
"""Entries per cache of shared decoded values, after which new values are simply not shared."""


_MISSING = object()
_NONE = type(None)
_EXACT_NAMES = {int: "int", str: "str", bool: "bool", _NONE: "null"}
_CLASS_NAMES = {int: "_int", str: "_str", bool: "_bool", _NONE: "_NONE"}  # as named in generated code


def _canon_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# -- the compiler ---------------------------------------------------------------------------------


class _Node:
    """How one type hint is encoded and decoded, as Python source expressions.

    `enc(src)` / `dec(src)` return an expression that encodes / decodes the value held by the
    expression `src` (always a side-effect-free access, so it may be repeated). `exact` is the set
    of Python classes whose values pass through unchanged (None for other types); `sortable`
    says whether Python values of the type can be sorted (for sets and map keys).
    """

    __slots__ = ("enc", "dec", "label", "exact", "sortable", "identity", "dec_name", "enum", "enum_class")

    def __init__(self, enc, dec, label, exact=None, sortable=False, identity=False):
        self.enc: Callable[[str], str] = enc
        self.dec: Callable[[str], str] = dec
        self.label: str = label
        self.exact: frozenset[type] | None = exact
        self.sortable: bool = sortable
        self.identity: bool = identity
        self.dec_name: str | None = None  # the decoder function of a class
        self.enum = False  # an enum, encoded by value
        self.enum_class = ""  # name of the class of its values ("_str" or "_int")


class _Field(typing.NamedTuple):
    name: str
    init_name: str
    hint: Any
    node: _Node
    default: Any  # _MISSING when required
    kw_only: bool


class _Compiler:
    def __init__(self) -> None:
        self.ns: dict[str, Any] = {
            "__builtins__": {},
            "CodecError": CodecError,
            "_bad": _bad,
            "_missing": _missing,
            "_unknown": _unknown,
            "_build_failed": _build_failed,
            "_MISSING": _MISSING,
            "_intern": sys.intern,
            "_canon": _canon_key,
            "_Map": immutables.Map,
            "_tnew": tuple.__new__,
            "_id": id,
            "_repr": repr,
            "_len": len,
            "_list": list,
            "_dict": dict,
            "_tuple": tuple,
            "_frozenset": frozenset,
            "_set": set,
            "_sorted": sorted,
            "_map": map,
            "_type": type,
            "_enumerate": enumerate,
            "_int": int,
            "_str": str,
            "_bool": bool,
            "_float": float,
            "_NONE": _NONE,
            "TypeError": TypeError,
            "ValueError": ValueError,
            "_enc_event": lambda e: encode_event(e),  # late-bound: defined further down
            "_dec_event": lambda d: decode_event(d),
        }
        self.count = 0
        self.nodes: dict[Any, _Node] = {}
        self.encoders: dict[type, Callable] = {}
        self.decoders: dict[type, Callable] = {}
        self.fields: dict[type, list[_Field]] = {}
        self.lock = _thread.RLock()  # compilation is lazy; _thread, as threading imports time

    # - helpers -

    def name(self, obj: Any, prefix: str = "_o") -> str:
        self.count += 1
        name = f"{prefix}{self.count}"
        self.ns[name] = obj
        return name

    def fresh(self, prefix: str = "i") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def define(self, source: str, name: str) -> Callable:
        code = compile(source, f"<codec {name}>", "exec")
        exec(code, self.ns)
        return self.ns[name]

    # - type hints -

    def node(self, hint: Any, where: str) -> _Node:
        try:
            return self.nodes[hint]
        except (KeyError, TypeError):
            pass
        node = self._make(hint, where)
        try:
            self.nodes.setdefault(hint, node)
        except TypeError:
            pass
        return node

    def _make(self, hint: Any, where: str) -> _Node:
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if hint is int or hint is str or hint is bool or hint is _NONE or hint is None:
            cls = _NONE if hint is None else hint
            return self._exact(frozenset({cls}))
        if hint is float:
            return _Node(
                enc=lambda s: s,
                dec=lambda s: f"({s} if {s}.__class__ is _float else _float({s}) if {s}.__class__ is _int else _bad({s}, 'a number'))",
                label="float",
                sortable=True,
                identity=True,
            )
        if origin is typing.Union or origin is types.UnionType:
            return self._union(args, where)
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return self._var_tuple(self.node(args[0], where))
            if not args or args == ((),):
                raise TypeError(f"codec: unsupported hint {hint!r} at {where}")
            return self._fixed_tuple(hint, [self.node(a, where) for a in args])
        if origin is frozenset:
            return self._frozenset(self.node(args[0], where))
        if isinstance(hint, type):
            if issubclass(hint, enum.Enum):
                return self._enum(hint)
            if issubclass(hint, tuple) and hasattr(hint, "_fields"):
                return self._class(hint)
            if attrs.has(hint):
                return self._class(hint)
        raise TypeError(f"codec: unsupported type hint {hint!r} at {where}")

    def _exact(self, classes: frozenset) -> _Node:
        label = " or ".join(sorted(_EXACT_NAMES[c] for c in classes))
        article = "an" if label[0] in "aeiou" else "a"
        if len(classes) == 1:
            (cls,) = classes
            if cls is _NONE:
                dec = lambda s: f"({s} if {s} is None else _bad({s}, 'null'))"
            else:
                cname = _CLASS_NAMES[cls]
                dec = lambda s, c=cname, lab=f"{article} {label}": f"({s} if {s}.__class__ is {c} else _bad({s}, {lab!r}))"
        else:
            sname = self.name(classes, "_classes")
            dec = lambda s, lab=label: f"({s} if {s}.__class__ in {sname} else _bad({s}, {lab!r}))"
        sortable = len(classes - {_NONE}) == 1 and _NONE not in classes
        return _Node(enc=lambda s: s, dec=dec, label=label, exact=classes, sortable=sortable, identity=True)

    def _union(self, args: tuple, where: str) -> _Node:
        if args and all(a in _EVENT_SET for a in args):
            # any event (the state's deferred events): tagged with its type, as in the journal
            return _Node(enc=lambda s: f"_enc_event({s})", dec=lambda s: f"_dec_event({s})", label="an event")
        members = [self.node(a, where) for a in args]
        if all(m.exact is not None for m in members):
            return self._exact(frozenset().union(*(m.exact for m in members)))
        others = [m for a, m in zip(args, members) if a is not _NONE and a is not None]
        if len(others) == 1 and len(args) == 2:
            inner = others[0]
            return _Node(
                enc=lambda s: s if inner.identity else f"(None if {s} is None else {inner.enc(s)})",
                dec=lambda s: f"(None if {s} is None else {inner.dec(s)})",
                label=f"{inner.label} or null",
                identity=inner.identity,
            )
        raise TypeError(f"codec: unsupported union {args!r} at {where} (only X | None and unions of int/str/bool/None)")

    def _enum(self, cls: type) -> _Node:
        values = {m.value: m for m in cls}
        kinds = {type(v) for v in values}
        if len(kinds) != 1 or kinds - {int, str} or not all(values.values()):
            raise TypeError(f"codec: enum {cls.__name__} needs truthy members with all-str or all-int values")
        (kind,) = kinds
        table = self.name(values, "_enum")
        kname = "_str" if kind is str else "_int"
        label = f"one of {sorted(values)!r} ({cls.__name__})"
        if len(label) > 200:
            label = f"a {cls.__name__} value"
        node = _Node(
            enc=lambda s: f"{s}._value_",  # not .value: a Python-level descriptor, 10x slower
            dec=lambda s: f"({s}.__class__ is {kname} and {table}.get({s}) or _bad({s}, {label!r}))",
            label=cls.__name__,
        )
        node.enum = True
        node.enum_class = kname
        return node

    def _var_tuple(self, item: _Node) -> _Node:
        label = f"list of {item.label}"
        if item.exact is not None:
            ok = self.name(item.exact, "_ok")
            return _Node(
                enc=lambda s: f"_list({s})",
                dec=lambda s: f"(_tuple({s}) if {s}.__class__ is _list and _set(_map(_type, {s})) <= {ok} else _bad({s}, {'a ' + label!r}))",
                label=label,
            )

        def enc(s: str) -> str:
            if item.identity:
                return f"_list({s})"
            v = self.fresh()
            return f"[{item.enc(v)} for {v} in {s}]"

        fn = self.fresh("_dtuple")
        v = self.fresh()
        src = (
            f"def {fn}(x):\n"
            f"    if x.__class__ is not _list:\n"
            f"        _bad(x, {'a ' + label!r})\n"
            f"    try:\n"
            f"        return _tuple([{item.dec(v)} for {v} in x])\n"
            f"    except CodecError:\n"
            f"        for k, {v} in _enumerate(x):\n"
            f"            try:\n"
            f"                {item.dec(v)}\n"
            f"            except CodecError as e:\n"
            f"                e._rpath.append(k)\n"
            f"                raise\n"
            f"        raise\n"
        )
        self.define(src, fn)
        return _Node(enc=enc, dec=lambda s: f"{fn}({s})", label=label)

    def _fixed_tuple(self, hint: Any, items: list[_Node]) -> _Node:
        n = len(items)
        label = f"list [{', '.join(i.label for i in items)}]"
        identity = all(i.identity for i in items)

        def enc(s: str) -> str:
            if identity:
                return f"_list({s})"
            return "[" + ", ".join(i.enc(f"{s}[{k}]") for k, i in enumerate(items)) + "]"

        fn = self.fresh("_dfixed")
        names = [f"f{k}" for k in range(n)]
        lines = [f"def {fn}(x):"]
        shared = hint in _SHARED_TUPLES
        dec = lambda s: f"{fn}({s})"
        if shared:
            # Few distinct values, many occurrences (replica-state pairs): the JSON pair is looked
            # up, inline, in a cache of decoded tuples (filled by the full decoder), so that equal
            # values are one object. The class checks make the lookup safe (hashable scalars)
            # and keep `true` from passing for 1 (they are equal and hash alike).
            if not all(i.exact is not None or i.enum for i in items):
                raise TypeError(f"codec: shared tuples must hold scalars: {hint!r}")
            cache = self.name({}, "_cache")
            checks = [
                (lambda s, k=k, ok=self.name(i.exact, "_ok"): f"{s}[{k}].__class__ in {ok}")
                if i.exact is not None and len(i.exact) > 1
                else (lambda s, k=k, c=_CLASS_NAMES[next(iter(i.exact))] if i.exact else i.enum_class:
                      f"{s}[{k}].__class__ is {c}")
                for k, i in enumerate(items)
            ]
            dec = lambda s: (f"({s}.__class__ is _list and _len({s}) == {n} and "
                             + " and ".join(check(s) for check in checks)
                             + f" and {cache}.get(_tuple({s})) or {fn}({s}))")
        lines += [
            f"    if x.__class__ is not _list or _len(x) != {n}:",
            f"        _bad(x, {'a ' + label!r})",
            f"    {', '.join(names)}, = x",
        ]
        for k, item in enumerate(items):
            lines += [
                "    try:",
                f"        a{k} = {item.dec(names[k])}",
                "    except CodecError as e:",
                f"        e._rpath.append({k})",
                "        raise",
            ]
        result = "(" + "".join(f"a{k}, " for k in range(n)) + ")"
        if shared:
            lines += [
                f"    r = {result}",
                f"    if _len({cache}) < {_SHARE_CAP}:",
                f"        {cache}[_tuple(x)] = r",
                "    return r",
            ]
        else:
            lines.append(f"    return {result}")
        self.define("\n".join(lines) + "\n", fn)
        sortable = all(i.sortable for i in items)
        return _Node(enc=enc, dec=dec, label=label, sortable=sortable)

    def _frozenset(self, item: _Node) -> _Node:
        label = f"list of {item.label} (a set)"

        def enc(s: str) -> str:
            if item.sortable:
                if item.identity:
                    return f"_sorted({s})"
                v = self.fresh()
                return f"[{item.enc(v)} for {v} in _sorted({s})]"
            v = self.fresh()
            return f"_sorted([{item.enc(v)} for {v} in {s}], key=_canon)"

        if item.exact is not None:
            ok = self.name(item.exact, "_ok")
            return _Node(
                enc=enc,
                dec=lambda s: f"(_frozenset({s}) if {s}.__class__ is _list and _set(_map(_type, {s})) <= {ok} else _bad({s}, {'a ' + label!r}))",
                label=label,
            )
        inner = self._var_tuple(item)
        return _Node(enc=enc, dec=lambda s: f"_frozenset({inner.dec(s)})", label=label)

    def _map(self, key: _Node, value: _Node, label: str) -> _Node:
        fn_e = self.fresh("_emap")
        fn_d = self.fresh("_dmap")
        if key.exact == frozenset({str}):
            src_e = (
                f"def {fn_e}(m):\n"
                f"    return {{k: {value.enc('m[k]')} for k in _sorted(m)}}\n"
            )
            src_d = (
                f"def {fn_d}(x):\n"
                f"    if x.__class__ is not _dict:\n"
                f"        _bad(x, {'an object ' + label!r})\n"
                f"    try:\n"
                f"        return _Map({{{key.dec('k')}: {value.dec('v')} for k, v in x.items()}})\n"
                f"    except CodecError:\n"
                f"        for k, v in x.items():\n"
                f"            try:\n"
                f"                {key.dec('k')}\n"
                f"                {value.dec('v')}\n"
                f"            except CodecError as e:\n"
                f"                e._rpath.append('[' + _repr(k) + ']')\n"
                f"                raise\n"
                f"        raise\n"
            )
        else:
            if not key.sortable:
                raise TypeError(f"codec: map keys of type {key.label} cannot be sorted")
            src_e = (
                f"def {fn_e}(m):\n"
                f"    return [[{key.enc('k')}, {value.enc('m[k]')}] for k in _sorted(m)]\n"
            )
            src_d = (
                f"def {fn_d}(x):\n"
                f"    if x.__class__ is not _list:\n"
                f"        _bad(x, {'a list of [key, value] pairs ' + label!r})\n"
                f"    try:\n"
                f"        m = _Map([({key.dec('k')}, {value.dec('v')}) for k, v in x])\n"
                f"    except (CodecError, TypeError, ValueError):\n"
                f"        for n, item in _enumerate(x):\n"
                f"            try:\n"
                f"                if item.__class__ is not _list or _len(item) != 2:\n"
                f"                    _bad(item, 'a [key, value] pair')\n"
                f"                k, v = item\n"
                f"                {key.dec('k')}\n"
                f"                {value.dec('v')}\n"
                f"            except CodecError as e:\n"
                f"                e._rpath.append(n)\n"
                f"                raise\n"
                f"        raise\n"
                f"    if _len(m) != _len(x):\n"
                f"        raise CodecError('duplicate keys in ' + {label!r})\n"
                f"    return m\n"
            )
        self.define(src_e, fn_e)
        self.define(src_d, fn_d)
        return _Node(enc=lambda s: f"{fn_e}({s})", dec=lambda s: f"{fn_d}({s})", label=label)

    # - classes (attrs and NamedTuple) -

    def _fields(self, cls: type) -> list[_Field]:
        fields = self.fields.get(cls)
        if fields is None:
            fields = self.fields[cls] = self._read_fields(cls)
        return fields

    def _read_fields(self, cls: type) -> list[_Field]:
        hints = typing.get_type_hints(cls)
        out = []
        if attrs.has(cls):
            for f in attrs.fields(cls):
                if not f.init:
                    raise TypeError(f"codec: {cls.__name__}.{f.name} is not an __init__ argument")
                where = f"{cls.__name__}.{f.name}"
                hint = hints[f.name]
                if hint is immutables.Map or typing.get_origin(hint) is immutables.Map:
                    kv = typing.get_args(hint) or _MAP_FIELDS.get((cls, f.name))
                    if not kv:
                        raise TypeError(f"codec: no key/value types for the map field {where} (add it to _MAP_FIELDS)")
                    k, v = (self.node(t, where) for t in kv)
                    node = self._map(k, v, f"{{{k.label}: {v.label}}}")
                else:
                    node = self.node(hint, where)
                if f.default is attrs.NOTHING:
                    default = _MISSING
                elif isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
                    default = f.default.factory() if not f.default.takes_self else _MISSING
                else:
                    default = f.default
                init_name = getattr(f, "alias", None) or f.name.lstrip("_")
                out.append(_Field(f.name, init_name, hint, node, default, f.kw_only))
        else:  # NamedTuple
            defaults = getattr(cls, "_field_defaults", {})
            for name in cls._fields:
                node = self.node(hints[name], f"{cls.__name__}.{name}")
                out.append(_Field(name, name, hints[name], node, defaults.get(name, _MISSING), False))
        for f in out:
            if f.name in ("type", "v"):
                raise TypeError(f"codec: {cls.__name__} has a field named {f.name!r}, which the envelope uses")
        return out

    def _class(self, cls: type) -> _Node:
        is_tuple = not attrs.has(cls)
        fe, fd = self.fresh("_e"), self.fresh("_d")
        positional = is_tuple or cls in _POSITIONAL
        node = _Node(enc=lambda s: f"{fe}({s})", dec=lambda s: f"{fd}({s})", label=cls.__name__)
        node.dec_name = fd
        self.nodes[cls] = node  # before the fields: a field may refer back to the class
        try:
            self._class_body(cls, node, fe, fd, positional, is_tuple)
        except BaseException:
            del self.nodes[cls]
            raise
        return node

    def _class_body(self, cls, node, fe, fd, positional, is_tuple) -> None:
        fields = self._fields(cls)
        cname = self.name(cls, "_C")
        if positional:
            required = _POSITIONAL.get(cls) or len(fields)
            if any(f.default is _MISSING for f in fields[required:]):
                raise TypeError(f"codec: {cls.__name__}: a field after the first {required} has no default")
            if not is_tuple and any(f.kw_only for f in fields):
                raise TypeError(f"codec: positional class {cls.__name__} has keyword-only fields")
            self._positional(cls, cname, fe, fd, fields, required, is_tuple)
            if is_tuple and all(f.node.identity for f in fields):
                node.enc = lambda s: f"_list({s})"  # a NamedTuple of primitives: list(x)
            node.sortable = is_tuple and all(f.node.sortable for f in fields)
        else:
            self._dict(cls, cname, fe, fd, fields)

    def _positional(self, cls, cname, fe, fd, fields: list[_Field], required: int, is_tuple: bool) -> None:
        total = len(fields)

        def acc(k: int) -> str:
            return f"x[{k}]" if is_tuple else f"x.{fields[k].name}"

        encs = [f.node.enc(acc(k)) for k, f in enumerate(fields)]
        lines = [f"def {fe}(x):"]
        if required < total:
            conds = [f"{acc(k)} == {self.name(fields[k].default, '_default')}" for k in range(required, total)]
            lines.append(f"    if {' and '.join(conds)}:")
            lines.append(f"        return [{', '.join(encs[:required])}]")
        lines.append(f"    return [{', '.join(encs)}]")
        self.define("\n".join(lines) + "\n", fe)

        layout = ", ".join(f.name for f in fields[:required])
        if required < total:
            layout += " (, " + ", ".join(f.name for f in fields[required:]) + ")"
        expected = f"{cls.__name__} as a list [{layout}]"
        names = [f"f{k}" for k in range(total)]
        lines = [
            f"def {fd}(x):",
            "    if x.__class__ is not _list:",
            f"        _bad(x, {expected!r})",
            "    n = _len(x)",
            f"    if n == {total}:",
            f"        {', '.join(names)}, = x",
        ]
        if required < total:
            lines += [f"    elif n == {required}:", f"        {', '.join(names[:required])}, = x"]
        lines += ["    else:", f"        _bad(x, {expected!r})"]

        def decode_field(k: int) -> list[str]:
            f = fields[k]
            expr = f.node.dec(names[k])
            if (cls, f.name) in _INTERNED_STR_FIELDS:
                expr = f"_intern({expr})"
            return ["    try:", f"        a{k} = {expr}", "    except CodecError as e:",
                    f"        e._rpath.append({f.name!r})", "        raise"]

        cache = self.name({}, "_cache") if cls in _SHARED_VALUES else None

        def build(count: int, indent: str) -> list[str]:
            args = ", ".join(f"a{k}" for k in range(count))
            if is_tuple:
                # a NamedTuple is built whole: the defaulted fields that were not written too
                args += "".join(f", {self.name(fields[k].default, '_default')}" for k in range(count, total))
                return [f"{indent}return _tnew({cname}, ({args},))"]
            make = [f"{indent}try:", f"{indent}    r = {cname}({args})",
                    f"{indent}except (TypeError, ValueError) as exc:", f"{indent}    _build_failed({cname}, exc)"]
            if cache is None:
                return make + [f"{indent}return r"]
            return [f"{indent}key = ({args},)", f"{indent}r = {cache}.get(key)", f"{indent}if r is None:"] + [
                "    " + line for line in make] + [
                f"{indent}    if _len({cache}) < {_SHARE_CAP}:", f"{indent}        {cache}[key] = r", f"{indent}return r"]

        for k in range(required):
            lines += decode_field(k)
        if required < total:
            lines.append(f"    if n == {required}:")
            lines += build(required, "        ")
            for k in range(required, total):
                lines += decode_field(k)
        lines += build(total, "    ")
        self.define("\n".join(lines) + "\n", fd)

    def _dict(self, cls, cname, fe, fd, fields: list[_Field]) -> None:
        items = ", ".join(f"{f.name!r}: {f.node.enc('x.' + f.name)}" for f in fields)
        self.define(f"def {fe}(x):\n    return {{{items}}}\n", fe)

        known = tuple(f.name for f in fields)
        kname = self.name(known, "_known")
        lines = [
            f"def {fd}(x, envelope=0):",
            "    if x.__class__ is not _dict:",
            f"        _bad(x, {('an object ' + cls.__name__)!r})",
            "    kw = {}",
            "    n = envelope",
        ]
        for f in fields:
            lines += [
                f"    v = x.get({f.name!r}, _MISSING)",
                "    if v is _MISSING:",
                f"        _missing({f.name!r})" if f.default is _MISSING else "        pass",
                "    else:",
                "        n += 1",
                "        try:",
                f"            kw[{f.init_name!r}] = {f.node.dec('v')}",
                "        except CodecError as e:",
                f"            e._rpath.append({f.name!r})",
                "            raise",
            ]
        lines += [
            "    if n != _len(x):",
            f"        _unknown(x, {kname} + (('type', 'v') if envelope else ()))",
            "    try:",
            f"        return {cname}(**kw)",
            "    except (TypeError, ValueError) as exc:",
            f"        _build_failed({cname}, exc)",
        ]
        self.define("\n".join(lines) + "\n", fd)

    # - top-level types -

    def top_encoder(self, cls: type) -> Callable:
        """`f(x, memo=None) -> dict` with "type" and "v". With a memo (a dict shared by the calls
        of one batch), a field holding a tuple of structured values that was already encoded in
        this batch (the very same tuple object) reuses the encoded list."""
        with self.lock:
            enc = self.encoders.get(cls)
            if enc is not None:
                return enc
            if cls in _POSITIONAL or not attrs.has(cls):
                raise TypeError(f"codec: {cls.__name__} cannot be a top-level type")
            self.node(cls, cls.__name__)
            fields = self._fields(cls)
            head = f"'type': {cls.__name__!r}, 'v': {VERSIONS[cls.__name__]}"
            plain = [head] + [f"{f.name!r}: {f.node.enc('x.' + f.name)}" for f in fields]
            fn = self.fresh("_top")
            lines = [f"def {fn}(x, memo=None):"]
            memoised = [f for f in fields if _is_var_tuple_of_values(f.hint)]
            if memoised:
                lines += ["    if memo is None:", f"        return {{{', '.join(plain)}}}"]
                parts = [head]
                for k, f in enumerate(fields):
                    if f in memoised:
                        lines += [
                            f"    t{k} = x.{f.name}",
                            f"    m{k} = memo.get(_id(t{k}))",
                            f"    if m{k} is None:",
                            f"        m{k} = memo[_id(t{k})] = {f.node.enc(f't{k}')}",
                        ]
                        parts.append(f"{f.name!r}: m{k}")
                    else:
                        parts.append(f"{f.name!r}: {f.node.enc('x.' + f.name)}")
                lines.append(f"    return {{{', '.join(parts)}}}")
            else:
                lines.append(f"    return {{{', '.join(plain)}}}")
            enc = self.define("\n".join(lines) + "\n", fn)
            self.encoders[cls] = enc
            return enc

    def top_decoder(self, cls: type) -> Callable:
        with self.lock:
            dec = self.decoders.get(cls)
            if dec is None:
                dec = self.decoders[cls] = self.ns[self.node(cls, cls.__name__).dec_name]
            return dec


def _is_var_tuple_of_values(hint: Any) -> bool:
    """tuple[X, ...] where X is a class (PartitionView, BrokerInfo, TopicPartition...)."""
    args = typing.get_args(hint)
    return (typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis
            and isinstance(args[0], type) and (attrs.has(args[0]) or hasattr(args[0], "_fields")))


_COMPILER = _Compiler()


# -- public API -----------------------------------------------------------------------------------


class gc_paused:
    """Context manager: the cyclic garbage collector is off inside (if it was on).

    Building or parsing 100,000 small lists triggers collections that each walk every live
    object, several million of them with a big state in memory: that tripled the codec's time in
    measurements. The codec pauses the collector itself; wrap `json.loads` / `json.dumps` of a
    snapshot in this too. The values built here hold no reference cycles, so nothing is left for it."""

    __slots__ = ("was_enabled",)

    def __enter__(self) -> "gc_paused":
        self.was_enabled = _gc.isenabled()
        if self.was_enabled:
            _gc.disable()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.was_enabled:
            _gc.enable()


def _encode_top(value: Any, by_name: dict[str, type], kind: str, memo: dict | None = None) -> dict:
    cls = value.__class__
    if by_name.get(cls.__name__) is not cls:
        raise CodecError(f"not {kind}: {cls.__module__}.{cls.__qualname__}")
    enc = _COMPILER.encoders.get(cls) or _COMPILER.top_encoder(cls)
    enabled = _gc.isenabled()
    if enabled:
        _gc.disable()
    try:
        return enc(value, memo)
    except (AttributeError, TypeError) as exc:
        raise CodecError(f"cannot encode {cls.__name__}: {exc}") from exc
    finally:
        if enabled:
            _gc.enable()


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
    enabled = _gc.isenabled()
    if enabled:
        _gc.disable()
    try:
        return dec(d, 2)
    except CodecError as e:
        e._rpath.append(name)
        raise
    finally:
        if enabled:
            _gc.enable()


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
    with gc_paused():
        return [_encode_top(c, _COMMANDS_BY_NAME, "a command", memo) for c in commands]


def decode_commands(items: Any) -> tuple:
    if items.__class__ is not list:
        raise CodecError(f"expected a list of commands, got {_show(items)}")
    out = []
    with gc_paused():
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


_SHARED_MIN = 16  # lists shorter than this are cheaper to re-serialise than to look up


def digest(commands: Iterable[Any]) -> str:
    """Hex blake2b-128 of `canonical_json(encode_commands(commands))`.

    Computed without building that text in one piece: each command's canonical JSON is fed to
    the hash in turn, and a list shared by several commands (see `encode_commands`) is
    serialised once and its text reused."""
    with gc_paused():
        return _digest(encode_commands(commands))


def _digest(encoded: list[dict]) -> str:
    seen: dict[int, int] = {}
    for d in encoded:
        for value in d.values():
            if value.__class__ is list and len(value) >= _SHARED_MIN:
                seen[id(value)] = seen.get(id(value), 0) + 1
    shared = {k for k, count in seen.items() if count > 1}
    texts: dict[int, str] = {}
    h = hashlib.blake2b(digest_size=16)
    h.update(b"[")
    for n, d in enumerate(encoded):
        if n:
            h.update(b",")
        if shared and any(id(value) in shared for value in d.values()):
            parts = []
            for key in sorted(d):
                value = d[key]
                vid = id(value)
                if vid in shared:
                    text = texts.get(vid)
                    if text is None:
                        text = texts[vid] = canonical_json(value)
                else:
                    text = canonical_json(value)
                parts.append(f"{canonical_json(key)}:{text}")
            h.update(("{" + ",".join(parts) + "}").encode("ascii"))
        else:
            h.update(canonical_json(d).encode("ascii"))
    h.update(b"]")
    return h.hexdigest()
