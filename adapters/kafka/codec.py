"""Kafka's binary protocol, driven by Kafka's own JSON message specs (pure: bytes in, dicts out).

The specs in `specs/` are Apache Kafka 2.4.1's `clients/src/main/resources/common/message/*.json`,
vendored unchanged for the messages this package serves. Kafka generates a Java class per message
from them; here one small interpreter reads a spec once and encodes or decodes any version of it:

- primitive types int8/16/32/64, bool, string, bytes, arrays of them and arrays of structs;
- a field exists in the versions of its `versions` range, is nullable in `nullableVersions`
  and takes its `default` where absent;
- in a message's flexible versions (KIP-482) strings, bytes and arrays are "compact" (unsigned
  varint length + 1, 0 for null) and every struct ends with a tagged-field section. Unknown tags
  are skipped on decode; this package writes no tagged fields (2.4's specs here define none).

Values are plain dicts keyed by the spec's field names (`{"Topics": [{"Name": "t", ...}]}`).
Bad or truncated input raises `ProtocolError` naming the message and field.
"""
from __future__ import annotations

import json
import re
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import attrs

SPEC_DIR = Path(__file__).with_name("specs")

MAX_ARRAY = 1 << 24
"""The longest array or string a decoder believes; anything longer is a malformed frame."""


class ProtocolError(ValueError):
    """Bytes that are not a valid encoding of the expected message."""


@attrs.frozen
class Versions:
    """An inclusive version range; `high` None means open-ended ("3+"), `low` > `high` empty."""

    low: int
    high: int | None

    def __contains__(self, version: int) -> bool:
        return version >= self.low and (self.high is None or version <= self.high)

    @classmethod
    def parse(cls, text: str | None) -> "Versions":
        if text is None or text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))


NEVER = Versions(1, 0)


@attrs.frozen
class Field:
    name: str
    type: str
    versions: Versions
    nullable: Versions
    flexible: Versions | None  # a field's own override of the message's flexible versions
    default: Any
    fields: tuple["Field", ...] | None
    tag: int | None
    tagged: Versions


@attrs.frozen
class Spec:
    name: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]


_COMMENT = re.compile(r"^\s*//.*$", re.M)


def _default(ftype: str, text: Any) -> Any:
    if ftype.startswith("[]"):
        return []
    if text is None:
        return "" if ftype == "string" else b"" if ftype == "bytes" else False if ftype == "bool" else 0
    if text == "null":
        return None
    if ftype == "bool":
        return str(text).lower() == "true"
    if ftype in ("int8", "int16", "int32", "int64"):
        return int(str(text), 0)
    return text


def _field(raw: dict) -> Field:
    ftype = raw["type"]
    sub = raw.get("fields")
    tag = raw.get("tag")
    return Field(
        name=raw["name"], type=ftype, versions=Versions.parse(raw.get("versions", "0+")),
        nullable=Versions.parse(raw.get("nullableVersions")),
        flexible=Versions.parse(raw["flexibleVersions"]) if "flexibleVersions" in raw else None,
        default=_default(ftype, raw.get("default")),
        fields=tuple(_field(f) for f in sub) if sub is not None else None,
        tag=tag, tagged=Versions.parse(raw.get("taggedVersions")) if tag is not None else NEVER)


@lru_cache(maxsize=None)
def spec(name: str) -> Spec:
    """The spec `specs/<name>.json` (e.g. "MetadataRequest"), parsed once."""
    raw = json.loads(_COMMENT.sub("", (SPEC_DIR / f"{name}.json").read_text()))
    return Spec(name=raw["name"], api_key=raw.get("apiKey"), valid=Versions.parse(raw["validVersions"]),
                flexible=Versions.parse(raw["flexibleVersions"]),
                fields=tuple(_field(f) for f in raw["fields"]))


# -- decoding ------------------------------------------------------------------------------------

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_FIXED = {"int8": _I8, "int16": _I16, "int32": _I32, "int64": _I64}


class Reader:
    """A cursor over a request's bytes; every read checks that the bytes are there."""

    def __init__(self, data: bytes, pos: int = 0):
        self.data = data
        self.pos = pos

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ProtocolError(f"{what}: truncated ({n} bytes wanted at offset {self.pos} of {len(self.data)})")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def fixed(self, s: struct.Struct, what: str) -> int:
        end = self.pos + s.size
        if end > len(self.data):
            raise ProtocolError(f"{what}: truncated at offset {self.pos} of {len(self.data)}")
        (value,) = s.unpack_from(self.data, self.pos)
        self.pos = end
        return value

    def uvarint(self, what: str) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise ProtocolError(f"{what}: truncated varint at offset {self.pos}")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ProtocolError(f"{what}: varint longer than 5 bytes")

    def at_end(self) -> bool:
        return self.pos == len(self.data)


