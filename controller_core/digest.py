"""The digest of a decision's commands, computed fast: what the live loop journals and the
replay checks.

Who uses it: the controller loop (adapters/controller/loop.py) writes `codec.digest(commands)`
into each event's "effects" record; the replay (replay/fold.py, through replay/digest.py)
re-executes the event and compares. `codec.digest` is a `Digester` of this module.

The definition is `codec.reference_digest`: hex blake2b-128 of
`codec.canonical_json(codec.encode_commands(commands))`, the whole text built in one piece. A
`Digester` gives the same bytes faster. Most decisions are small (an ISR change: one
UpdateMetadata per broker, all sharing one `partitions` tuple and one `live_brokers` tuple), and
their text is mostly the same broker list repeated in every command and in every decision. So:

- a decision made only of broker requests (`SendUpdateMetadata`, `SendLeaderAndIsr`) is written
  a command at a time as its int fields (`%d`) followed by the text of its tuple fields, which is
  made once per distinct set of tuples in the decision; within it, the broker list's text is
  made once per *set of broker objects* across decisions, and the other tuples are encoded by
  the codec (which is told to skip the broker list);
- any other decision is encoded by the codec (which encodes a shared tuple once, as one list
  object) and each command's dict is written in key order with a list met twice serialised once.

The broker-list cache is keyed by the identities of the `BrokerInfo` objects and holds them, so
an id in it cannot be reused by another object while the entry lives; the objects are frozen, so
the same objects always give the same text. (Keying by value would be unsound: `port=True`
equals `port=1` but encodes differently.) The caches are plain dicts whose entries are only ever
added or dropped whole, so threads may share them (the loop digests in a worker thread): a race
costs a recomputation, never a wrong text.

This module does not import the codec (the codec builds its `Digester` from its own functions),
and does not touch the garbage collector (see codec.py): callers that digest big decisions pause
it themselves, as the replay does.
"""
from __future__ import annotations

import hashlib
import json
import operator
from typing import Any, Callable, Iterable

import attrs

from . import commands as C
from .codec_tables import VERSIONS

__all__ = ["Digester"]

Canonical = Callable[[Any], str]
"""A JSON writer giving the codec's canonical text (sorted keys, no spaces, ASCII only)."""

_INTS = ("broker_epoch", "broker_id", "controller_epoch")  # sorted
_SKIPPED: list = []  # stands in for the encoded broker list, whose text is cached (see _rest_text)
_BROKERS_CAP = 256
_EMPTY = hashlib.blake2b(b"[]", digest_size=16).hexdigest()


def _key_text(name: str) -> str:
    return json.dumps(name, ensure_ascii=True)


class _Request:
    """How to write one broker-request class directly: its int fields, which sort first, through
    `head` (a %-format), then the text of its other fields and `tail` ("type" and "v")."""

    __slots__ = ("brokers_field", "ints", "head", "rest", "rest_steps", "tail", "brokers", "fields")

    def __init__(self, cls: type, brokers_field: str, rest: list[str], fields: dict | None = None):
        self.brokers_field = brokers_field
        self.ints = operator.attrgetter(*_INTS)  # a tuple of the int fields' values, in key order
        self.head = "{" + ",".join(_key_text(n) + ":%d" for n in _INTS) + ","
        self.rest = operator.attrgetter(*rest)
        # (name, key text, is the broker list) of the other fields, in key order
        self.rest_steps = tuple((n, ("," if k else "") + _key_text(n) + ":", n == brokers_field)
                                for k, n in enumerate(rest))
        self.tail = f',"type":{_key_text(cls.__name__)},"v":{VERSIONS[cls.__name__]}}}'
        # the broker list's text across decisions: ids of the BrokerInfo objects -> (the objects,
        # text); holding the objects keeps the ids in a key theirs (see the module docstring)
        self.brokers: dict[tuple, tuple[tuple, str]] = {}
        # the codec's encoding of each other tuple field, one field at a time (None: the whole
        # command is encoded, as the codec encodes it, and the fields taken from it)
        self.fields = fields

    @classmethod
    def plan(cls, command_class: type, brokers_field: str,
             field_encoder: Callable[[type, str], Callable] | None = None) -> "_Request | None":
        """None if the class no longer has the shape this relies on (the three int fields
        sorting before two or more tuple fields, `partitions` and the broker list among them,
        every field sorting before "type"): the generic path then digests it, so a changed
        command class cannot change a digest."""
        names = sorted(f.name for f in attrs.fields(command_class))
        rest = names[len(_INTS):]
        if tuple(names[:len(_INTS)]) != _INTS or len(rest) < 2 or "partitions" not in rest \
                or brokers_field not in rest or any(n in _INTS for n in rest) \
                or command_class.__name__ not in VERSIONS or not all(n < "type" for n in names):
            return None
        fields = None
        if field_encoder is not None:
            fields = {n: field_encoder(command_class, n) for n in rest if n != brokers_field}
            if None in fields.values():
                fields = None
        return cls(command_class, brokers_field, rest, fields)


