"""Reading journal record lines for the replay: the journal format's check, with a faster parser.

Every record the replay folds is checked with `adapters.journal.format.verify_line` (checksum,
JSON object, required fields). That module uses the standard library only; here the checked
bytes are parsed with orjson where orjson gives `json.loads`' value: three to four times faster
on the small records that make up most of a journal (an ISR change and its effects record:
about 10 µs each with json, 3 µs with orjson), about twice as fast on big ones.

Used by `replay.local` (its scan) and by the fold tasks on the executors (`replay.tasks`), where
orjson is optional: without it this is `json.loads`.
"""
from __future__ import annotations

import json

from adapters.journal.format import verify_line as _verify_line

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the executor's packages
    _orjson = None

# orjson reads an integer outside 64 bits (20 digits or more, or 19 after a minus sign) as a
# float where json reads an int: a line holding a run of 19 digits is left to json. The run is
# found by mapping every digit to "9" and everything else to " " and searching for 19 nines,
# two passes in C (under 1 µs on a small record; a regular expression took 6 to 20 µs)
_DIGITS = bytes(0x39 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_RUN = b"9" * 19


def loads(raw: bytes):
    """`json.loads(raw)`. orjson parses strict JSON into the same values (floats correctly
    rounded, the last of duplicate keys wins), except integers beyond 64 bits, which go to json;
    whatever orjson refuses (NaN, a lone surrogate escape, bad UTF-8, deep nesting) goes to json
    too, which accepts it as before or raises its own error, so a bad line's reason is unchanged."""
    if _orjson is not None and _RUN not in raw.translate(_DIGITS):
        try:
            return _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(raw)


def verify_line(line: str | bytes) -> dict:
    """`adapters.journal.format.verify_line(line)`, parsed by `loads`."""
    return _verify_line(line, loads)
