"""`codec.digest` computed faster, for re-executing millions of events.

The live loop records `codec.digest(commands)`: blake2b-128 of the canonical JSON of
`codec.encode_commands(commands)`. Most decisions are small (an UpdateMetadata per broker for an
ISR change) and their text is dominated by the same `live_brokers` list repeated in every
command and in every decision. This module produces the *same bytes* while serialising each
shared list once per decision (codec only shares lists of 16 items or more) and keeping the text
of recent `live_brokers` tuples across decisions (keyed by value, never by id).

The fold compares this digest with the journal's; on a mismatch it recomputes with
`codec.digest` itself before reporting anything, so a difference here could only cost time,
never produce a false finding. Tests check both agree on every decision of a generated journal.
"""
from __future__ import annotations

import hashlib

import attrs

from controller_core import codec
from controller_core import commands as C

from .collector import gc_paused

try:  # orjson (the journal writer's encoder) is optional: executors may have only attrs and immutables
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the executor's packages
    _orjson = None


def _canonical(obj) -> str:
    """`codec.canonical_json(obj)`, by orjson where it writes the same text: sorted keys and
    compact separators are the same, and the values here are str keys, ints, ASCII strings,
    lists and dicts (codec writes no floats); anything else goes to codec itself."""
    if _orjson is not None:
        try:
            raw = _orjson.dumps(obj, option=_orjson.OPT_SORT_KEYS)
        except TypeError:
            return codec.canonical_json(obj)
        if raw.isascii():
            return raw.decode("ascii")
    return codec.canonical_json(obj)
_EMPTY = hashlib.blake2b(b"[]", digest_size=16).hexdigest()
_KEY_TEXT: dict[str, str] = {}
_ORDER: dict[tuple, list[str]] = {}
_BROKERS: dict[tuple, str] = {}
_BROKERS_CAP = 256


def _key(k: str) -> str:
    t = _KEY_TEXT.get(k)
    if t is None:
        t = _KEY_TEXT[k] = _canonical(k) + ":"
    return t


_INTS = ("broker_id", "broker_epoch", "controller_epoch")


def _direct(cls, brokers_field: str):
    """How to write a broker request's text directly: its fields in canonical (sorted) order,
    the int fields, and the tail; None if the class no longer looks like one."""
    names = [f.name for f in attrs.fields(cls)]
    if not set(_INTS) <= set(names) or "partitions" not in names or brokers_field not in names \
            or cls.__name__ not in codec.VERSIONS or not all(n < "type" for n in names):
        return None
    tail = f'"type":"{cls.__name__}","v":{codec.VERSIONS[cls.__name__]}}}'
    return cls, brokers_field, sorted(names), tail


_DIRECT = {d[0]: d for d in (_direct(C.SendUpdateMetadata, "live_brokers"), _direct(C.SendLeaderAndIsr, "live_leaders"))
           if d is not None}


def digest(commands) -> str:
    """Equal to `codec.digest(commands)`."""
    if not commands:
        return _EMPTY
    commands = tuple(commands)
    if _DIRECT and all(c.__class__ in _DIRECT for c in commands):
        return _digest_requests(commands)
    return _digest_generic(commands)


def _digest_requests(commands) -> str:
    """Only broker requests (most decisions: an UpdateMetadata per broker): each field's text is
    made once per decision (per value for the broker list, across decisions), no dicts."""
    texts: dict[tuple, str] = {}
    out = []
    with gc_paused():
        for c in commands:
            _, brokers_field, names, tail = _DIRECT[c.__class__]
            encoded = None
            parts = []
            for name in names:
                value = getattr(c, name)
                if name in _INTS and value.__class__ is int:
                    text = str(value)
                elif name == brokers_field:
                    text = _BROKERS.get(value)
                    if text is None:
                        if encoded is None:
                            encoded = codec.encode_command(c)
                        if len(_BROKERS) >= _BROKERS_CAP:
                            _BROKERS.clear()
                        text = _BROKERS[value] = _canonical(encoded[name])
                else:
                    key = (name, id(value))
                    text = texts.get(key)
                    if text is None:
                        if encoded is None:
                            encoded = codec.encode_command(c)
                        text = texts[key] = _canonical(encoded[name])
                parts.append(_key(name) + text)
            parts.append(tail)
            out.append("{" + ",".join(parts))
    h = hashlib.blake2b(digest_size=16)
    h.update(("[" + ",".join(out) + "]").encode("ascii"))
    return h.hexdigest()


def _digest_generic(commands) -> str:
    with gc_paused():
        encoded = codec.encode_commands(commands)
        seen: dict[int, int] = {}
        for d in encoded:
            for v in d.values():
                if v.__class__ is list:
                    seen[id(v)] = seen.get(id(v), 0) + 1
        texts: dict[int, str] = {}
        h = hashlib.blake2b(digest_size=16)
        h.update(b"[")
        for n, (c, d) in enumerate(zip(commands, encoded)):
            if n:
                h.update(b",")
            keys = d.keys()
            sig = tuple(keys)
            order = _ORDER.get(sig)
            if order is None:
                order = _ORDER[sig] = sorted(keys)
            parts = []
            for k in order:
                v = d[k]
                cls = v.__class__
                if cls is int:
                    text = str(v)
                elif cls is list:
                    vid = id(v)
                    text = texts.get(vid)
                    if text is None:
                        if k == "live_brokers":
                            key = c.live_brokers
                            text = _BROKERS.get(key)
                            if text is None:
                                if len(_BROKERS) >= _BROKERS_CAP:
                                    _BROKERS.clear()
                                text = _BROKERS[key] = _canonical(v)
                        else:
                            text = _canonical(v)
                        if seen.get(vid, 0) > 1 or k == "live_brokers":
                            texts[vid] = text
                else:
                    text = _canonical(v)
                parts.append(_key(k) + text)
            h.update(("{" + ",".join(parts) + "}").encode("ascii"))
        h.update(b"]")
        return h.hexdigest()