class Digester:
    """`digest(commands)` equal to `codec.reference_digest(commands)`, with its own caches.

    - `encode(command, memo)`: the codec's encoding of one command, sharing the encoded list of a
      tuple met again through `memo` (as `codec.encode_commands` does for a batch);
    - `canonical`: the JSON writer (the codec's `canonical_json`, or one writing the same text
      faster, as the replay's orjson writer);
    - `field_encoder(cls, name)` (optional): the codec's encoding of one field of a command
      class, as its command encoding writes that field: a broker request's partitions are then
      encoded without the rest of the command (an ISR change's digest spent a tenth of its time
      building the dict of a command it only took two fields from).
    """

    def __init__(self, encode: Callable[[Any, dict | None], dict], canonical: Canonical,
                 field_encoder: Callable[[type, str], Callable] | None = None):
        self.encode = encode
        self.canonical = canonical
        self.requests = {cls: plan for cls, plan in (
            (C.SendUpdateMetadata, _Request.plan(C.SendUpdateMetadata, "live_brokers", field_encoder)),
            (C.SendLeaderAndIsr, _Request.plan(C.SendLeaderAndIsr, "live_leaders", field_encoder)))
            if plan is not None}
        self._key_texts: dict[str, str] = {}
        self._orders: dict[tuple, list[str]] = {}

    def digest(self, commands: Iterable[Any]) -> str:
        if not commands:
            return _EMPTY
        commands = tuple(commands)  # keeps every value alive, so ids stay unique during the call
        requests = self.requests
        for c in commands:
            if c.__class__ not in requests:
                return self._generic(commands)
        return self._requests(commands)

    __call__ = digest

    # -- broker requests only -------------------------------------------------------------------

    def _requests(self, commands: tuple) -> str:
        requests = self.requests
        rests: dict[tuple, str] = {}  # (plan, ids of the tuple fields' values) -> their text
        out = []
        for c in commands:
            plan = requests[c.__class__]
            ints = plan.ints(c)
            a, b, e = ints  # (the three of _INTS)
            if a.__class__ is not int or b.__class__ is not int or e.__class__ is not int:
                return self._generic(commands)  # not exactly ints (a bool): as the codec writes it
            values = plan.rest(c)
            key = (plan, *map(id, values))
            text = rests.get(key)
            if text is None:
                text = rests[key] = self._rest_text(plan, c, values)
            out.append(plan.head % ints + text)
        return hashlib.blake2b(("[" + ",".join(out) + "]").encode("ascii"), digest_size=16).hexdigest()

    def _rest_text(self, plan: _Request, c, values: tuple) -> str:
        """A broker request's text from its first tuple field on (`"live_brokers":...`)."""
        fields = plan.fields
        if fields is not None:
            try:
                return self._fields_text(plan, c, values, fields)
            except (AttributeError, TypeError):
                pass  # a value the codec cannot encode: its own encoding says so (CodecError)
        parts = []
        encoded = None
        for (name, key, is_brokers), value in zip(plan.rest_steps, values):
            if is_brokers:
                text = self._brokers_text(plan, value, c)
            else:
                if encoded is None:
                    brokers = getattr(c, plan.brokers_field)
                    # the codec reuses its memo entry for a tuple it meets again: give it the
                    # broker tuple as already encoded, since its text comes from the cache
                    # (unless `partitions`, the other memoised field, is that very tuple)
                    memo = {id(brokers): _SKIPPED} if brokers and brokers is not c.partitions else None
                    encoded = self.encode(c, memo)
                v = encoded[name]
                text = "[]" if v.__class__ is list and not v else self.canonical(v)
            parts.append(key + text)
        parts.append(plan.tail)
        return "".join(parts)

    def _fields_text(self, plan: _Request, c, values: tuple, fields: dict) -> str:
        """`_rest_text` with each field encoded on its own (the same encoding: the codec's)."""
        parts = []
        canonical = self.canonical
        for (name, key, is_brokers), value in zip(plan.rest_steps, values):
            if is_brokers:
                text = self._brokers_text(plan, value, c)
            else:
                v = fields[name](value)
                text = "[]" if v.__class__ is list and not v else canonical(v)
            parts.append(key + text)
        parts.append(plan.tail)
        return "".join(parts)

    def _brokers_text(self, plan: _Request, value: tuple, command) -> str:
        cache = plan.brokers
        key = tuple(map(id, value))
        hit = cache.get(key)
        if hit is not None:
            return hit[1]
        text = self.canonical(self.encode(command, None)[plan.brokers_field])
        if len(cache) >= _BROKERS_CAP:
            cache.clear()
        cache[key] = (value, text)
        return text

    # -- any decision -----------------------------------------------------------------------------

    def _generic(self, commands: tuple) -> str:
        memo: dict = {}
        encoded = [self.encode(c, memo) for c in commands]  # as codec.encode_commands
        seen: dict[int, int] = {}
        for d in encoded:
            for v in d.values():
                if v.__class__ is list:
                    seen[id(v)] = seen.get(id(v), 0) + 1
        canonical = self.canonical
        key_texts = self._key_texts
        texts: dict[int, str] = {}
        h = hashlib.blake2b(digest_size=16)
        h.update(b"[")
        for n, d in enumerate(encoded):
            if n:
                h.update(b",")
            sig = tuple(d)
            order = self._orders.get(sig)
            if order is None:
                order = self._orders[sig] = sorted(sig)
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
                        text = canonical(v)
                        if seen[vid] > 1:
                            texts[vid] = text
                else:
                    text = canonical(v)
                kt = key_texts.get(k)
                if kt is None:
                    kt = key_texts[k] = canonical(k) + ":"
                parts.append(kt + text)
            h.update(("{" + ",".join(parts) + "}").encode("ascii"))
        h.update(b"]")
        return h.hexdigest()
