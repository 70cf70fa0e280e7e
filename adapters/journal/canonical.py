"""The canonical JSON text of the commands' digest, written by orjson where orjson writes the
same text (controller_core/digest.py defines the digest; its default writer is the standard
library's encoder). Used by the live loop for the journal's "effects" records and by the replay
to re-digest millions of decisions. orjson is optional: Spark executors may not have it."""
from __future__ import annotations

from controller_core import codec

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the executor's packages
    _orjson = None


def _by_orjson(obj) -> str:
    """`codec.canonical_json(obj)`: sorted keys and compact separators are orjson's too, and the
    values here are str keys, ints, ASCII strings, lists and dicts (codec writes no floats);
    anything else, or text outside printable ASCII that orjson writes raw (non-ASCII, DEL;
    codec escapes them), goes to codec itself."""
    try:
        raw = _orjson.dumps(obj, option=_orjson.OPT_SORT_KEYS)
    except TypeError:
        return codec.canonical_json(obj)
    if raw.isascii() and b"\x7f" not in raw:  # (orjson leaves DEL as it is; codec escapes it)
        return raw.decode("ascii")
    return codec.canonical_json(obj)


canonical = _by_orjson if _orjson is not None else None
"""The writer to give `codec.digester` (None: the core's default)."""
