"""`codec.digest` for the replay: the core's fast digest, with orjson and the collector paused.

The live loop records `codec.digest(commands)` (blake2b-128 of the canonical JSON of
`codec.encode_commands(commands)`; the fast computation is controller_core/digest.py). The
replay re-executes millions of events and digests them with a `Digester` of its own whose JSON
writer is orjson where it writes the same text (it is the journal writer's encoder, optional on
executors), with the cyclic collector paused around each call (a big decision's encoding
allocates hundreds of thousands of small values; the core does not touch the collector).

The fold compares this digest with the journal's; on a mismatch it recomputes with
`codec.digest` before reporting anything. Tests check that both agree with
`codec.reference_digest` on every decision of a generated journal.
"""
from __future__ import annotations

from controller_core import codec

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


_DIGESTER = codec.digester(_canonical if _orjson is not None else None)


def digest(commands) -> str:
    """Equal to `codec.digest(commands)` (and to `codec.reference_digest(commands)`)."""
    with gc_paused():
        return _DIGESTER.digest(commands)
