"""Reading controller journals back: checksums, segment order and gap detection.

Standard library only, so that this module ships to Spark executors unchanged and the offline
tools can read a journal without Spark. The writer is `adapters.journal.writer`; both sides share the
error types defined here.

Layout
------
A journal is one directory written by one controller process. It holds segment files named by
the seq of their first record, zero-padded to 20 digits so that names sort in seq order:

    segment-00000000000000000001.jsonl       the open (or last) segment
    segment-00000000000000004097.jsonl.gz    a closed segment, gzip-compressed

Files whose names start with "." (the writer's lock and compression temporaries) are not part of
the journal; Spark skips them too. If a crash during compression left both
`segment-N.jsonl` and `segment-N.jsonl.gz`, the plain file is the authoritative copy and the
`.gz` is ignored. Old segments may have been removed by retention, so a journal may start at any
seq; between the segments that are present, seq must be gap-free.

Record lines
------------
One record per line, UTF-8 (in practice pure ASCII), terminated by "\\n":

    {"crc":"1a2b3c4d","seq":7,"controller_id":1,"controller_epoch":3,"at":1700000000000,"type":"event","v":1,"body":{...}}

The checksum rule. Let LINE be the line without its "\\n". LINE must start with the 8
characters `{"crc":"`, then exactly 8 lowercase hex digits H, then the 2 characters `",`.
Let REST be LINE from character 18 on (0-based; character 19 counting from 1). Then H must be
the zero-padded lowercase hex of `zlib.crc32(("{" + REST).encode("utf-8"))`. In other words the
checksum covers the compact JSON object without its "crc" member, and the writer inserts
`"crc":"H",` right after the object's opening brace; a reader never re-serialises anything.

In Spark SQL the same check on a `spark.read.text` column `value` is

    lower(lpad(hex(crc32(concat('{', substring(value, 19)))), 8, '0')) = substring(value, 9, 8)
    AND substring(value, 1, 8) = '{"crc":"' AND substring(value, 17, 2) = '",'

(`substring` is 1-based; the prefix is ASCII so character and byte positions agree).

After the checksum, the line must parse as a JSON object with the fields `seq`,
`controller_id`, `controller_epoch`, `at`, `v` (integers), `type` (string) and `body` (object).

Torn tails
----------
The writer only ever appends whole lines, so the one legitimate defect is an unfinished last line
after a crash: a last line without its "\\n", or a complete last line holding NUL bytes (space the
file system allocated but the crash left unwritten). The writer truncates such a tail when it
reopens the journal. A complete last line that fails its checksum without a NUL in it is not a
torn write but a damaged record (a flipped bit): it may have been fsynced, so dropping it would
lose a durable record, and it is corruption like any other bad line. Readers treat it as corruption unless asked to
tolerate it (`tolerate_torn_tail=True`), and only ever on the last line of the journal's last
segment. Any other bad line raises `JournalCorruption` naming the file and the 1-based line.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

__all__ = [
    "JournalError",
    "JournalCorruption",
    "JournalGap",
    "InvalidRecord",
    "TornTail",
    "Segment",
    "SegmentScan",
    "REQUIRED_FIELDS",
    "verify_line",
    "segment_name",
    "parse_segment_name",
    "list_segments",
    "iter_records",
    "scan_segment",
    "read_journal",
    "find_journals",
]

CRC_PREFIX = '{"crc":"'
CRC_PREFIX_LEN = len(CRC_PREFIX)  # 8
REST_START = CRC_PREFIX_LEN + 8 + 2  # 18: after `{"crc":"` + 8 hex + `",`
_CRC_PREFIX_B = CRC_PREFIX.encode("ascii")
_CRC_OF_BRACE = zlib.crc32(b"{")
_HEX = frozenset(b"0123456789abcdef")

REQUIRED_FIELDS: dict[str, type] = {
    "seq": int,
    "controller_id": int,
    "controller_epoch": int,
    "at": int,
    "type": str,
    "v": int,
    "body": dict,
}
"""Every record's fields (besides "crc") and their JSON types."""

_SEGMENT_RE = re.compile(r"^segment-(\d{20})\.jsonl(\.gz)?$")


# ---------------------------------------------------------------------------------------------
# errors


class JournalError(Exception):
    """Base class of every journal problem (reading or writing)."""


class JournalCorruption(JournalError):
    """A record that fails verification, anywhere a torn tail is not acceptable.

    `path` and `line` (1-based) locate it; `reason` says what is wrong. Either may be None when
    the problem is not tied to one line.
    """

    def __init__(self, path: str | os.PathLike | None, line: int | None, reason: str):
        self.path = None if path is None else str(path)
        self.line = line
        self.reason = reason
        where = self.path or "<journal>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):  # keep the attributes across pickling (Spark ships exceptions)
        return (type(self), (self.path, self.line, self.reason))


class JournalGap(JournalCorruption):
    """Records are missing between two segments (or the segment name disagrees with its content).

    `expected` is the seq that should have come next, `found` the seq that did.
    """

    def __init__(self, path, line, reason, expected: int | None = None, found: int | None = None):
        super().__init__(path, line, reason)
        self.expected = expected
        self.found = found

    def __reduce__(self):
        return (type(self), (self.path, self.line, self.reason, self.expected, self.found))


