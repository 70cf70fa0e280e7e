"""The Spark job's first two reads of the segments done in Python tasks, when the segments are
on the local file system (`job.run(direct_io=True)`): each task reads its segments itself
(`tasks.read_segment`) where Spark's whole-text reader decompressed them in the JVM.

- `hash_arrow`: each segment's content hash, length and the hash of the prefix an earlier run
  audited (`job._hash`'s rows, for the checkpoint's manifest);
- `lines_arrow`: every line of a segment with its checks, as the rows of `LINES_SCHEMA`, the
  same rows `replay.job._lines` computes with Spark SQL (where every file's text was split into
  rows in the JVM, each row checked with SQL expressions and its header parsed with
  `from_json`).

The line checks are the SQL scan's, line for line:

- `crc_ok`: the line starts `{"crc":"<8 hex>",` and the hex is the lowercase CRC-32 of the line
  with its `"crc"` member cut out (`adapters.journal.format.checksum_problem`, the journal
  reader's own rule);
- the header (seq, controller id and epoch, at, type, v) is parsed from the line's prefix up to
  `,"body":` (the writer's key order), else from the whole line; `ok` when the checksum holds and
  every header field has its type (an int of 64 bits, `type` a string: the journal format's
  `verify_line` rules, a little stricter than `from_json`, which turns any JSON value into a
  string);
- `event_seq` of an effects record, `cluster_id` of a snapshot head (from its first 400
  characters), `has_nul` (a NUL byte: unwritten space at a torn tail), `torn` (the last line,
  with no newline after it).

A line that is not `ok` carries no seq or type, as `replay.local` reports a corrupt record
without them. Imported on the executors from the shipped zip: no pyspark here.
"""
from __future__ import annotations

import re
import zlib

from adapters.journal.format import REQUIRED_FIELDS, checksum_problem

from .tasks import split_lines

LINES_SCHEMA = ("journal STRING, path STRING, name_seq BIGINT, line INT, torn BOOLEAN, has_nul BOOLEAN, "
                "ok BOOLEAN, crc_ok BOOLEAN, seq BIGINT, type STRING, event_seq BIGINT, cluster_id STRING")

_BODY = b',"body":'
_EFFECTS_BODY = b',"body":{"event_seq":'  # (the writer's effects records: parsed whole, once)
_INT_FIELDS = tuple(name for name, kind in REQUIRED_FIELDS.items() if kind is int)
_LOW, _HIGH = -(1 << 63), (1 << 63) - 1
_CLUSTER_ID = re.compile(r'"type":"snapshot","v":\d+,"body":\{"cluster_id":"([^"]*)"', re.ASCII)


def _int(value):
    """The value if it is an int of 64 bits (the SQL scan's BIGINT), else None."""
    return value if type(value) is int and _LOW <= value <= _HIGH else None


def _header(obj) -> tuple | None:
    """(seq, type) when every header field of the parsed record has its type, else None."""
    if type(obj) is not dict:
        return None
    get = obj.get
    for name in _INT_FIELDS:  # (`_int` inlined: this runs for every line of a journal)
        value = get(name)
        if type(value) is not int or not _LOW <= value <= _HIGH:
            return None
    kind = get("type")
    return (obj["seq"], kind) if type(kind) is str else None


def _parsed(raw: bytes, loads):
    try:
        return loads(raw)
    except ValueError:
        return None