def _read_value(r: Reader, ftype: str, f: Field, version: int, flexible: bool, what: str) -> Any:
    s = _FIXED.get(ftype)
    if s is not None:
        return r.fixed(s, what)
    if ftype == "bool":
        return r.take(1, what) != b"\x00"
    if ftype == "string":
        n = r.uvarint(what) - 1 if flexible else r.fixed(_I16, what)
        if n < -1:
            raise ProtocolError(f"{what}: impossible string length {n}")
        if n == -1:
            if version not in f.nullable:
                raise ProtocolError(f"{what}: null is not allowed in version {version}")
            return None
        try:
            return r.take(n, what).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(f"{what}: not UTF-8") from None
    if ftype == "bytes":
        n = r.uvarint(what) - 1 if flexible else r.fixed(_I32, what)
        if n == -1 and version in f.nullable:
            return None
        return r.take(n, what)
    if ftype.startswith("[]"):
        n = r.uvarint(what) - 1 if flexible else r.fixed(_I32, what)
        if n < -1 or n > MAX_ARRAY:
            raise ProtocolError(f"{what}: impossible array length {n}")
        if n == -1:
            if version not in f.nullable:
                raise ProtocolError(f"{what}: null array is not allowed in version {version}")
            return None
        if n > len(r.data) - r.pos:  # every element takes at least one byte
            raise ProtocolError(f"{what}: {n} elements cannot fit in {len(r.data) - r.pos} bytes")
        if f.fields is not None:
            return [_read_struct(r, f.fields, version, flexible, what) for _ in range(n)]
        inner = ftype[2:]
        return [_read_value(r, inner, f, version, flexible, what) for _ in range(n)]
    raise ProtocolError(f"{what}: unsupported type {ftype}")


def _read_struct(r: Reader, fields: tuple[Field, ...], version: int, flexible: bool, where: str) -> dict:
    out: dict[str, Any] = {}
    for f in fields:
        if f.tag is not None or version not in f.versions:
            out[f.name] = f.default
            continue
        fflex = flexible if f.flexible is None else version in f.flexible
        out[f.name] = _read_value(r, f.type, f, version, fflex, f"{where}.{f.name}")
    if flexible:
        count = r.uvarint(f"{where} tagged fields")
        tagged = {f.tag: f for f in fields if f.tag is not None and version in f.tagged}
        last = -1
        for _ in range(count):
            tag = r.uvarint(f"{where} tag")
            if tag <= last:
                raise ProtocolError(f"{where}: tagged fields out of order")
            last = tag
            size = r.uvarint(f"{where} tag {tag} size")
            data = r.take(size, f"{where} tag {tag}")
            f = tagged.get(tag)
            if f is not None:
                out[f.name] = _read_value(Reader(data), f.type, f, version, True, f"{where}.{f.name}")
    return out


def decode(name: str, version: int, data: bytes, pos: int = 0, *, whole: bool = True) -> tuple[dict, int]:
    """Decode message `name` at `version` from `data[pos:]`; returns (value, end position).
    With `whole`, bytes left over after the message are an error."""
    sp = spec(name)
    if version not in sp.valid:
        raise ProtocolError(f"{name}: version {version} is not valid ({sp.valid})")
    r = Reader(data, pos)
    value = _read_struct(r, sp.fields, version, version in sp.flexible, name)
    if whole and not r.at_end():
        raise ProtocolError(f"{name} v{version}: {len(data) - r.pos} unexpected bytes after the message")
    return value, r.pos


# -- encoding ------------------------------------------------------------------------------------


