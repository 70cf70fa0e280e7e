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

from controller_core import codec

_canonical = codec.canonical_json
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


def digest(commands) -> str:
    """Equal to `codec.digest(commands)`."""
    if not commands:
        return _EMPTY
    commands = tuple(commands)
    with codec.gc_paused():
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
