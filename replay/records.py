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

from adapters.journal.format import verify_line as _verify_line
from adapters.runtime.jsonfast import loads


def verify_line(line: str | bytes) -> dict:
    """`adapters.journal.format.verify_line(line)`, parsed by `loads`."""
    return _verify_line(line, loads)