def check_lines(data: bytes, loads) -> tuple[list, ...]:
    """The checks of every line of one segment's bytes, as columns: line numbers, torn,
    has_nul, ok, crc_ok, seq, type, event_seq, cluster_id. `loads` parses JSON bytes and raises
    ValueError on bad JSON (`adapters.runtime.jsonfast.loads`)."""
    pieces, torn_last = split_lines(data)
    torn_line = len(pieces) if torn_last else 0
    cols = tuple([] for _ in range(9))
    line_no, torn, has_nul, ok, crc, seqs, types, event_seqs, clusters = cols
    for i, raw in enumerate(pieces, 1):
        line_no.append(i)
        torn.append(i == torn_line)
        has_nul.append(b"\0" in raw)
        good = checksum_problem(raw) is None
        crc.append(good)
        head = record = None
        if good:
            at = raw.find(_BODY)
            if at > 0 and not raw.startswith(_EFFECTS_BODY, at):
                head = _header(_parsed(raw[:at] + b"}", loads))
            if head is None:  # an effects record (its event_seq is in the body), or another key order
                record = _parsed(raw, loads)
                head = _header(record)
        if head is None:
            ok.append(False)
            seqs.append(None)
            types.append(None)
            event_seqs.append(None)
            clusters.append(None)
            continue
        ok.append(True)
        seqs.append(head[0])
        kind = head[1]
        types.append(kind)
        event_seq = cluster = None
        if kind == "effects":
            if record is None:
                record = _parsed(raw, loads)
            body = record.get("body") if type(record) is dict else None
            event_seq = _int(body.get("event_seq")) if type(body) is dict else None
        elif i == 1 and kind == "snapshot":
            m = _CLUSTER_ID.search(raw[:1600].decode("utf-8", "replace")[:400])
            cluster = (m.group(1) or None) if m is not None else None  # (an empty id: none, as the SQL's nullif)
        event_seqs.append(event_seq)
        clusters.append(cluster)
    return cols


HASH_SCHEMA = "path STRING, sha STRING, chars BIGINT, prefix STRING"


def hash_arrow(batches, schema):
    """Under `mapInArrow`: batches of (path, pchars) in (pchars: the length in characters of
    the prefix to hash as well, or null), batches of `HASH_SCHEMA` out. The hash is SHA-256 of
    the decompressed bytes, as Spark's `sha2` of the text; the length counts characters
    (code points), as Spark's `length` does for UTF-8 text (bytes that are not UTF-8 count one
    each here); a segment that cannot be read has none (`job._unreadable` says why)."""
    import hashlib

    import pyarrow as pa

    from .tasks import read_segment

    for b in batches:
        out = {f.name: [] for f in schema}
        for path, pchars in zip(b.column("path").to_pylist(), b.column("pchars").to_pylist()):
            try:
                data = read_segment(path)
            except (OSError, EOFError, zlib.error):
                row = (None, None, None)
            else:
                text = data.decode("utf-8", "surrogateescape")
                prefix = None
                if pchars is not None:
                    prefix = hashlib.sha256(text[:pchars].encode("utf-8", "surrogateescape")).hexdigest()
                row = (hashlib.sha256(data).hexdigest(), len(text), prefix)
            out["path"].append(path)
            for name, value in zip(("sha", "chars", "prefix"), row):
                out[name].append(value)
        yield pa.RecordBatch.from_arrays([pa.array(out[f.name], f.type) for f in schema], schema=schema)


def lines_arrow(batches, schema):
    """Under `mapInArrow`: batches of (path, journal, name_seq) in, one record batch of
    `LINES_SCHEMA` (`schema`, as Arrow) per segment out."""
    import pyarrow as pa

    from . import package

    package.ensure_deps()
    from adapters.runtime.jsonfast import loads

    from .collector import gc_paused
    from .tasks import read_segment

    names = [f.name for f in schema]
    with gc_paused():  # (a value per field of every header parsed: nothing cyclic to collect)
        for b in batches:
            for path, journal, name_seq in zip(b.column("path").to_pylist(), b.column("journal").to_pylist(),
                                               b.column("name_seq").to_pylist()):
                cols = check_lines(read_segment(path), loads)
                n = len(cols[0])
                values = dict(zip(names[3:], cols))
                values["journal"], values["path"], values["name_seq"] = [journal] * n, [path] * n, [name_seq] * n
                yield pa.RecordBatch.from_arrays([pa.array(values[f.name], f.type) for f in schema], schema=schema)