class InvalidRecord(ValueError):
    """One line fails the record rule; `reason` says why. Raised by `verify_line`."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------------------------------------
# one line


def verify_line(line: str | bytes, loads: Callable[[bytes], object] = json.loads) -> dict:
    """Check one record line and return the record without its "crc" member.

    Accepts the line with or without its trailing "\\n" (Spark's text reader strips it), as
    `str` or UTF-8 `bytes`. Raises `InvalidRecord` with a reason when the line is not a valid
    record. `loads` parses the checked bytes; another parser must give `json.loads`' values and
    raise `ValueError` where it does (the replay's is `replay.records.loads`).
    """
    raw = line.encode("utf-8") if isinstance(line, str) else bytes(line)
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    return _verify_bytes(raw, loads)


def checksum_problem(raw: bytes) -> str | None:
    """Why a record line's bytes (without its "\\n") fail the checksum rule of the module
    docstring, or None when they pass. Only the checksum: whether the rest is a record is
    `verify_line`'s business (the replay's line scan, replay/scan.py, asks this alone)."""
    if not raw.startswith(_CRC_PREFIX_B):
        return 'line does not start with {"crc":"<8 hex>",'
    stored = raw[CRC_PREFIX_LEN : CRC_PREFIX_LEN + 8]
    if raw[CRC_PREFIX_LEN + 8 : REST_START] != b'",' or not _HEX.issuperset(stored):
        return 'line does not start with {"crc":"<8 lowercase hex>",'
    actual = zlib.crc32(memoryview(raw)[REST_START:], _CRC_OF_BRACE)
    if int(stored, 16) != actual:
        return f"checksum mismatch: stored {stored.decode()}, computed {actual:08x}"
    return None


def _verify_bytes(raw: bytes, loads: Callable[[bytes], object] = json.loads) -> dict:
    if len(raw) < REST_START + 1:
        raise InvalidRecord('line does not start with {"crc":"<8 hex>",')
    problem = checksum_problem(raw)
    if problem is not None:
        raise InvalidRecord(problem)
    try:
        record = loads(raw)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise InvalidRecord(f"checksum matches but the line is not valid JSON: {exc}") from None
    if type(record) is not dict:
        raise InvalidRecord("record is not a JSON object")
    del record["crc"]
    for name, kind in REQUIRED_FIELDS.items():
        value = record.get(name)
        if type(value) is not kind:  # `type is` also rejects booleans posing as ints
            if name not in record:
                raise InvalidRecord(f"missing field {name!r}")
            raise InvalidRecord(f"field {name!r} is {type(value).__name__}, expected {kind.__name__}")
    return record


# ---------------------------------------------------------------------------------------------
# segments


class Segment(NamedTuple):
    first_seq: int
    path: Path

    @property
    def compressed(self) -> bool:
        return self.path.name.endswith(".gz")


def segment_name(first_seq: int, compressed: bool = False) -> str:
    """File name of the segment whose first record has seq `first_seq`."""
    return f"segment-{first_seq:020d}.jsonl" + (".gz" if compressed else "")


def parse_segment_name(name: str) -> tuple[int, bool] | None:
    """`(first_seq, compressed)` for a segment file name, None for any other name."""
    m = _SEGMENT_RE.match(name)
    if m is None:
        return None
    return int(m.group(1)), m.group(2) is not None


def list_segments(directory: str | os.PathLike) -> list[Segment]:
    """The segments of one journal in seq order, one file per first seq (plain wins over .gz)."""
    chosen: dict[int, Path] = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            parsed = parse_segment_name(entry.name)
            if parsed is None or not entry.is_file():
                continue
            seq, compressed = parsed
            if seq in chosen and compressed:
                continue  # the plain copy survived a crash mid-compression: it is authoritative
            chosen[seq] = Path(entry.path)
    return [Segment(seq, chosen[seq]) for seq in sorted(chosen)]


class TornTail(NamedTuple):
    """An unfinished last line: where it starts (line number, byte offset) and why it is bad."""

    line: int
    offset: int
    reason: str


def _open_segment(path: Path):
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def _iter_verified(
    path: Path, tolerate_torn_tail: bool, loads: Callable[[bytes], object] = json.loads
) -> Iterator[tuple[int, int, dict] | TornTail]:
    """Yield `(line_no, end_offset, record)` per good line; a tolerated torn tail comes last as
    a `TornTail`. Checks that seq increases by one within the file and that the first record's
    seq matches the file name."""
    parsed = parse_segment_name(path.name)
    expected = parsed[0] if parsed else None
    offset = 0
    line_no = 0
    pending: TornTail | None = None  # a bad line that is only acceptable if nothing follows it
    try:
        with _open_segment(path) as f:
            for raw in f:
                line_no += 1
                if pending is not None:
                    raise JournalCorruption(path, pending.line, pending.reason)
                start = offset
                offset += len(raw)
                if not raw.endswith(b"\n"):
                    reason = "last line has no trailing newline (torn write)"
                    if tolerate_torn_tail:
                        yield TornTail(line_no, start, reason)
                        return
                    raise JournalCorruption(path, line_no, reason)
                try:
                    record = _verify_bytes(raw[:-1], loads)
                except InvalidRecord as exc:
                    if b"\0" not in raw:  # a whole line that is wrong: damaged, not torn
                        raise JournalCorruption(path, line_no, exc.reason) from None
                    pending = TornTail(line_no, start, f"{exc.reason} (NUL bytes: an unfinished write)")
                    continue
                seq = record["seq"]
                if expected is not None and seq != expected:
                    if line_no == 1:
                        raise JournalGap(
                            path, 1,
                            f"first record has seq {seq} but the file name says {expected}",
                            expected, seq,
                        )
                    raise JournalCorruption(path, line_no, f"seq {seq} follows {expected - 1}")
                expected = seq + 1
                yield line_no, offset, record
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise JournalCorruption(path, line_no + 1, f"cannot read segment: {exc}") from exc
    if pending is not None:
        if tolerate_torn_tail:
            yield pending
        else:
            raise JournalCorruption(path, pending.line, pending.reason)


def iter_records(
    path: str | os.PathLike,
    *,
    tolerate_torn_tail: bool = False,
    on_torn_tail: Callable[[TornTail], None] | None = None,
) -> Iterator[dict]:
    """Yield the verified records of one segment file (plain or .gz), in file order.

    Raises `JournalCorruption(path, line, reason)` at the first bad line. With
    `tolerate_torn_tail`, a bad *last* line of a plain segment ends the iteration instead and is
    passed to `on_torn_tail`; compressed segments are sealed and never have a tolerated tail.
    """
    path = Path(path)
    tolerate = tolerate_torn_tail and not path.name.endswith(".gz")
    for item in _iter_verified(path, tolerate):
        if isinstance(item, TornTail):
            if on_torn_tail is not None:
                on_torn_tail(item)
            return
        yield item[2]


class SegmentScan(NamedTuple):
    """Summary of one segment as the writer needs it when reopening a journal."""

    path: Path
    first_seq: int
    records: int
    last_record: dict | None
    good_bytes: int  # offset just after the last good line
    torn: TornTail | None


def scan_segment(path: str | os.PathLike, *, tolerate_torn_tail: bool = True,
                 loads: Callable[[bytes], object] = json.loads) -> SegmentScan:
    """Verify a whole segment and summarise it (the writer's check of the last segment).
    `loads` as for `verify_line` (the writer passes a faster parser)."""
    path = Path(path)
    parsed = parse_segment_name(path.name)
    if parsed is None:
        raise ValueError(f"not a segment file name: {path.name}")
    records = 0
    last = None
    good = 0
    torn = None
    tolerate = tolerate_torn_tail and not parsed[1]
    for item in _iter_verified(path, tolerate, loads):
        if isinstance(item, TornTail):
            torn = item
            break
        _, good, last = item
        records += 1
    return SegmentScan(path, parsed[0], records, last, good, torn)


# ---------------------------------------------------------------------------------------------
# whole journals


def read_journal(
    directory: str | os.PathLike,
    *,
    tolerate_torn_tail: bool = True,
    on_torn_tail: Callable[[Path, TornTail], None] | None = None,
) -> Iterator[dict]:
    """Yield every record of one journal in seq order, checking that seq is gap-free.

    A segment that does not start where the previous one ended raises `JournalGap`, naming the
    missing seq range and the file after the gap. By default a torn last line of the *last*
    segment is skipped (the writer would truncate it on reopen) and reported to `on_torn_tail`;
    pass `tolerate_torn_tail=False` to make it an error.
    """
    segments = list_segments(directory)
    expected: int | None = None
    previous: Path | None = None
    for index, segment in enumerate(segments):
        if expected is not None and segment.first_seq != expected:
            if segment.first_seq > expected:
                reason = (
                    f"records {expected}..{segment.first_seq - 1} are missing between "
                    f"{previous.name if previous else '?'} and {segment.path.name}"
                )
            else:
                reason = (
                    f"segment starts at seq {segment.first_seq} but {previous.name if previous else '?'} "
                    f"already reached seq {expected - 1}"
                )
            raise JournalGap(segment.path, 1, reason, expected, segment.first_seq)
        last = index == len(segments) - 1

        def report(tail: TornTail, _path=segment.path) -> None:
            if on_torn_tail is not None:
                on_torn_tail(_path, tail)

        count = 0
        for record in iter_records(
            segment.path, tolerate_torn_tail=tolerate_torn_tail and last, on_torn_tail=report
        ):
            count += 1
            yield record
        expected = segment.first_seq + count
        previous = segment.path


def find_journals(root: str | os.PathLike) -> list[Path]:
    """Every journal directory at or under `root` (any directory holding a segment file), sorted.

    Hidden directories (names starting with ".") are not searched.
    """
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if any(_SEGMENT_RE.match(name) for name in filenames):
            found.append(Path(dirpath))
    return sorted(found)