def _uvarint(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


# An encoder is compiled once per message and version: a closure per field, with the version,
# flexibility and nullability questions answered at compile time (a 10,000-partition Metadata
# answer runs the partition encoder 10,000 times).

Writer = Callable[[bytearray, Any], None]


def _null_writer(f: Field, version: int, flexible: bool, what: str, wide: bool) -> Writer:
    nullable = version in f.nullable
    marker = b"\x00" if flexible else (_I32 if wide else _I16).pack(-1)

    def write_null(out: bytearray, value: Any) -> None:
        if not nullable:
            raise ValueError(f"{what}: null is not allowed in version {version}")
        out += marker
    return write_null


def _compile_value(ftype: str, f: Field, version: int, flexible: bool, what: str) -> Writer:
    s = _FIXED.get(ftype)
    if s is not None:
        pack = s.pack

        def write_fixed(out: bytearray, value: Any) -> None:
            out += pack(value)
        return write_fixed
    if ftype == "bool":
        def write_bool(out: bytearray, value: Any) -> None:
            out.append(1 if value else 0)
        return write_bool
    if ftype in ("string", "bytes"):
        null = _null_writer(f, version, flexible, what, ftype == "bytes")
        is_string = ftype == "string"
        size = (_I16 if is_string else _I32).pack

        def write_blob(out: bytearray, value: Any) -> None:
            if value is None:
                null(out, value)
                return
            data = value.encode("utf-8") if is_string else bytes(value)
            if flexible:
                _uvarint(len(data) + 1, out)
            else:
                out += size(len(data))
            out += data
        return write_blob
    if ftype.startswith("[]"):
        null = _null_writer(f, version, flexible, what, True)
        item = _compile_struct(f.fields, version, flexible, what) if f.fields is not None \
            else _compile_value(ftype[2:], f, version, flexible, what)
        count = _I32.pack

        def write_array(out: bytearray, value: Any) -> None:
            if value is None:
                null(out, value)
                return
            if flexible:
                _uvarint(len(value) + 1, out)
            else:
                out += count(len(value))
            for v in value:
                item(out, v)
        return write_array
    raise ValueError(f"{what}: unsupported type {ftype}")


def _compile_struct(fields: tuple[Field, ...], version: int, flexible: bool, where: str,
                    spliced: str | None = None) -> Writer:
    """`spliced`: the name of an array field whose value is given as its elements' encodings
    (a list of bytes, see `encode_spliced`)."""
    writers = []
    for f in fields:
        if f.tag is not None or version not in f.versions:
            continue
        fflex = flexible if f.flexible is None else version in f.flexible
        if f.name == spliced:
            writers.append((f.name, (), _spliced_array(fflex)))
            continue
        writers.append((f.name, f.default, _compile_value(f.type, f, version, fflex, f"{where}.{f.name}")))
    writers_t = tuple(writers)

    def write_struct(out: bytearray, value: Any) -> None:
        get = value.get
        for name, default, write in writers_t:
            write(out, get(name, default))
        if flexible:
            out.append(0)  # no tagged fields
    return write_struct


def _spliced_array(flexible: bool) -> Writer:
    count = _I32.pack

    def write_encoded(out: bytearray, items: list[bytes]) -> None:
        if flexible:
            _uvarint(len(items) + 1, out)
        else:
            out += count(len(items))
        for data in items:
            out += data
    return write_encoded


@lru_cache(maxsize=None)
def _encoder(name: str, version: int, spliced: str | None = None) -> Writer:
    sp = spec(name)
    if spliced is not None and not any(f.name == spliced and f.type.startswith("[]") and f.fields is not None
                                       for f in sp.fields):
        raise ValueError(f"{name}: {spliced} is not an array of structs")
    return _compile_struct(sp.fields, version, version in sp.flexible, name, spliced)


@lru_cache(maxsize=None)
def _element_encoder(name: str, version: int, field: str) -> Writer:
    sp = spec(name)
    f = next((f for f in sp.fields if f.name == field and f.fields is not None), None)
    if f is None or version not in f.versions:
        raise ValueError(f"{name}: {field} is not an array of structs in version {version}")
    flexible = version in sp.flexible if f.flexible is None else version in f.flexible
    return _compile_struct(f.fields, version, flexible, f"{name}.{field}")


def encode_element(name: str, version: int, field: str, value: dict) -> bytes:
    """The bytes of one element of the top-level array of structs `field` of message `name`, as
    `encode` writes it inside the message (for `encode_spliced`)."""
    out = bytearray()
    _element_encoder(name, version, field)(out, value)
    return bytes(out)


def encode_spliced(name: str, version: int, value: dict, field: str, elements: list[bytes]) -> bytes:
    """`encode(name, version, value)` with the top-level array `field` given as its elements'
    encodings (`encode_element`): a broker answers all-topics Metadata from each topic's bytes,
    kept until the topic changes, instead of encoding 10,000 partitions per UpdateMetadata."""
    sp = spec(name)
    if version not in sp.valid:
        raise ValueError(f"{name}: version {version} is not valid ({sp.valid})")
    out = bytearray()
    _encoder(name, version, field)(out, {**value, field: elements})
    return bytes(out)


def encode(name: str, version: int, value: dict) -> bytes:
    """The bytes of message `name` at `version`; absent fields take the spec's defaults."""
    sp = spec(name)
    if version not in sp.valid:
        raise ValueError(f"{name}: version {version} is not valid ({sp.valid})")
    out = bytearray()
    _encoder(name, version)(out, value)
    return bytes(out)


def is_flexible(name: str, version: int) -> bool:
    return version in spec(name).flexible
