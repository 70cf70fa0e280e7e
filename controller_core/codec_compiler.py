"""The codec's code generator: each class is compiled, once, into a pair of plain Python
functions that encode and decode it (codec.py compiles every top-level type when it is
imported, so the tables here are only read afterwards, from any thread, without a lock).

The functions are generated from the class's fields and their type hints (the way attrs generates
`__init__`), following the layout that controller_core/codec.py describes and the tables of
controller_core/codec_tables.py: primitive checks are inlined, a list of ints is checked with one
C-level pass, per-field `try` blocks cost nothing unless something fails (then they add the field
name to the error's path). Decoded replica-state pairs and replica assignments are shared between
equal values (a few dozen distinct ones for 100,000 partitions), and topic names are interned.

codec.py holds the one `_Compiler` and the public API around it.
"""
from __future__ import annotations

import enum
import json
import operator
import sys
import types
import typing
from typing import Any, Callable

import attrs
import immutables

from .codec_errors import CodecError, _bad, _build_failed, _missing, _unknown
from .pmap import FrozenDict
from .snapshot_states import SnapshotStates
from .values import LeaderIsr, TopicPartition
from .codec_tables import (
    VERSIONS,
    _COLUMNAR_FIELDS,
    _EVENT_SET,
    _INTERNED_STR_FIELDS,
    _MAP_FIELDS,
    _POSITIONAL,
    _SHARE_CAP,
    _SHARED_TUPLES,
    _SHARED_VALUES,
)

_MISSING = object()
_MAP_TYPES = (immutables.Map, FrozenDict)  # map fields: persistent, or built whole and only read
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


def _raise_codec_error(message: str):
    raise CodecError(message)


class _Compiler:
    def __init__(self, encode_event: Callable[[Any], dict], decode_event: Callable[[Any], Any]) -> None:
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
            "_FrozenDict": FrozenDict,
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
            "_first": operator.itemgetter(0),  # maps are encoded from their items (the partition image builds them a chunk at a time)
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
            "_enc_event": encode_event,  # codec.py's, for fields holding any event
            "_dec_event": decode_event,
        }
        self.count = 0
        self.floats = False  # whether any compiled type has a float field
        self.nodes: dict[Any, _Node] = {}
        self.encoders: dict[type, Callable] = {}
        self.field_encoders: dict[tuple[type, str], Callable] = {}  # (class, field name) -> its encoding
        self.decoders: dict[type, Callable] = {}
        self.fields: dict[type, list[_Field]] = {}

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
            self.floats = True
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
                node = self._var_tuple(self.node(args[0], where))
                if args[0] == tuple[TopicPartition, LeaderIsr]:
                    node = self._state_pairs(node)
                return node
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

    def _state_pairs(self, node: _Node) -> _Node:
        """(partition, state) pairs held as columns (`SnapshotStates`, a new controller's read of
        every state) are encoded from their columns, into the lists the pair-at-a-time encoding
        makes (tests/core/test_snapshot_states.py compares them)."""
        cls = self.name(SnapshotStates, "_columns")
        pairwise = node.enc
        return _Node(enc=lambda s: f"({s}.encoded() if {s}.__class__ is {cls} else {pairwise(s)})", dec=node.dec,
                     label=node.label)

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

    def _map(self, key: _Node, value: _Node, label: str, frozen_dict: bool = False) -> _Node:
        """A map: `immutables.Map`, or with `frozen_dict` a `FrozenDict` (pmap.py)."""
        make = "_FrozenDict" if frozen_dict else "_Map"
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
                f"        return {make}({{{key.dec('k')}: {value.dec('v')} for k, v in x.items()}})\n"
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
                f"    return [[{key.enc('k')}, {value.enc('v')}] for k, v in _sorted(m.items(), key=_first)]\n"
            )
            src_d = (
                f"def {fn_d}(x):\n"
                f"    if x.__class__ is not _list:\n"
                f"        _bad(x, {'a list of [key, value] pairs ' + label!r})\n"
                f"    try:\n"
                f"        m = {make}([({key.dec('k')}, {value.dec('v')}) for k, v in x])\n"
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

    def _columnar(self, as_map: _Node, encode: Callable, decode: Callable) -> _Node:
        """A map field written as columns (a JSON object) when `encode` can, else as the map."""
        enc_name, dec_name = self.name(encode, "_colenc"), self.name(decode, "_coldec")
        fn_e = self.fresh("_ecol")
        self.define(f"def {fn_e}(m):\n    c = {enc_name}(m)\n    return {as_map.enc('m')} if c is None else c\n", fn_e)
        raise_name = self.name(_raise_codec_error, "_colerr")
        return _Node(enc=lambda s: f"{fn_e}({s})",
                     dec=lambda s: f"({dec_name}({s}, {raise_name}) if {s}.__class__ is _dict else {as_map.dec(s)})",
                     label=as_map.label)

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
                if hint in _MAP_TYPES or typing.get_origin(hint) in _MAP_TYPES:
                    kv = typing.get_args(hint) or _MAP_FIELDS.get((cls, f.name))
                    if not kv:
                        raise TypeError(f"codec: no key/value types for the map field {where} (add it to _MAP_FIELDS)")
                    k, v = (self.node(t, where) for t in kv)
                    node = self._map(k, v, f"{{{k.label}: {v.label}}}",
                                     frozen_dict=FrozenDict in (hint, typing.get_origin(hint)))
                    if (cls, f.name) in _COLUMNAR_FIELDS:
                        node = self._columnar(node, *_COLUMNAR_FIELDS[(cls, f.name)])
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

    def field_encoder(self, cls: type, name: str) -> Callable[[Any], Any]:
        """The encoding of one field of a top-level class, as its encoder writes that field (the
        digest writes some fields of broker requests one at a time: controller_core/digest.py).
        Compiled when codec.py is imported, like everything else."""
        key = (cls, name)
        enc = self.field_encoders.get(key)
        if enc is None:
            self.top_encoder(cls)
            field = next(f for f in self._fields(cls) if f.name == name)
            fn = self.fresh("_field")
            enc = self.field_encoders[key] = self.define(f"def {fn}(x):\n    return {field.node.enc('x')}\n", fn)
        return enc

    def top_decoder(self, cls: type) -> Callable:
        dec = self.decoders.get(cls)
        if dec is None:
            dec = self.decoders[cls] = self.ns[self.node(cls, cls.__name__).dec_name]
        return dec


def _is_var_tuple_of_values(hint: Any) -> bool:
    """tuple[X, ...] where X is a class (PartitionView, BrokerInfo, TopicPartition...)."""
    args = typing.get_args(hint)
    return (typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis
            and isinstance(args[0], type) and (attrs.has(args[0]) or hasattr(args[0], "_fields")))
